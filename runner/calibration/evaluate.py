"""`runner eval`: a run's results against human labels, written as eval.json and eval.md, with
what it says of the run besides the scores: whether it is a run of the labels' input, and the
run's hints that still hold."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.calibration import metrics
from runner.calibration.labels import NO_PREDICTION, LabelRow, Pair, join_labels, read_labels
from runner.engine.health import run_failure
from runner.engine.rates import lookup
from runner.errors import InputError
from runner.runs.folders import RESULTS, read_summary, resolve_run
from runner.runs.results_file import ResultsView


@dataclass
class EvalSpec:
    labels: Path
    key: str
    truth: str
    predicted: str | None = None       # default: the run's summary count_by field
    positive: list[str] = field(default_factory=list)
    juror_field: str | None = None     # default: every list of votes ({model, value}) found in the results
    kind: str = "auto"                 # auto, categorical or numeric
    stability_field: str | None = None  # default: a `stability` field at the top of a result or one object down
    by: str | None = None              # score each value of this field (of the label, else the result) apart

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "categorical", "numeric"):
            raise InputError(f"--kind {self.kind}: choose auto, categorical or numeric")


def evaluate_target(target: Path, spec: EvalSpec, input_path: Path | None, overrides: list[str],
                    out: Path | None, cache_dir: Path, input_format: str | None = None) -> tuple[dict[str, Any], Path]:
    """`runner eval`: score a run folder, or run a pipeline over `input_path` first (`run_failed`
    when the run fails as `runner run` would); write eval.json, eval.md and report.html's section."""
    from runner.calibration.eval_report import write_eval
    failure, ran = None, False
    results: Iterable[dict[str, Any]]
    if target.is_file() and target.suffix in (".yaml", ".yml"):
        from runner.api import ItemSource, run_pipeline
        from runner.runs.request import RunOptions
        if input_path is None:
            raise InputError(f"{target} is a pipeline: give --input FILE to run it (or pass a run folder)")
        outcome = run_pipeline(target, ItemSource(input_path, input_format=input_format),
                               RunOptions(cache_dir=cache_dir, out_dir=out), overrides)
        outcome.stop_if_interrupted()            # an interrupted run is not evaluated
        folder, results, summary = outcome.out_dir, outcome.results, outcome.summary
        failure, ran = run_failure(summary), True      # the exit code of `runner run` over the same items
    elif input_path is not None or overrides:
        raise InputError("--input and --set need a pipeline file, not a run folder")
    else:
        folder = resolve_run(target)
        results = ResultsView(folder / RESULTS, strict=True)     # read as it is scored, never held
        summary = read_summary(folder)
    report = {"run": str(folder), **evaluate(results, summary, spec)}
    if failure:
        report["run_failed"] = failure
    hints = run_hints(folder, summary)
    if hints:       # an earlier run's are said as its own, not as what this command sent
        report["run_hints"] = hints if ran else [f"when {folder} ran: {hint}" for hint in hints]
    report["input_warnings"] = input_warnings(folder, spec.labels, report)
    write_eval(folder, report)
    return report, folder


def run_hints(run_folder: Path, summary: dict[str, Any]) -> list[str]:
    """The run's hints about failed calls that its calls.jsonl still bears out (runner/llm/tally.py)."""
    from runner.llm.calls.file import read_calls
    from runner.llm.tally import borne_out
    from runner.runs.folders import CALLS_FILE
    entries = [entry for entry in summary.get("failed_calls") or [] if isinstance(entry, dict) and entry.get("hint")]
    if not entries:
        return []
    return [str(entry["hint"]) for entry in borne_out(entries, read_calls(run_folder / CALLS_FILE))]


