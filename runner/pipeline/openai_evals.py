"""`runner import openai-evals FILE` (docs/openai-evals.md, with the table of what each grader
type becomes): an OpenAI eval (its `testing_criteria` and `data_source_config`) or one grader
object, as a runner pipeline with its prompts, answer schemas and (with --allow-python) plugins,
written into a project as `runner init` writes a judge: nothing over an existing file, and
checked once written. The pipeline reads the Evals JSONL rows as they are (`namespaces: [item,
sample]`); `passed` is every grader passed.

Each grader becomes steps whose id is the grader's name, and an output field of that name
holding what it gave (`label` or `score`) and `passed`; a `python` grader's source becomes a
plugin of the project only with --allow-python. What cannot be brought over (an unknown type,
an image input, meteor) is a Refusal naming the JSON path, never dropped (`--skip TYPE` leaves
a type's graders out, saying so)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.errors import RunnerError
from runner.fileio import read_json
from runner.pipeline.files import PIPELINE_NAME, write_new_files
from runner.pipeline.formula import FormulaError, parse_formula
from runner.text.similarity import EMBEDDING_METRICS, METRICS, UNAVAILABLE

GENERATING = ("completions", "responses")       # run data sources whose samples a model makes
TYPES = ("label_model", "score_model", "string_check", "text_similarity", "python", "multi")
ROLES = ("developer", "system", "user", "assistant")
SAMPLING = {"temperature": "temperature", "max_completions_tokens": "max_tokens", "max_tokens": "max_tokens",
            "top_p": "top_p", "seed": "seed"}
EMBEDDER = "openai/text-embedding-3-small"      # the embeddings model of an imported cosine grader


class Refusal(Exception):
    """What a grader has that runner cannot bring over, and where (a JSON path)."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")


@dataclass
class Converted:
    """What the graders of one eval become: steps, models, output fields, files to write."""

    name: str                                   # the pipeline's name: files are named after it
    allow_python: bool = False
    steps: list[dict[str, Any]] = field(default_factory=list)
    models: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)
    passed: list[str] = field(default_factory=list)      # each top-level grader's passed, as an expression
    files: dict[str, str] = field(default_factory=dict)   # project-relative path -> text
    plugins: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)


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


# ---- each grader as steps -------------------------------------------------------------------

def step_id(name: Any, taken: set[str], fallback: str) -> str:
    """The grader's name as a step id (letters, digits, _), made unique."""
    text = re.sub(r"[^A-Za-z0-9_]+", "_", str(name or "")).strip("_") or fallback
    if not re.match(r"[A-Za-z_]", text):
        text = f"g_{text}"
    if text in ("passed", "index", "error", "item_key"):
        text = f"{text}_grader"
    unique, number = text, 2
    while unique in taken:
        unique, number = f"{text}_{number}", number + 1
    taken.add(unique)
    return unique


def add_grader(out: Converted, grader: Any, where: str, top: bool, sid: str) -> tuple[str, str]:
    """Add one grader's steps as `sid`; (its passed, its score) as expressions."""
    if not isinstance(grader, dict):
        raise Refusal(where, f"a grader is a JSON object, not {type(grader).__name__}")
    kind = grader.get("type")
    if kind not in TYPES:
        raise Refusal(where, f"grader type {kind!r} is not one runner imports (known: {', '.join(TYPES)})")
    threshold = grader.get("pass_threshold")
    if top and kind in ("score_model", "text_similarity", "python", "multi") and threshold is None:
        raise Refusal(f"{where}.pass_threshold", f"a {kind} grader needs pass_threshold to decide passed")
    if threshold is not None and not _is_number(threshold):
        raise Refusal(f"{where}.pass_threshold", f"expected a number, got {type(threshold).__name__}")
    return CONVERTERS[kind](out, grader, where, sid, threshold)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(grader: dict[str, Any], key: str, where: str) -> str:
    value = grader.get(key)
    if not isinstance(value, str):
        raise Refusal(f"{where}.{key}", f"expected a template string, got {type(value).__name__}")
    return value


def _string_check(out: Converted, grader: dict[str, Any], where: str, sid: str, _: Any) -> tuple[str, str]:
    operation = grader.get("operation")
    if operation not in ("eq", "ne", "like", "ilike"):
        raise Refusal(f"{where}.operation", f"string_check operation {operation!r} is not eq, ne, like or ilike")
    return _comparison(out, grader, where, sid, "string_check", {"operation": operation})


