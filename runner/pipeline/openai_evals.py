"""`runner import openai-evals FILE` (docs/openai-evals.md): an OpenAI eval (its
`testing_criteria` and `data_source_config`) or one grader object, as a runner pipeline with its
prompts, answer schemas and (with --allow-python) plugins, written into a project as `runner
init` writes a judge: nothing over an existing file, and checked once written. The pipeline
reads the Evals JSONL rows as they are (`namespaces: [item, sample]`); `passed` is every grader
passed. A refusal names its JSON path (`--skip TYPE` leaves a type's graders out, saying so)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.errors import RunnerError
from runner.fileio import read_json
from runner.pipeline.files import PIPELINE_NAME, write_new_files
from runner.pipeline.openai_graders import Converted, Refusal, add_grader, step_id

GENERATING = ("completions", "responses")       # run data sources whose samples a model makes


@dataclass
class Imported:
    """What an import wrote and left out."""

    name: str
    files: list[str]
    skipped: list[str] = field(default_factory=list)     # "testing_criteria[2] (python)"
    models: list[str] = field(default_factory=list)      # the model seats, named after their graders


def import_openai_eval(file: Path, root: Path, name: str | None = None, skip: tuple[str, ...] = (),
                       allow_python: bool = False) -> Imported:
    """Write the pipeline of the eval in `file` under the project `root`; RunnerError (every
    refusal, each with its JSON path) when it cannot be imported whole."""
    data = read_json(file, strict=True)
    criteria, prefix = _criteria(data, file)
    kinds = [grader.get("type") for grader in criteria if isinstance(grader, dict)]
    present = {kind for kind in kinds if isinstance(kind, str)}
    unmatched = [kind for kind in skip if kind not in present]
    if unmatched:
        raise RunnerError(f"--skip {unmatched[0]}: no grader of that type in {file} (its types: "
                          f"{', '.join(sorted(str(kind) for kind in present))})")
    name = name or _name(data, file)
    if not PIPELINE_NAME.match(name):
        raise RunnerError(f"--name {name}: a pipeline's name is lowercase letters, digits and _, starting with a "
                          f"letter (e.g. qa_eval)")
    out = Converted(name, allow_python=allow_python)
    refusals: list[str] = [f"{file}: {problem}" for problem in _source_problems(data)]
    skipped: list[str] = []
    graders: list[str] = []
    for number, grader in enumerate(criteria):
        where = f"{prefix}[{number}]" if prefix else "grader"
        kind = grader.get("type") if isinstance(grader, dict) else None
        if kind in skip:
            skipped.append(f"{where} ({kind}: '{grader.get('name', '')}')")
            continue
        sid = step_id(grader.get("name") if isinstance(grader, dict) else None, out.ids, f"grader_{number + 1}")
        try:         # after a refusal nothing is written: what a refused grader left in `out` is never read
            passed, _ = add_grader(out, grader, where, True, sid)
            out.passed.append(passed)
            graders.append(sid)
        except Refusal as refusal:
            refusals.append(f"{file}: {refusal}" + (f" (`--skip {kind}` imports the rest)" if isinstance(kind, str)
                                                      else ""))
    if refusals:
        raise RunnerError("cannot import it whole:\n" + "\n".join(refusals))
    if not out.passed:
        raise RunnerError(f"{file}: no grader left to import" + (" (every one skipped)" if skipped else ""))
    files = {f"pipelines/{name}.yaml": _pipeline_text(out, graders, file), **out.files}
    write_new_files(root, files, "runner import", "--name")
    _check(root, name, files)
    return Imported(name, list(files), skipped, sorted(out.models))


def _criteria(data: Any, file: Path) -> tuple[list[Any], str]:
    """The graders (and the JSON path of their list): an eval's testing_criteria, or one grader."""
    if isinstance(data, dict) and isinstance(data.get("testing_criteria"), list):
        return data["testing_criteria"], "testing_criteria"
    if isinstance(data, dict) and "type" in data:
        return [data], ""
    raise RunnerError(f"{file}: neither an eval (an object with testing_criteria) nor a grader object (with type)")


def _source_problems(data: dict[str, Any]) -> list[str]:
    """A run's data source that makes its samples with a model: runner judges rows as they are."""
    problems = []
    for key in ("data_source", "data_source_config"):
        source = data.get(key)
        if isinstance(source, dict) and (source.get("type") in GENERATING or "input_messages" in source):
            problems.append(f"{key} (type {source.get('type')!r}): it generates the samples with a model "
                            "(input_messages); runner judges rows as they are: generate the samples first and "
                            "give the JSONL of {item, sample} rows as --input")
    return problems


def _name(data: Any, file: Path) -> str:
    given = data.get("name") if isinstance(data, dict) and "testing_criteria" in data else None
    text = re.sub(r"[^a-z0-9_]+", "_", str(given or file.stem).lower()).strip("_")
    return (text if re.match(r"[a-z]", text or "") else f"eval_{text}")[:64].rstrip("_")


def _pipeline_text(out: Converted, graders: list[str], file: Path) -> str:
    pipeline: dict[str, Any] = {
        "version": 1, "name": out.name,
        "description": f"Imported from the OpenAI eval {file.name} by `runner import openai-evals`: each grader "
                       f"a result field of its name (label or score, passed), `passed` every one passed.",
        "input": {"adapter": "jsonl", "namespaces": ["item", "sample"]},
    }
    if out.plugins:
        pipeline["plugins"] = out.plugins
    if out.models:
        pipeline["models"] = out.models
    pipeline["steps"] = out.steps
    pipeline["output"] = {**out.output, "passed": "{{ " + " and ".join(f"({p})" for p in out.passed) + " }}"}
    rates = {sid: f"result.{sid}.passed" for sid in graders}      # each grader's (not a multi's parts')
    # `passed` first and the pass rule: --fail-under, --failed-from, junit and view's badges all gate
    # on every grader having passed, as the eval's testing criteria do, not on its first grader
    pipeline["summary"] = {"pass_when": "result.passed", "rates": {"passed": "result.passed", **rates}}
    return yaml.safe_dump(pipeline, sort_keys=False, allow_unicode=True, width=110)


def _check(root: Path, name: str, files: dict[str, str]) -> None:
    """Validate what was written; when it does not hold, remove it again and say why."""
    from runner.pipeline.loader import load_pipeline
    try:
        load_pipeline(root / "pipelines" / f"{name}.yaml")
    except RunnerError as exc:
        for relative in files:
            (root / relative).unlink(missing_ok=True)
        raise RunnerError(f"the imported pipeline does not validate (nothing kept): {exc}") from None