def input_warnings(run_folder: Path, labels: Path, report: dict[str, Any]) -> list[str]:
    """Whether the run is a run of the labels' input, which labels do not name: labels kept beside
    an input of the run's kind describe that input; a run of another file there, labels without
    a result, or a partial run each get a warning (the scores are still written)."""
    from runner.runs.manifest import read_manifest
    manifest = read_manifest(run_folder)
    if manifest is None:
        return []
    warnings: list[str] = []
    entry = manifest.get("input") or {}
    counts = manifest.get("counts") or {}
    if manifest.get("partial") or manifest.get("interrupted"):
        warnings.append(f"{run_folder} is a partial or interrupted run ({counts.get('done')} of "
                        f"{counts.get('input_items')} item(s)): only its items are scored")
    cwd = Path(manifest.get("cwd") or ".")
    read = (cwd / entry["path"]).resolve() if entry.get("path") else None
    unmatched = len((report.get("problems") or {}).get("unmatched_labels") or [])
    if read is not None:
        try:
            beside = sorted(p for p in labels.resolve().parent.iterdir()
                            if p.is_file() and p.suffix == read.suffix and p.resolve() != labels.resolve())
        except OSError:
            beside = []
        if beside and read not in [p.resolve() for p in beside]:
            warnings.append(f"the run read {entry['path']}, but the labels {labels} sit beside "
                            f"{', '.join(p.name for p in beside)}: is this a run of the labels' input? "
                            f"({report.get('scored')} of {report.get('label_rows')} label(s) scored)")
            return warnings
    if unmatched:
        warnings.append(f"{unmatched} of {report.get('label_rows')} label(s) have no result in {run_folder} "
                        f"(its input: {entry.get('path') or 'records'}, {entry.get('items')} item(s)): "
                        "is this a run of the labels' input?")
    return warnings


def predicted_field(spec: EvalSpec, count_by: str | None) -> str:
    """--predicted, else the field the pipeline's summary counts by."""
    chosen = spec.predicted or count_by
    if not chosen:
        raise InputError("no --predicted FIELD, and the pipeline's summary has no count_by to default to")
    return str(chosen)


def evaluate(results: Iterable[dict[str, Any]], summary: dict[str, Any], spec: EvalSpec,
             rows: list[LabelRow] | None = None, detail: bool = True) -> dict[str, Any]:
    """The eval report; `detail=False` (a sweep's many settings) keeps only the headline
    scores: no interval, per-class table or jurors."""
    predicted = predicted_field(spec, summary.get("count_by"))
    rows = read_labels(spec.labels, summary.get("pipeline")) if rows is None else rows
    joined = join_labels(results, rows, spec.key, spec.truth, predicted)
    truth = [value_text(p.truth) for p in joined.pairs]
    guesses = [value_text(p.predicted) for p in joined.pairs]
    said = {value_text(p.predicted) for p in joined.pairs if _predicted(p)}     # what the judge said of items it judged
    kind = spec.kind
    if kind == "auto":
        numbers = metrics.as_numbers(truth) is not None and metrics.as_numbers(list(said)) is not None
        kind = "numeric" if numbers and truth else "categorical"
    problems = joined.problems()
    report: dict[str, Any] = {"labels": str(spec.labels), "key": spec.key, "truth": spec.truth,
                              "predicted": predicted, "kind": kind, "label_rows": len(rows),
                              "results": joined.results, "scored": len(joined.pairs)}
    if kind == "numeric":
        kept, t, g = _numbers(joined.pairs)
        problems["no_prediction"] = [p.key for p in joined.pairs if not _predicted(p)]
        if t is None or g is None:
            raise InputError(f"--kind numeric: '{spec.truth}' and '{predicted}' must hold numbers")
        for pair, true, guess in zip(kept, t, g, strict=True):      # NaN or infinity has no error to measure
            if not math.isfinite(true):
                raise InputError(f"{spec.labels}:{pair.line}: {spec.truth} {str(pair.truth)[:40]!r} is not a "
                                 "finite number")
            if not math.isfinite(guess):
                raise InputError(f"item {pair.result.get('index')} (key {pair.key}): {predicted} "
                                 f"{str(pair.predicted)[:40]!r} is not a finite number")
        report["scored"] = len(kept)
        report["metrics"] = metrics.numeric(t, g)
    elif truth and said and not said & set(truth):      # the raw values cannot agree: pass/fail, else refused
        if not spec.positive:
            shown = sorted(said)
            raise InputError(
                f"--predicted {predicted} and --truth {spec.truth} share no value: the results' {predicted} holds "
                f"{_listed(shown)}, the labels' {spec.truth} hold {_listed(truth)}, so every item would score as "
                f"wrong; score them as pass/fail with --positive (a value of each side that means pass, e.g. "
                f"--positive {shown[0]} --positive {sorted(map(str, truth))[0]}), or --predicted a field that holds "
                "the labels' values")
        report["metrics"] = metrics.binary(truth, guesses, spec.positive, detail)
    else:
        report["metrics"] = metrics.categorical(truth, guesses, detail)
        if spec.positive:
            report["binary"] = metrics.binary(truth, guesses, spec.positive, detail)
    if spec.by is not None:
        report["by"] = by_slice(joined.pairs, rows, spec.by, kind)
    if detail and kind != "numeric":
        report["jurors"] = juror_metrics(joined.pairs, spec.juror_field, summary)
        stability = stability_of(joined.pairs, spec.stability_field)
        if stability is not None:
            report["stability"] = stability
    report["problems"] = problems
    return report