def _text_similarity(out: Converted, grader: dict[str, Any], where: str, sid: str,
                     threshold: Any) -> tuple[str, str]:
    metric = grader.get("evaluation_metric")
    if isinstance(metric, str) and metric in UNAVAILABLE:
        raise Refusal(f"{where}.evaluation_metric", UNAVAILABLE[metric])
    if metric not in METRICS + EMBEDDING_METRICS:
        raise Refusal(f"{where}.evaluation_metric",
                      f"unknown metric {metric!r} (known: {', '.join(METRICS + EMBEDDING_METRICS)})")
    args = {"metric": metric}
    if metric in EMBEDDING_METRICS:
        out.models[sid] = {"model": EMBEDDER}
        args["model"] = sid
    if threshold is not None:
        args["threshold"] = threshold
    return _comparison(out, grader, where, sid, "text_similarity", args)


def _comparison(out: Converted, grader: dict[str, Any], where: str, sid: str, uses: str,
                args: dict[str, Any]) -> tuple[str, str]:
    """A step of `uses` comparing the grader's `input` with its `reference`: a score and passed."""
    out.steps.append({"id": sid, "uses": uses, "with": {"input": _text(grader, "input", where),
                                                        "reference": _text(grader, "reference", where), **args}})
    return _result(out, sid, f"steps.{sid}.passed", f"steps.{sid}.score")


def _result(out: Converted, sid: str, passed: str, score: str) -> tuple[str, str]:
    """The grader's output fields (its score and passed); (passed, score) as expressions."""
    out.output[sid] = {"score": f"{{{{ {score} }}}}", "passed": f"{{{{ {passed} }}}}"}
    return passed, score


def _messages(out: Converted, grader: dict[str, Any], where: str, sid: str) -> list[dict[str, str]]:
    """The grader's `input` messages, each content a prompt file (roles kept)."""
    messages = grader.get("input")
    if not isinstance(messages, list) or not messages:
        raise Refusal(f"{where}.input", "expected a list of messages ({role, content})")
    written = []
    for number, message in enumerate(messages):
        here = f"{where}.input[{number}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise Refusal(f"{here}.role", f"a message's role is one of {', '.join(ROLES)}")
        prompt = f"{out.name}.{sid}.{number}.{message['role']}.j2"
        out.files[f"prompts/{prompt}"] = _content(message.get("content"), f"{here}.content")
        written.append({"role": message["role"], "content": prompt})
    return written


