"""The pipeline language page, built from the registries, docstrings and schemas."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from runner.docgen.examples import CHOSEN_NAMES, FEATURES, FILTERS, GLOBALS, NAMESPACES, TESTS, Example
from runner.text.sentences import split_sentences

DOC_FILE = Path("docs") / "pipeline-language.md"
_RST = re.compile(r":\w+:`~?([^`]+)`|``([^`]+)``|`([^`]+)`_")


def first_sentence(function: Any, note: str = "") -> str:
    """`note` when given, else the first sentence of the docstring, as plain Markdown."""
    if note:
        return note
    doc = inspect.getdoc(function) or ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    paragraph = _RST.sub(lambda m: f"`{m.group(1) or m.group(2) or m.group(3)}`", paragraph)
    first = (split_sentences(paragraph) or [""])[0]
    return first[:-1] + "." if first.endswith(":") else first


def _entries(title: str, table: dict[str, Any], examples: dict[str, Example],
             order: list[str]) -> list[str]:
    lines = [f"### {title}", ""]
    groups: dict[Any, list[str]] = {}          # names by the function they name (Jinja's aliases: ==, eq, equalto)
    for name, function in table.items():
        groups.setdefault(function, []).append(name)
    for name in order:
        function = table[name]
        names = groups[function]
        if name != next(n for n in names if n in examples):
            continue
        example = examples[name]
        aliases = ", ".join(f"`{n}`" for n in names)
        result = json.dumps(example.result, ensure_ascii=False, default=str)
        lines.append(f"- {aliases}: {first_sentence(function, example.note)} `{{{{ {example.expression} }}}}` "
                     f"{'→' if example.checked else '→ e.g.'} `{result}`")
    return [*lines, ""]


def _steps() -> list[str]:
    from runner.checks.result_shapes import ShapeContext, describe
    from runner.docgen.arguments import arguments, example_step
    from runner.pipeline.step_catalog import STEPS, step_info, step_names
    lines = ["## Step types", "",
             "A step has an `id`, a type (`uses`), its arguments (`with`) and optionally `if`, `on_error` "
             "(`fail`, `continue`, `default`) and `default`; later steps read `steps.ID.FIELD`. A top-level "
             "`defaults:` says them once per step type (`defaults: {llm: {on_error: default, default: "
             "{failed: true}}}`); a step's own win.", "",
             "A step whose `if` is false reads as the empty value of its result, so no guard is needed to "
             "read it: by JSON type a string is `\"\"`, a number `0`, a boolean `false`, an array `[]`, an "
             "object the empty values of its known fields (and false in a condition), and a type that allows "
             "null (or a shape of no one type) `null`; `steps.ID.skipped` is true. A step that failed into "
             "its `default` reads as the default laid over that empty value. A step that calls models "
             "(`llm`, `jury`, and `foreach`/`loop` around them) tells how many calls it made (`calls`: a "
             "re-ask to repair an answer is one more) and the attempts they took (`attempts`: retries "
             "included, none for a cached answer).", ""]
    for name in step_names():
        if not STEPS.get(name).__module__.startswith(STEPS.builtins):
            continue          # a plug-in registered in this process (a test's): not runner's language
        info = step_info(name)
        lines += [f"### `{name}`", "", info.summary, "", "- arguments:" if info.schema.get("properties")
                  else "- arguments: none"]
        for arg in arguments(info.schema):
            depth = "  " * (arg.name.count(".") + arg.name.count("[]") + 1)
            default = f", default `{arg.default}`" if arg.default is not None else ""
            note = f": {arg.description}" if arg.description else ""
            lines.append(f"{depth}- `{arg.name}` ({arg.kind}{', required' if arg.required else ''}{default}){note}")
            lines += [f"{depth}  - `{value}`: {what}" for value, what in arg.choices if what]
        lines += [f"- result: {describe(info.result_schema({}, ShapeContext()))}",
                  f"- example: `- {example_step(name, info.schema)}`", ""]
    return lines


def _names() -> list[str]:
    lines = ["## Names in scope", "",
             "A template sees only these names (an unknown one is an error naming it, never an empty string).",
             ""]
    lines += [f"- `{name}` ({where}): {what}. `{example}`" for name, (where, what, example) in NAMESPACES.items()]
    lines += ["", "Names a pipeline chooses:", ""]
    lines += [f"- {name}: {what}. `{example}` with `{declared}`"
              for name, (what, example, declared) in CHOSEN_NAMES.items()]
    return [*lines, ""]


def _adapters() -> list[str]:
    from runner.inputs import ADAPTERS, options_schema
    lines = ["## Input adapters", "", "`input.adapter` turns `--input FILE` into items (`--record KEY=VALUE` "
             "makes one item without a file).", ""]
    for name in ADAPTERS.names():
        lines.append(f"- `{name}`: {first_sentence(ADAPTERS.get(name))} `input: {{adapter: {name}}}`")
        for option, spec in ((options_schema(name) or {}).get("properties") or {}).items():
            lines.append(f"    - `with.{option}`: {spec.get('description', '')}")
    lines += ["", "`--input -` reads standard input (copied once to a temporary file, removed when the run "
              "ends) with the pipeline's adapter, or with `--input-format NAME` (e.g. "
              "`cat items.csv | runner run judge.yaml --input - --input-format csv`)."]
    return [*lines, ""]


def _features() -> list[str]:
    lines = ["## Features by example", "",
             "Each example is the files of a project; the tests run it on the records shown and check the results.",
             ""]
    for feature in FEATURES:
        lines += [f"### {feature.title}", "", feature.text, ""]
        for path, text in feature.files.items():
            kind = "yaml" if path.endswith(".yaml") else "jinja"
            lines += [f"`{path}`:", "", f"```{kind}", text.rstrip("\n"), "```", ""]
        pairs = [json.dumps({"record": r, "result": o}, ensure_ascii=False)
                 for r, o in zip(feature.records, feature.results, strict=True)]
        said = f" (the model answers {', '.join(repr(a) for a in feature.answers)})" if feature.answers else ""
        lines += [f"Run on each record{said}, it gives:", "", "```json", *pairs, "```", ""]
    return lines


def _plugins() -> list[str]:
    from runner.inputs import ADAPTERS
    from runner.pipeline.step_catalog import STEPS
    from runner.templating.filters import ENTRY_GROUP
    groups = {"step types": STEPS.entry_group, "input adapters": ADAPTERS.entry_group, "filters": ENTRY_GROUP}
    return ["## Plugins", "",
            "A project's own step types, input adapters and filters come from an installed package, through "
            "entry points (" + ", ".join(f"`{group}` for {kind}" for kind, group in groups.items()) + "; the "
            "entry point's name is the step type's, adapter's or filter's), or from modules the pipeline names: "
            "`plugins: [my_judges.steps, plugins/scoring.py]` (an importable module, or a `.py` file relative to "
            "the project folder and inside it). Nothing else is imported. A module registers what it brings with "
            "`@register` (runner.engine.steps.base; the class's `schema` is its `with:` schema), "
            "`@adapter(\"name\")` (runner.inputs) and `@template_filter(\"name\")` "
            "(runner.templating.filters); see docs/writing-pipelines.md, \"Plugins\", for a whole example.", ""]


def render_page() -> str:
    from runner.templating.filters import RUNNER_FILTERS
    from runner.templating.sandbox import make_environment
    env = make_environment()
    jinja_filters = sorted(set(env.filters) - set(RUNNER_FILTERS))
    lines = ["# The pipeline language", "",
             "Generated from the code by `python -m runner.docgen`; do not edit (a test fails when it is "
             "stale). Every checked example below is evaluated by the tests.", "",
             *_steps(),
             "## Expressions", "",
             "A string holding `{{ ... }}` is a Jinja template; a string that is exactly one `{{ expression }}` "
             "yields its native value (number, list, mapping); `if:`, `when:` and `until:` take a bare "
             "expression. Templates run in Jinja's sandbox.", "",
             *_entries("Filters of runner", {n: env.filters[n] for n in RUNNER_FILTERS}, FILTERS,
                       list(RUNNER_FILTERS)),
             *_entries("Filters of Jinja", {n: env.filters[n] for n in jinja_filters}, FILTERS, jinja_filters),
             *_entries("Tests (`x is NAME`, `select('NAME')`)", dict(env.tests), TESTS, sorted(env.tests)),
             *_entries("Global functions", dict(env.globals), GLOBALS, sorted(env.globals)),
             *_names(), *_adapters(), *_plugins(), *_features()]
    return "\n".join(lines).rstrip("\n") + "\n"