NO_SLICE = "(none)"


def by_slice(pairs: list[Pair], rows: list[LabelRow], field: str, kind: str) -> dict[str, Any]:
    """Every metric per value of `field` (read from the label row, else from the result; an item
    with neither is in the slice `(none)`), each with its n and intervals."""
    records = {row.line: row.record for row in rows}
    groups: dict[str, list[Pair]] = {}
    for pair in pairs:
        value = lookup(records.get(pair.line, {}), field)
        value = lookup(pair.result, field) if value is None else value
        groups.setdefault(NO_SLICE if value is None else value_text(value), []).append(pair)
    slices: dict[str, Any] = {}
    for name in sorted(groups):
        group = groups[name]
        if kind == "numeric":
            _, t, g = _numbers(group)
            slices[name] = metrics.numeric(t or [], g or [])
        else:
            slices[name] = metrics.categorical([value_text(p.truth) for p in group],
                                               [value_text(p.predicted) for p in group])
    return {"field": field, "slices": slices}


def _numbers(pairs: list[Pair]) -> tuple[list[Pair], list[float] | None, list[float] | None]:
    """The pairs with a prediction, and their labels and predictions as numbers (None: not all are)."""
    kept = [p for p in pairs if _predicted(p)]
    return kept, metrics.as_numbers([p.truth for p in kept]), metrics.as_numbers([p.predicted for p in kept])


def _predicted(pair: Pair) -> bool:
    """The judge said something of the item: an errored item's fallback (LLM_ERROR) is no prediction."""
    return pair.predicted != NO_PREDICTION and not pair.result.get("error")


def value_text(value: Any) -> str:
    """A value as scores compare it: JSON's spelling for booleans and null (`true` from a
    result and `true` from a CSV label are one class), the text of anything else."""
    return json.dumps(value) if isinstance(value, bool) or value is None else str(value)


def _listed(values: Iterable[Any], most: int = 8) -> str:
    distinct = sorted(set(map(str, values)))
    return ", ".join(distinct[:most]) + (f" and {len(distinct) - most} more" if len(distinct) > most else "")


def vote_lists(value: Any, prefix: str = "") -> dict[str, list[dict[str, Any]]]:
    """Every list of votes ({model, value, ...}) inside a result, by its dotted path."""
    found: dict[str, list[dict[str, Any]]] = {}
    if isinstance(value, dict):
        for name, inner in value.items():
            found.update(vote_lists(inner, f"{prefix}{name}."))
    elif isinstance(value, list) and value and all(isinstance(v, dict) and "model" in v and "value" in v
                                                   for v in value):
        found[prefix.rstrip(".")] = value
    return found


