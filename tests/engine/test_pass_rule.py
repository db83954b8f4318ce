"""Issue 61: the pass rule is one object (runner/engine/rates.py: `PassRule`) read through one
adapter, `rates.pass_check`, by every caller: the run's end (runner/api.py), `--failed-from`
(runner/engine/selection.py), probes (runner/probe/run.py) and view's badges
(runner/view/run_list.py). What each reads is tested where it is used (tests/outputs,
tests/engine/test_selection.py, tests/probe, tests/view)."""

from __future__ import annotations

from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "runner"
RATES = RUNNER / "engine" / "rates.py"


def sources_with(text: str) -> set[str]:
    return {str(path.relative_to(RUNNER.parent)) for path in RUNNER.rglob("*.py")
            if path != RATES and text in path.read_text(encoding="utf-8")}


def test_every_caller_reads_the_pass_rule_through_one_adapter():
    assert sources_with("PassRule.of(") == set()
    assert sources_with("pass_check(") >= {"runner/api.py", "runner/engine/selection.py", "runner/probe/run.py",
                                           "runner/view/run_list.py"}
