"""`runner align`: a judge made to agree better with its reviewers, and proven so on held-out
items. The search on train and dev is runner/calibration/align_search.py; here, the end: the
test split scored once, the shipping rule, the probes, the aligned variant written (or not),
and align.json, align.md and align.html.

The rule: ship only when the lower bound of the paired bootstrap 95% interval of the test
agreement difference (aligned minus baseline, the same test items resampled for both) is
above 0, and no probe's failure rate on the aligned judge rises above the upper bound of the
baseline's 95% (Wilson) interval."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from runner.calibration import metrics
from runner.calibration.align_judge import SPLITS, Split, parse_ratios, split_items
from runner.calibration.align_search import AGREEMENT, Aligner, AlignRequest, Candidate
from runner.calibration.eval_report import html_page, table
from runner.errors import InputError, RunnerError
from runner.fileio import atomic_write, dumps

PROBE_ITEMS = 30


def finish(aligner: Aligner, split: Split, best: Candidate) -> tuple[dict[str, Any], int]:
    report = aligner.report
    report["aligned"] = {"changes": best.changes(), "dev": None, "test": None}
    if not (best.params or best.examples or best.lines):
        return _done(aligner, False, "nothing raised agreement on dev: the baseline stays (nothing was scored on "
                                     "test, and no pipeline was written)")
    report["aligned"]["dev"] = aligner.score(split.dev, aligner.run("aligned-dev", split.keys("dev"), best))
    base_said = aligner.run("baseline-test", split.keys("test"), Candidate())      # the test split, once
    aligned_said = aligner.run("aligned-test", split.keys("test"), best)
    report["baseline"]["test"] = aligner.score(split.test, base_said)
    report["aligned"]["test"] = aligner.score(split.test, aligned_said)
    truth = [item.truth for item in split.test]
    difference = metrics.paired_difference(truth, [base_said.get(i.key, "") for i in split.test],
                                            [aligned_said.get(i.key, "") for i in split.test], AGREEMENT,
                                            aligner.request.seed)
    report["test_difference"] = difference
    low = (difference.get("ci95") or [None])[0]
    if low is None or low <= 0:
        shown = difference["ci95"] or (f"none: {metrics.interval_text(None, len(truth))}, too few to resample "
                                       "(each label class needs two test items at least)")
        return _done(aligner, False, f"on test the aligned judge is not better by more than noise: {AGREEMENT} "
                                     f"difference {difference['difference']} on {len(truth)} test item(s), "
                                     f"95% CI {shown} (the lower bound must be above 0)")
    refused = _probes(aligner, best, len(split.test))
    if refused:
        return _done(aligner, False, refused)
    report["shipped_pipeline"] = str(_write_variant(aligner, best))
    return _done(aligner, True, f"the aligned judge beats the baseline on test: {AGREEMENT} difference "
                                f"{difference['difference']} on {len(truth)} test item(s), 95% CI {difference['ci95']}")


def _probes(aligner: Aligner, best: Candidate, items: int) -> str | None:
    """The pipeline's probes on the baseline and on the aligned judge: a reason to refuse, or None."""
    probe_pipeline = aligner.request.probe
    if not aligner.pipeline.probes or probe_pipeline is None:
        aligner.report["probes"] = None
        return None
    from runner.runs.request import RunOptions
    rows: dict[str, Any] = {}
    for name, sets in (("baseline", []), ("aligned", best.overrides(aligner.judge))):
        options = RunOptions(cache_dir=aligner.request.cache_dir, out_dir=aligner.folder / "runs" / f"probe-{name}")
        probed, _ = probe_pipeline(aligner.request.pipeline, aligner._source(), options, sets, [],
                                   min(items, PROBE_ITEMS))
        rows[name] = {p["name"]: (p["rows"] or [{}])[0] for p in probed["probes"]}     # the final verdict's row first
    risen = []
    for probe, before in rows["baseline"].items():
        after = rows["aligned"].get(probe) or {}
        high = (before.get("failure_ci95") or [None, None])[1]
        if high is not None and after.get("failure_rate") is not None and after["failure_rate"] > high:
            risen.append(f"{probe}: failure rate {after['failure_rate']} above the baseline's 95% CI "
                         f"{before['failure_ci95']}")
    aligner.report["probes"] = {"baseline": rows["baseline"], "aligned": rows["aligned"], "risen": risen}
    return "probes fail more often on the aligned judge: " + "; ".join(risen) if risen else None


