"""One registry for step types, input adapters and search providers: built-ins found
by module, unknown names answered with the nearest one."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.checks.json_schema import step_schema_names
from runner.engine.steps.base import step_class
from runner.errors import RunnerError
from runner.inputs import ADAPTERS
from runner.pipeline.step_catalog import STEPS
from runner.registry import Registry
from runner.search import PROVIDERS

REPO = Path(__file__).resolve().parent.parent


def test_builtins_are_found_by_module_without_an_import_list():
    assert STEPS.names() == ["compute", "decide", "excerpts", "fail", "foreach", "formula", "jury", "llm", "loop", "pipeline",
                             "quote_match", "read_lines", "read_table", "search", "string_check", "text_similarity"]
    assert {"json", "jsonl", "markdown_citations", "yaml"} <= set(ADAPTERS.names())
    assert {"local", "tavily"} <= set(PROVIDERS.names())


def test_every_step_type_is_one_module_plus_its_schema():
    assert sorted(step_schema_names()) == STEPS.names()
    for name in STEPS.names():
        assert step_class(name).__module__ == f"runner.engine.steps.{name}"


@pytest.mark.parametrize("registry,name,message", [
    (STEPS, "desicde", "unknown step type 'desicde'. Did you mean 'decide'?"),
    (ADAPTERS, "jsonn", "unknown input adapter 'jsonn'. Did you mean 'json'?"),
    (PROVIDERS, "tavly", "unknown search provider 'tavly'. Did you mean 'tavily'?"),
])
def test_unknown_names_get_the_nearest_one(registry, name, message):
    with pytest.raises(RunnerError) as caught:
        registry.get(name)
    assert str(caught.value) == message


def test_a_registry_lists_its_names_when_none_is_close():
    widgets: Registry[int] = Registry("widget", "runner.search")
    widgets.add("gear", 1)
    assert widgets.get("gear") == 1 and "gear" in widgets
    with pytest.raises(RunnerError) as caught:
        widgets.get("xyz")
    assert str(caught.value) == "unknown widget 'xyz' (known: gear)"


def test_a_lookup_imports_only_the_module_it_names():
    """A run imports the step types its pipeline uses, not every one (each costs its
    import and its dataclasses); a name in another module still falls back to all."""
    import subprocess
    import sys
    code = ("import sys; from runner.pipeline.step_catalog import STEPS; from runner.inputs import ADAPTERS; "
            "STEPS.get('decide'); steps = sorted(m for m in sys.modules if m.startswith('runner.engine.steps.')); "
            "ADAPTERS.get('json'); print(steps, 'runner.inputs.structured' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['runner.engine.steps.base', 'runner.engine.steps.decide'] True"


def test_checking_a_pipeline_imports_only_the_step_types_it_names(tmp_path):
    """The loader's catalog reads a step type when a step names it: a first load (nothing
    validated yet) of the citation judge imports its 4 step types, not all 14."""
    import subprocess
    import sys
    code = ("import sys; from runner.pipeline.loader import load_pipeline; "
            f"load_pipeline({str(REPO / 'pipelines' / 'citation_judge.yaml')!r}); "
            "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('runner.engine.steps.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['base', 'decide', 'jury', 'llm_call', 'quote_match', 'read_lines']"


def test_an_unknown_step_type_is_named_with_the_nearest_known_one(tmp_path):
    from runner.errors import ConfigError
    from runner.pipeline.loader import load_pipeline
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nname: p\ninput: {adapter: json}\nsteps:\n  - id: a\n    uses: quote_mach\n"
                    "output: {x: 1}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path)
    assert "unknown step type 'quote_mach'. Did you mean 'quote_match'?" in str(caught.value)