def _content(content: Any, where: str) -> str:
    """A message's content as template text: a string, an input_text/output_text part, or a list of them."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_content(part, f"{where}[{n}]") for n, part in enumerate(content))
    kind = content.get("type") if isinstance(content, dict) else None
    if kind in ("input_text", "output_text") and isinstance(content.get("text"), str):
        return str(content["text"])
    raise Refusal(where, f"{kind or type(content).__name__} content is not text: runner's llm step sends text "
                         f"messages only (image and audio inputs are not imported)")


def _model_step(out: Converted, grader: dict[str, Any], where: str, sid: str, answer: dict[str, Any]) -> None:
    model = grader.get("model")
    if not isinstance(model, str) or not model:
        raise Refusal(f"{where}.model", "expected the grader's model name")
    schema = {"type": "object", "additionalProperties": False, "required": list(answer),
              "properties": {**answer, "reason": {"type": "string", "description": "Why, in one sentence."}}}
    schema_file = f"{out.name}.{sid}.schema.json"
    out.files[f"schemas/{schema_file}"] = json.dumps(schema, indent=2) + "\n"
    args: dict[str, Any] = {"model": sid, "messages": _messages(out, grader, where, sid), "output_schema": schema_file}
    sampling = grader.get("sampling_params") or {}
    entry: dict[str, Any] = {"model": model if "/" in model else f"openai/{model}"}
    for key, value in sampling.items() if isinstance(sampling, dict) else []:
        if key in SAMPLING and value is not None:
            args[SAMPLING[key]] = value
        elif key == "reasoning_effort" and value is not None:
            entry["params"] = {"reasoning_effort": value}
        elif value is not None:
            raise Refusal(f"{where}.sampling_params.{key}", f"sampling parameter {key!r} is not one runner sends")
    out.models[sid] = entry
    out.steps.append({"id": sid, "uses": "llm", "with": args})


def _label_model(out: Converted, grader: dict[str, Any], where: str, sid: str, _: Any) -> tuple[str, str]:
    labels, passing = grader.get("labels"), grader.get("passing_labels")
    if not isinstance(labels, list) or not labels or not all(isinstance(label, str) for label in labels):
        raise Refusal(f"{where}.labels", "expected a list of label strings")
    if not isinstance(passing, list) or not all(label in labels for label in passing):
        raise Refusal(f"{where}.passing_labels", "expected a list of labels, each one of labels")
    _model_step(out, grader, where, sid, {"label": {"enum": labels}})
    passed = f"steps.{sid}.output.label in {json.dumps(passing)}"
    out.output[sid] = {"label": f"{{{{ steps.{sid}.output.label }}}}", "passed": f"{{{{ {passed} }}}}"}
    return passed, f"(1 if {passed} else 0)"


def _score_model(out: Converted, grader: dict[str, Any], where: str, sid: str, threshold: Any) -> tuple[str, str]:
    given = grader.get("range") or [0, 1]
    if not (isinstance(given, list) and len(given) == 2 and all(map(_is_number, given)) and given[0] < given[1]):
        raise Refusal(f"{where}.range", f"expected [low, high], two numbers with low below high, got {given!r:.60}")
    low, high = given
    if threshold is not None and threshold > high:      # (below the range, every score passes: allowed)
        raise Refusal(f"{where}.pass_threshold", f"{threshold} is above the range [{low}, {high}]: no score could pass")
    _model_step(out, grader, where, sid, {"score": {"type": "number", "minimum": low, "maximum": high}})
    score = f"steps.{sid}.output.score"
    return _result(out, sid, f"{score} >= {threshold}" if threshold is not None else "true", score)


def _python(out: Converted, grader: dict[str, Any], where: str, sid: str, threshold: Any) -> tuple[str, str]:
    if not out.allow_python:
        raise Refusal(where, "a python grader's source is code that runs in runner's process as your own: "
                             "import it with --allow-python to write it as a plugin of this project "
                             "(or --skip python)")
    source = _text(grader, "source", where)
    plugin = f"plugins/{out.name}_{sid}.py"
    out.files[plugin] = PLUGIN.format(source=source.rstrip() + "\n", step=f"{out.name}_{sid}", grader=sid)
    out.plugins.append(plugin)
    out.steps.append({"id": sid, "uses": f"{out.name}_{sid}", "with": {"sample": "{{ sample }}", "item": "{{ item }}"}})
    score = f"steps.{sid}.score"
    return _result(out, sid, f"{score} >= {threshold}" if threshold is not None else "true", score)


def _multi(out: Converted, grader: dict[str, Any], where: str, sid: str, threshold: Any) -> tuple[str, str]:
    graders = grader.get("graders")
    if isinstance(graders, dict) and graders.get("type") in TYPES:
        graders = {str(graders.get("name") or "grader"): graders}         # one grader object
    if not isinstance(graders, dict) or not graders:
        raise Refusal(f"{where}.graders", "expected the sub-graders by the names calculate_output uses")
    formula = _text(grader, "calculate_output", where)
    try:
        parse_formula(formula, graders)
    except FormulaError as exc:
        raise Refusal(f"{where}.calculate_output", str(exc)) from None
    values = {}
    for key, sub in graders.items():
        _, score = add_grader(out, sub, f"{where}.graders.{key}", False, step_id(f"{sid}_{key}", out.ids, sid))
        values[key] = f"{{{{ {score} }}}}"
    args: dict[str, Any] = {"formula": formula, "values": values}
    if threshold is not None:
        args["threshold"] = threshold
    out.steps.append({"id": sid, "uses": "formula", "with": args})
    return _result(out, sid, f"steps.{sid}.passed", f"steps.{sid}.value")


CONVERTERS = {"label_model": _label_model, "score_model": _score_model, "string_check": _string_check,
              "text_similarity": _text_similarity, "python": _python, "multi": _multi}

PLUGIN = '''\
{source}

# Written by `runner import openai-evals` (with --allow-python): the grader above as the step
# type `{step}` of this project's pipeline, which calls grade(sample, item) on each row.
from runner.engine.steps.base import Step as _Step, register as _register  # noqa: E402


@_register
class _Grader(_Step):
    name = "{step}"
    summary = "OpenAI python grader '{grader}': grade(sample, item) -> score."
    schema = {{"type": "object", "additionalProperties": False, "required": ["sample", "item"],
              "properties": {{"sample": {{}}, "item": {{}}}}}}
    result = {{"type": "object", "additionalProperties": False, "properties": {{"score": {{"type": "number"}}}}}}

    async def run(self, ctx):
        return {{"score": float(grade(ctx.args["sample"], ctx.args["item"]))}}  # noqa: F821
'''