def _write_variant(aligner: Aligner, best: Candidate) -> Path:
    """pipelines/NAME.aligned.yaml (extends the original) and its examples file; checked to validate."""
    from runner.pipeline.loader import load_pipeline
    original = aligner.request.pipeline
    name = aligner.pipeline.name
    variant = original.parent / f"{name}.aligned.yaml"
    examples = original.parent / f"{name}.aligned.examples.jsonl"
    data: dict[str, Any] = {"version": 1, "extends": original.name}
    if best.params:
        data["params"] = {k: yaml.safe_load(v) for k, v in best.params.items()}
    step: dict[str, Any] = {}
    if best.examples:
        atomic_write(examples, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in best.examples))
        step["examples"] = examples.name
    if best.lines:
        from runner.calibration.align_judge import system_with
        step["system"] = system_with(aligner.judge, best.lines)
    if step:
        data["steps"] = [{"id": aligner.judge.step.id, "with": step}]
    head = (f"# Written by runner align ({aligner.json_path}): {name} with what raised its agreement with the "
            "labels on dev\n# and beat it on held-out test items.\n")
    atomic_write(variant, head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    try:
        load_pipeline(variant)
    except RunnerError:
        variant.unlink(missing_ok=True)
        examples.unlink(missing_ok=True)
        raise
    return variant


def _done(aligner: Aligner, shipped: bool, why: str) -> tuple[dict[str, Any], int]:
    report = aligner.report
    report.update(shipped=shipped, why=why, align_json=str(aligner.json_path))
    text = align_markdown(report)            # atomic_write makes the folder
    atomic_write(aligner.json_path, dumps(report) + "\n")
    atomic_write(aligner.folder / "align.md", text)
    atomic_write(aligner.folder / "align.html", html_page("runner align", text))
    return report, 0 if shipped else 1


def _row(name: str, scores: dict[str, Any] | None) -> list[Any]:
    if not scores:
        return [name, None, None, None, None, None]
    n = scores["n"]
    return [name, n, scores["accuracy"], scores["balanced_accuracy"],
            metrics.interval_text(scores["balanced_accuracy_ci95"], n), scores["kappa"]]


def align_markdown(report: dict[str, Any]) -> str:
    split = report.get("splits", {})
    aligned = report.get("aligned") or {}
    changes = aligned.get("changes") or {}
    out = [f"# runner align: {'shipped' if report.get('shipped') else 'not shipped'}\n",
           f"{report.get('why', '')}\n",
           f"Pipeline `{report['pipeline']}`, judge step `{report['judge_step']}` (answer field "
           f"`{report['answer_field']}`); labels `{report['labels']}` ({report['labels_hash'][:23]}); "
           f"seed {report['seed']}; agreement is {AGREEMENT.replace('_', ' ')}.\n",
           "## Split\n",
           table(["split", "items"], [[name, split.get(name, {}).get("n")] for name in ("train", "dev", "test")]),
           f"\nRatios {split.get('ratios')}, stratified by label, grouped by {split.get('group_by') or 'item'}.\n",
           "## Agreement (95% bootstrap intervals)\n",
           table(["judge on", "n", "accuracy", "balanced accuracy", "95% CI", "kappa"],
                 [_row("baseline, dev", report.get("baseline", {}).get("dev")),
                  _row("aligned, dev", aligned.get("dev")),
                  _row("baseline, test", report.get("baseline", {}).get("test")),
                  _row("aligned, test", aligned.get("test"))])]
    if report.get("test_difference"):
        d = report["test_difference"]
        out.append(f"\nTest difference (aligned minus baseline): {d['difference']}, paired bootstrap 95% CI "
                   f"{d['ci95']} on {d['n']} items.\n")
    out += ["## What changed\n",
            f"- params: {changes.get('params') or 'none'}\n- examples (by item key): "
            f"{', '.join(changes.get('examples') or []) or 'none'}\n- instruction lines: "
            f"{' / '.join(changes.get('instruction_lines') or []) or 'none'}\n",
            "## Tried\n",
            table(["change", "dev", "kept", "why not"],
                  [[t["change"], t.get("dev"), t.get("kept"), t.get("why")] for t in report.get("tried", [])])]
    if report.get("probes"):
        out.append(f"\n## Probes\n\nRisen failure rates: {'; '.join(report['probes']['risen']) or 'none'}.\n")
    if report.get("shipped_pipeline"):
        out.append(f"\nWritten: `{report['shipped_pipeline']}`.\n")
    return "\n".join(out)


def align(request: AlignRequest) -> tuple[dict[str, Any], int]:
    """The report and the exit code: 0 when an aligned judge shipped, 1 when none did."""
    aligner = Aligner(request)
    split = split_items(aligner.labelled(), parse_ratios(request.split), request.seed)
    report = aligner.report
    report["splits"] = {"ratios": request.split, "group_by": request.group_by,
                       **{name: {"n": len(split.part(name)), "keys": sorted(split.keys(name))} for name in SPLITS}}
    if not split.train or not split.dev or not split.test:
        raise InputError(f"--split {request.split}: too few labelled items ({report['labelled']['used']}) for a train, "
                         "dev and test split each with one at least")
    shutil.rmtree(aligner.folder / "runs", ignore_errors=True)       # this align's own run folders
    return finish(aligner, split, aligner.search(split))
