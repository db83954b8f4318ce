"""Choosing items: --item, --filter, --failed-from."""

from __future__ import annotations

from helpers import write_json

PIPELINE = """
    version: 1
    name: sel
    steps: [{id: s, uses: compute, with: {r: "{{ 10 / item.d }}"}}]
    output:
      verdict: "{{ 'PASS' if steps.s.r >= 5 else 'FAIL' }}"
      d: "{{ item.d }}"
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    """


def indexes(project, out="out"):
    return [r["index"] for r in project.results(out)]


def test_item_filter_and_failed_from(project, cli):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"d": 1}, {"d": 5}, {"d": 0}, {"d": 2}, {"kind": "x"}])
    assert cli("run", str(path), "--input", str(source), "--out", "all", "--quiet").exit_code == 0
    verdicts = {r["index"]: r.get("verdict", "ERROR") for r in project.results("all")}
    assert verdicts == {1: "PASS", 2: "FAIL", 3: "ERROR", 4: "PASS", 5: "ERROR"}

    cli("run", str(path), "--input", str(source), "--out", "one", "--item", "4", "--quiet")
    assert indexes(project, "one") == [4]
    cli("run", str(path), "--input", str(source), "--out", "big", "--filter", "item.d >= 2", "--quiet")
    assert indexes(project, "big") == [2, 4]                  # item 5 has no d: not selected
    cli("run", str(path), "--input", str(source), "--out", "again", "--failed-from", "all", "--quiet")
    assert indexes(project, "again") == [1, 2, 3, 4, 5]       # merged into its parent (issue 32)
    assert project.summary("again")["rerun_items"] == 3         # 2, 3 and 5 ran again
    both = cli("run", str(path), "--input", str(source), "--out", "b", "--failed-from", "all",
               "--filter", "item.d is defined", "--quiet")
    assert both.exit_code == 0 and project.summary("b")["rerun_items"] == 2


def test_selection_mistakes_are_clear(project, cli):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"d": 1}, {"d": 2}])
    missing = cli("run", str(path), "--input", str(source), "--item", "7")
    assert missing.exit_code == 2 and missing.stderr.strip() == "--item 7: the input has 2 item(s)"
    broken = cli("run", str(path), "--input", str(source), "--filter", "item.nope > 1")
    assert broken.exit_code == 2 and broken.stderr.startswith("--filter 'item.nope > 1': ")
    nowhere = cli("run", str(path), "--input", str(source), "--failed-from", "gone")
    assert nowhere.exit_code == 2 and nowhere.stderr.strip() == "gone: no such run folder"