def juror_metrics(pairs: list[Pair], juror_field: str | None, summary: dict[str, Any]) -> dict[str, Any] | None:
    """Each juror's own answers against the labels, on the items whose label is something a
    juror can answer (a value some juror voted): a QUOTE_NOT_FOUND decided before the jury is
    not held against the jurors."""
    def lists_of(result: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        if juror_field is None:
            return vote_lists(result)
        chosen = lookup(result, juror_field)
        return {juror_field: chosen} if isinstance(chosen, list) else {}
    per_item = [(pair, lists_of(pair.result)) for pair in pairs]
    paths = sorted({path for _, lists in per_item for path in lists})
    if not paths:
        if juror_field is not None:
            raise InputError(f"--juror-field {juror_field}: no list of votes ({{model, value}}) there in any result")
        if summary.get("juries"):
            return {"fields": [], "labels_in_scope": [], "models": {},
                    "missing": "the results keep no jury votes (lists of {model, value}): add them to the output "
                               "(e.g. votes: \"{{ steps.jury.votes }}\") or name them with --juror-field"}
        return None
    vocabulary = {value_text(v["value"]) for _, lists in per_item for votes in lists.values() for v in votes
                  if v.get("value") is not None}
    seats: dict[str, dict[str, list[Any]]] = {}
    rows: list[tuple[Any, dict[str, Any]]] = []          # (label, {juror: vote}) per item: error correlation
    for pair, lists in per_item:
        if value_text(pair.truth) not in vocabulary:
            continue
        row: dict[str, Any] = {}
        for path, votes in lists.items():
            for vote in votes:
                name = str(vote["model"]) if len(paths) == 1 else f"{path}: {vote['model']}"
                seat = seats.setdefault(name, {"truth": [], "voted": [], "no_vote": []})
                if vote.get("value") is None:        # its call failed or its answer was unusable
                    seat["no_vote"].append(pair.key)
                else:
                    seat["truth"].append(value_text(pair.truth))
                    seat["voted"].append(value_text(vote["value"]))
                    row[name] = value_text(vote["value"])
        rows.append((value_text(pair.truth), row))
    models = summary.get("models") or {}
    out: dict[str, Any] = {"fields": paths, "labels_in_scope": sorted(vocabulary), "models": {}}
    if not seats:
        labels = _listed(value_text(pair.truth) for pair, _ in per_item)
        out["missing"] = (f"the jurors voted {_listed(vocabulary)} ({', '.join(paths)}) and the labels say {labels}: "
                          "no value in common, so no juror can be scored against them" if vocabulary else
                          f"no juror answered ({', '.join(paths)}: every vote is empty; the run's errors say why)")
    for name, seat in seats.items():
        scores = metrics.categorical(seat["truth"], seat["voted"])
        entry = {key: scores.get(key) for key in ("n", "accuracy", "kappa", "kappa_ci95", "macro_f1")}
        entry["no_vote"] = len(seat["no_vote"])
        usage = models.get(name.rsplit(": ", 1)[-1])
        if isinstance(usage, dict):
            entry.update(calls=usage.get("calls"), cost=usage.get("cost"))
        out["models"][name] = entry
    if len(seats) > 1:
        out["independence"] = metrics.error_correlation(rows)
    return out


def stability_of(pairs: list[Pair], field: str | None) -> dict[str, Any] | None:
    """Accuracy of the items whose repeated samples all agreed and of the others, read from
    `field` (else the first `stability` found at the top of a result or one object down);
    None when no result has one and none was named."""
    if field is None:
        field = next((path for pair in pairs for path in ("stability", *(f"{name}.stability" for name in pair.result))
                      if isinstance(lookup(pair.result, path), (int, float))), None)
        if field is None:
            return None
    rows = [(value_text(pair.truth), value_text(pair.predicted), lookup(pair.result, field)) for pair in pairs]
    if all(not isinstance(stability, (int, float)) for _, _, stability in rows):
        raise InputError(f"--stability-field {field}: no result has a number there")
    return metrics.stability_accuracy(rows, field)
