"""docs/pipeline-language.md is generated from the code, and its examples hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.docgen.__main__ import main
from runner.docgen.examples import FILTERS, GLOBALS, NAMESPACES, TESTS, Example
from runner.docgen.page import DOC_FILE, first_sentence, render_page
from runner.templating.sandbox import Renderer, make_environment

REPO = Path(__file__).resolve().parents[2]
ENV = make_environment()
SCOPE = {"item": {"quote": "q"}}


def plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def test_the_committed_page_is_the_generated_one():
    committed = (REPO / DOC_FILE).read_text(encoding="utf-8")
    assert committed == render_page(), "docs/pipeline-language.md is stale: run python -m runner.docgen"


def test_check_mode_says_when_the_page_is_stale(tmp_path, capsys):
    page = tmp_path / "page.md"
    assert main(["--check", str(page)]) == 1
    assert main([str(page)]) == 0 and main(["--check", str(page)]) == 0
    page.write_text(page.read_text() + "edited by hand\n")
    assert main(["--check", str(page)]) == 1
    assert "is stale: run python -m runner.docgen" in capsys.readouterr().err


@pytest.mark.parametrize("kind,table,examples", [
    ("filter", ENV.filters, FILTERS), ("test", ENV.tests, TESTS), ("global", ENV.globals, GLOBALS)])
def test_every_filter_test_and_global_has_an_example_and_a_description(kind, table, examples):
    by_function: dict[Any, list[str]] = {}
    for name, function in table.items():
        by_function.setdefault(function, []).append(name)
    missing = [names for names in by_function.values() if not any(n in examples for n in names)]
    assert missing == [], f"{kind}s without an example in runner/docgen/examples.py: {missing}"
    assert set(examples) <= set(table), f"examples of unknown {kind}s: {set(examples) - set(table)}"
    for name, example in examples.items():
        assert first_sentence(table[name], example.note), f"{kind} {name} has no docstring and no note"


@pytest.mark.parametrize("name,example", [*FILTERS.items(), *TESTS.items(), *GLOBALS.items()])
def test_every_example_yields_what_the_page_says(name, example: Example):
    value = Renderer().value("{{ " + example.expression + " }}", SCOPE)
    if example.checked:
        assert plain(value) == plain(example.result)


def test_every_name_the_code_puts_in_scope_is_documented():
    from runner.checks.checker import BASE_NAMES, OUTPUT_NAMES, SUMMARY_NAMES
    from runner.pipeline.step_catalog import step_info, step_names
    declared = set(BASE_NAMES) | SUMMARY_NAMES | OUTPUT_NAMES | {"error", "errors"}
    for name in step_names():
        declared |= set(step_info(name).own_scope) | set(step_info(name).sub_scope)
    assert declared <= set(NAMESPACES), f"undocumented names: {declared - set(NAMESPACES)}"


def test_every_step_type_has_an_example_its_schema_accepts():
    from runner.checks.json_schema import validator_for
    from runner.pipeline.step_catalog import STEPS, step_info, step_names
    for name in step_names():
        if not STEPS.get(name).__module__.startswith(STEPS.builtins):
            continue        # a plug-in another test registered in this process
        schema = step_info(name).schema
        assert schema.get("examples"), f"runner/schemas/steps/{name}.schema.json has no example"
        for example in schema["examples"]:
            assert list(validator_for(schema).iter_errors(example)) == []


def test_every_input_adapter_says_what_it_reads():
    from runner.inputs import ADAPTERS
    for name in ADAPTERS.names():
        assert first_sentence(ADAPTERS.get(name)), f"input adapter {name} has no docstring"
        assert f"- `{name}`: " in render_page()


def test_the_readme_links_the_page():
    assert "(docs/pipeline-language.md)" in (REPO / "README.md").read_text(encoding="utf-8")
