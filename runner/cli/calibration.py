"""`runner eval` and `runner sweep`: scoring runs against human labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runner.cli.base import CacheDirOpt, InputFormatOpt, PipelineArg, cache_dir_of, fail
from runner.errors import RunnerError

LabelsOpt = Annotated[Path, typer.Option("--labels", help="Human labels: JSONL, JSON or CSV.")]
KeyOpt = Annotated[str, typer.Option("--key", help="Field joining labels to results (a.b reads nested fields).")]
TruthOpt = Annotated[str, typer.Option("--truth", help="The labels' field holding the right answer.")]
PredictedOpt = Annotated[str | None, typer.Option(
    "--predicted", help="The results' field holding the judge's answer (default: the summary's count_by).")]
PositiveOpt = Annotated[list[str] | None, typer.Option(
    "--positive", help="A value that counts as pass for pass/fail metrics (repeat).")]
KindOpt = Annotated[str, typer.Option("--kind", help="auto, categorical or numeric.")]


def eval_command(
        target: Annotated[Path, typer.Argument(help="A run folder (or its 'latest' pointer), or a pipeline file.")],
        labels: LabelsOpt, key: KeyOpt, truth: TruthOpt, predicted: PredictedOpt = None,
        positive: PositiveOpt = None,
        juror_field: Annotated[str | None, typer.Option(
            "--juror-field", help="Path of the votes list (default: every {model, value} list found).")] = None,
        kind: KindOpt = "auto",
        stability_field: Annotated[str | None, typer.Option(
            "--stability-field", help="Path of the results' stability (repeat: N) to score stable and unstable "
                                      "items apart (default: a `stability` field found in the results).")] = None,
        by: Annotated[str | None, typer.Option(
            "--by", help="Score each value of this field (of the labels, else the results) apart: every metric "
                         "per slice, with n and intervals.")] = None,
        input: Annotated[Path | None, typer.Option(
            "--input", "-i", help="With a pipeline: run it on this first (- reads standard input).")] = None,
        input_format: InputFormatOpt = None,
        set_: Annotated[list[str] | None, typer.Option("--set", help="With a pipeline: override a key.")] = None,
        out: Annotated[Path | None, typer.Option("--out", help="With a pipeline: its output folder.")] = None,
        cache_dir: CacheDirOpt = None,
        fail_under_kappa: Annotated[float | None, typer.Option(
            "--fail-under-kappa", help="Exit 1 when kappa is below K (or undefined).")] = None) -> None:
    """Score a run against human labels: accuracy, kappa, confusion, per class, per juror."""
    from runner.calibration.evaluate import EvalSpec, evaluate_target
    spec = EvalSpec(labels, key, truth, predicted, positive or [], juror_field, kind, stability_field, by)
    report, folder = evaluate_target(target, spec, input, set_ or [], out, cache_dir_of(cache_dir), input_format)
    warnings = [*((report.get("jurors") or {}).get("independence") or {}).get("warnings", []),
                *report.get("input_warnings", [])]
    for note in [*report.get("run_hints", []), *(f"warning: {warning}" for warning in warnings)]:
        typer.echo(note, err=True)
    typer.echo(_eval_lines(report))
    typer.echo(f"written to {folder / 'eval.md'} and {folder / 'eval.json'}")
    if report.get("run_failed"):
        from runner.engine.health import TOO_MANY_ERRORS
        fail(report["run_failed"], TOO_MANY_ERRORS)
    if fail_under_kappa is not None and (failed := _kappa_failure(report, fail_under_kappa)):
        fail(failed, 1)


def _kappa_failure(report: dict[str, Any], threshold: float) -> str | None:
    """Why --fail-under-kappa fails, if it does; failing closed: a kappa that is missing or undefined fails it."""
    metrics = report["metrics"]
    kappa, n = metrics.get("kappa"), int(metrics.get("n") or 0)
    over = f"over {report['scored']} of {report['label_rows']} label(s)"
    if kappa is None:
        why = ("the labels are numeric: no kappa" if report.get("kind") == "numeric"
               else "no label was scored" if not n
               else "undefined: the labels and the verdicts are each all one and the same class")
        return f"kappa is n/a ({why}; {over}): --fail-under-kappa {threshold:g} has nothing to check"
    return f"kappa {kappa} is below --fail-under-kappa {threshold:g} ({over})" if kappa < threshold else None


def _eval_lines(report: dict[str, Any]) -> str:
    m = report["metrics"]
    lines = [f"scored {report['scored']} of {report['label_rows']} label(s) against {report['results']} result(s)"]
    problems = {k: len(v) for k, v in report["problems"].items() if v}
    lines.append("join problems: " + (", ".join(f"{k.replace('_', ' ')} {n}" for k, n in problems.items())
                                      or "none"))
    if report["kind"] == "numeric":
        lines.append(f"MAE {m.get('mae')}, bias {m.get('bias')}, Pearson {m.get('pearson')}, "
                     f"Spearman {m.get('spearman')}")
        return "\n".join(lines)
    if not m.get("n"):
        return "\n".join(lines)
    from runner.calibration.metrics import interval_text
    base = m["baseline"]
    lines.append(f"{'pass/fail: ' if m.get('positive') else ''}accuracy {m['accuracy']} (always {base['predicts']}: "
                 f"{base['accuracy']}), {_kappa(m['kappa'], m['kappa_ci95'], m['n'])}, macro F1 {m['macro_f1']}")
    if report.get("binary"):
        b = report["binary"]
        lines.append(f"pass/fail: accuracy {b['accuracy']}, {_kappa(b['kappa'], b['kappa_ci95'], b['n'])}")
    jurors = report.get("jurors") or {}
    if jurors.get("missing"):
        lines.append(f"no per-juror scores: {jurors['missing']}")
    for name, j in (jurors.get("models") or {}).items():
        kappa = _kappa(j["kappa"]) if j["n"] else "kappa n/a"
        silent = f", no vote on {j['no_vote']} (its call failed or its answer was unusable)" if j["no_vote"] else ""
        lines.append(f"juror {name}: accuracy {j['accuracy']}, {kappa} on {j['n']} item(s){silent}")
    independence = jurors.get("independence")
    if independence and independence["effective_votes"] is not None:
        lines.append(f"juror independence: {independence['effective_votes']} effective vote(s) of "
                     f"{len(independence['jurors'])} (mean error correlation {independence['mean_error_correlation']})")
    for name, s in ((report.get("by") or {}).get("slices") or {}).items():
        if s.get("n") and "accuracy" in s:
            lines.append(f"{report['by']['field']} {name}: n {s['n']}, accuracy {s['accuracy']} "
                         f"{interval_text(s['accuracy_ci95'], s['n'])}, balanced accuracy {s['balanced_accuracy']} "
                         f"{interval_text(s['balanced_accuracy_ci95'], s['n'])}, "
                         f"{_kappa(s['kappa'], s['kappa_ci95'], s['n'], '')}, macro F1 {s['macro_f1']}")
    if stability := report.get("stability"):
        lines.append(f"stable items ({stability['field']} 1.0): accuracy {stability['stable']['accuracy']} on "
                     f"{stability['stable']['n']}; unstable: accuracy {stability['unstable']['accuracy']} on "
                     f"{stability['unstable']['n']}")
    return "\n".join(lines)


def _kappa(value: float | None, interval: list[float] | None = None, n: int | None = None,
           named: str = "95% CI ") -> str:
    """`kappa 0.61 95% CI [0.4, 0.8]`, or why kappa is undefined (never Python's None)."""
    from runner.calibration.metrics import interval_text
    if value is None:
        return "kappa n/a (the labels and the verdicts are each all one and the same class)"
    return f"kappa {value}" + (f" {named}{interval_text(interval, n)}" if n is not None else "")


def sweep_command(
        pipeline: PipelineArg,
        input: Annotated[Path, typer.Option("--input", "-i", help="Input file.")],
        labels: LabelsOpt, key: KeyOpt, truth: TruthOpt,
        grid: Annotated[list[str], typer.Option("--grid", help="KEY=V1,V2,... (repeat; every combination runs).")],
        predicted: PredictedOpt = None, positive: PositiveOpt = None, kind: KindOpt = "auto",
        metric: Annotated[str | None, typer.Option(
            "--metric", help="kappa, accuracy, macro_f1, mae, pearson or spearman (default: kappa; mae for numbers).")]
        = None,
        set_: Annotated[list[str] | None, typer.Option("--set", help="Override a key in every setting.")] = None,
        allow_calls: Annotated[bool, typer.Option(
            "--allow-calls", help="Run settings whose prompts are not all cached (new LLM calls).")] = False,
        out: Annotated[Path | None, typer.Option("--out", help="Folder for sweep.md, sweep.json, sweep.html.")]
        = None,
        cache_dir: CacheDirOpt = None,
        concurrency: Annotated[int, typer.Option(help="LLM requests in flight (with --allow-calls).", min=1)] = 8,
) -> None:
    """Score every combination of --grid values against labels, from the LLM cache."""
    from runner.api import ItemSource
    from runner.calibration.eval_report import sweep_markdown, write_sweep
    from runner.calibration.evaluate import EvalSpec
    from runner.calibration.sweep import SweepRequest, parse_grid, run_sweep, set_line

    def estimate(pending: list[Any]) -> None:
        calls = sum(s.calls_needed for s in pending)
        tokens = sum(s.est_prompt_tokens for s in pending)
        typer.echo(f"--allow-calls: {len(pending)} setting(s) need up to {calls} new LLM call(s) "
                   f"(est. prompt tokens: {tokens}; settings with the same prompts share answers); running them",
                   err=True)

    if str(input) == "-":
        raise RunnerError("sweep --input -: a sweep reads its input once per setting; give a file")
    spec = EvalSpec(labels, key, truth, predicted, positive or [], kind=kind)
    request = SweepRequest(pipeline, ItemSource(input), spec, parse_grid(grid), cache_dir_of(cache_dir), set_ or [],
                           metric, allow_calls, concurrency)
    report = run_sweep(request, estimate)
    if report.get("failed_before"):
        typer.echo(_failed_before_line(report["failed_before"]), err=True)
    from runner.runs.folders import group_name
    group = group_name(input, [], pipeline.resolve().parent.parent)     # the group `runner run` uses
    folder = out or Path("reports") / report["name"] / group / "sweep"
    write_sweep(folder, report)
    typer.echo(sweep_markdown(report).split("\n\n", 2)[-1].rstrip())
    typer.echo(f"written to {folder / 'sweep.md'}, sweep.json and sweep.html (plots)")
    from runner.engine.health import TOO_MANY_ERRORS
    failures = [f"{set_line(s['set'])}: {s['run_failed']}" for s in report["settings"] if s.get("run_failed")]
    if failures:          # each setting exits as `runner run --set ...` of it would
        fail("\n".join(failures), TOO_MANY_ERRORS)
    if report["settings"] and all(s.get("status") == "needs_calls" for s in report["settings"]):   # none measured
        fail("sweep failed: no setting was scored, each needs requests the cache does not hold: run with "
             "--allow-calls to send them (exit code 3)", TOO_MANY_ERRORS)


def _failed_before_line(before: dict[str, Any]) -> str:
    """What the calls that failed in the last run did in this sweep: only what it saw."""
    seen, cache = before.get("errored_items") or [0], before.get("cache")
    if max(seen) == 0:
        return (f"{before['calls']} call(s) that failed in {before['run']} were not sent again, and none was needed: "
                f"the cache at {cache} answered every call this sweep made (no item errored at any setting)")
    errored = f"{seen[0]}" if len(seen) == 1 else f"{seen[0]} to {seen[-1]}"
    return (f"{before['calls']} call(s) that failed in {before['run']}, made by {before['items']} item(s) there, "
            f"were not sent again (--allow-calls sends each of them once); {errored} item(s) errored at each "
            f"setting, from any cause; the other answers came from the cache at {cache}")


def align_command(
        pipeline: Annotated[Path, typer.Argument(help="Pipeline file (under pipelines/).")],
        input: Annotated[Path, typer.Option("--input", "-i", help="The items the labels are about.")],
        labels: LabelsOpt, key: KeyOpt, truth: TruthOpt, predicted: PredictedOpt = None,
        split: Annotated[str, typer.Option("--split", help="TRAIN/DEV/TEST shares of the labelled items.")]
        = "60/20/20",
        seed: Annotated[int, typer.Option("--seed", help="Seed of the split and of the examples chosen.",
                                          min=0)] = 0,
        group_by: Annotated[str | None, typer.Option(
            "--group-by", help="Items sharing this field's value stay in one split.")] = None,
        max_examples: Annotated[int, typer.Option(
            "--max-examples", help="Few-shot examples at most (train disagreements, balanced per label).", min=0)]
        = 8,
        optimizer_model: Annotated[str | None, typer.Option(
            "--optimizer-model", help="A model of the pipeline's models: that proposes up to three instruction "
                                      "lines from the disagreements.")] = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="align.json's path (or a folder for it), align.md beside it "
                          "(default reports/NAME/align/).")] = None,
        input_format: InputFormatOpt = None,
        cache_dir: CacheDirOpt = None) -> None:
    """Make the judge agree better with labels (params, few-shot examples, instruction lines), kept
    only when dev agreement rises; ship pipelines/NAME.aligned.yaml only when it beats the
    baseline on held-out test items by more than noise (exit 1 when it does not)."""
    from runner.calibration.align import AlignRequest, align
    from runner.probe.run import probe_pipeline
    report, code = align(AlignRequest(pipeline, input, labels, key, truth, predicted, split, seed, group_by,
                                      max_examples, optimizer_model, out, cache_dir_of(cache_dir), input_format,
                                      probe_pipeline))
    labelled = report["labelled"]
    left = [f"{labelled[f'{name}_count']} {what}" for name, what in (
        ("not_in_input", "label(s) of no item in the input"),
        ("labelled_twice", "key(s) labelled more than once (the first row used)"),
        ("disagreeing", "of those with labels that disagree"), ("unusable", "label row(s) without a key or truth"),
        ("input_keys_shared", "input item(s) whose key an earlier item has (not judged)"))
        if labelled.get(f"{name}_count")]
    typer.echo(f"labels: {labelled['used']} used" + (f"; {'; '.join(left)}" if left else ""))
    split_sizes = ", ".join(f"{name} {report['splits'][name]['n']}" for name in ("train", "dev", "test"))
    typer.echo(f"split (seed {report['seed']}): {split_sizes}")
    for name in ("dev", "test"):
        base = (report.get("baseline") or {}).get(name)
        aligned = (report.get("aligned") or {}).get(name)
        if base:
            typer.echo(f"{name}: baseline balanced accuracy {base['balanced_accuracy']}"
                       + (f", aligned {aligned['balanced_accuracy']}" if isinstance(aligned, dict) else ""))
    for tried in report["tried"]:
        typer.echo(f"tried {tried['change']}: {'kept' if tried.get('kept') else 'rejected'}"
                   + (f" ({tried['why']})" if tried.get("why") else ""))
    typer.echo(("shipped: " if code == 0 else "not shipped: ") + report["why"])
    if report.get("shipped_pipeline"):
        typer.echo(f"wrote {report['shipped_pipeline']}")
    typer.echo(f"written to {report['align_json']} and align.md beside it")
    if code:
        raise typer.Exit(code)
