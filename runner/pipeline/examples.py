"""`examples:` of `llm` and `jury` steps: items with the answer they should get, given to the
model as prior chat turns (few-shot).

An example is `{item: {...}, answer: ...}` (and optionally `key`: where it came from).
`examples:` is a list of them, or a JSONL file of them named relative to the file that names
it (as `extends:` names its base), else to the project folder; inside the project either way.
Validation checks each answer against the step's answer schema (its `output_schema`, a file or
an object), naming the YAML field (file:line:col) and, for a file, its line. The typed pipeline
holds the examples as a list, read once: the engine never reads the file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runner.checks.json_schema import first_error, schema_message
from runner.checks.result_shapes import ShapeContext
from runner.errors import ConfigError, InputError, Problem
from runner.fileio import read_json_lines
from runner.pipeline.files import named_file
from runner.pipeline.step_catalog import walk_steps
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

EXAMPLE_STEPS = ("llm", "jury")
EXAMPLE_KEYS = {"item", "answer", "key"}
MOST_EXAMPLES = 200


def _steps(data: Any) -> Iterator[tuple[DataPath, dict[str, Any]]]:
    """(path, with:) of every llm and jury step with `examples:`, nested ones too."""
    for path, step in walk_steps(data):
        if step.get("uses") in EXAMPLE_STEPS and isinstance(step.get("with"), dict) and "examples" in step["with"]:
            yield (*path, "with"), step["with"]


def _file_of(located: Located, path: DataPath, name: str, project_dir: Path) -> tuple[Path | None, str]:
    owner = Path(located.file_of(path))
    if not owner.is_file():                    # written by --set: relative to the pipeline file
        owner = Path(located.file)
    found, reason = named_file(owner, name, project_dir)
    if found is None and "not found" in reason:       # else relative to the project folder
        found, _ = named_file(project_dir / "_", name, project_dir)     # as if named by a file at the root
    return found, reason


def example_files(located: Located, project_dir: Path) -> list[Path]:
    """The examples files a pipeline names (part of what a validated pipeline is made of)."""
    files = (_file_of(located, (*path, "examples"), args["examples"], project_dir)[0]
             for path, args in _steps(located.data.get("steps")) if isinstance(args["examples"], str))
    return [file for file in files if file is not None]


def _loaded(located: Located, path: DataPath, value: Any, project_dir: Path) -> tuple[list[tuple[str, Any]], str]:
    """(where, example) of each example, `where` saying its line in a file; or why none."""
    if isinstance(value, list):
        return [(f"[{i}]", example) for i, example in enumerate(value)], ""
    if not isinstance(value, str):
        return [], "a JSONL file of examples, or a list of {item, answer}"
    file, reason = _file_of(located, path, value, project_dir)
    if file is None:
        return [], f"examples file {reason}"
    try:
        rows = list(read_json_lines(file, strict=True))
    except InputError as exc:
        return [], str(exc)
    if len(rows) > MOST_EXAMPLES:
        return [], f"{file}: {len(rows)} examples; at most {MOST_EXAMPLES} (each is sent with every call)"
    return [(f"{value} line {line}", example) for line, example in rows], ""


def _shape_problem(example: Any, args: dict[str, Any], schema: dict[str, Any] | None) -> str | None:
    if not isinstance(example, dict) or not {"item", "answer"} <= set(example):
        return "an example is an object with `item` (the item's fields) and `answer` (the answer it should get)"
    unknown = sorted(set(example) - EXAMPLE_KEYS)
    if unknown:
        return f"unknown key(s) {', '.join(unknown)}: an example has item, answer and optionally key"
    if not isinstance(example["item"], dict):
        return "`item` is an object: the fields the prompt reads as item.NAME"
    answer = example["answer"]
    if schema is not None:
        error = first_error(schema, answer)
        if error is not None:
            at = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            return f"answer{at} does not fit the step's answer schema: {schema_message(error)}"
    elif not args.get("json") and "output_schema" not in args and not isinstance(answer, str):
        return "the step answers in text (no output_schema): the answer is a string"
    return None


def example_problems(located: Located, project_dir: Path) -> list[Problem]:
    """Every example of every llm and jury step, read and checked against its answer schema."""
    problems: list[Problem] = []
    for path, args in _steps(located.data.get("steps")):
        where = (*path, "examples")
        examples, reason = _loaded(located, where, args["examples"], project_dir)
        if reason:
            problems.append(located.problem(where, reason))
            continue
        schema = ShapeContext(project_dir / "schemas").answer_schema(args.get("output_schema"))
        for place, example in examples:
            problem = _shape_problem(example, args, schema)
            if problem:
                inline = place.startswith("[")
                at = (*where, int(place[1:-1])) if inline else where
                problems.append(located.problem(at, problem if inline else f"{place}: {problem}"))
    return problems


def with_examples(uses: str, args: dict[str, Any], path: DataPath, located: Located,
                  project_dir: Path) -> dict[str, Any]:
    """A step's `with:` (the step at `path`) with its `examples:` file read into its list of examples."""
    if uses not in EXAMPLE_STEPS or not isinstance(args.get("examples"), str):
        return args
    examples, reason = _loaded(located, (*path, "with", "examples"), args["examples"], project_dir)
    if reason:
        raise ConfigError([located.problem((*path, "with", "examples"), reason)])
    return {**args, "examples": [example for _, example in examples]}
