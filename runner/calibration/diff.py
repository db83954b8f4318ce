"""`runner diff`: what changed between two runs: first how they were made (their run.json),
then item by item (matched by `index`). Runs over different inputs are not compared unless
forced; a partial or interrupted run is compared on the items it has."""

from __future__ import annotations

import heapq
import json
from collections import Counter
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

from runner.engine.rates import as_given, counted_as, exact, lookup, rate_entries, rate_text, unclean
from runner.errors import InputError, RunnerError, unknown
from runner.runs.folders import RESULTS, is_whole, newest_group, previous_run, read_summary, resolve_run, runs_in
from runner.runs.manifest import read_manifest
from runner.runs.results_file import results_in_order


def pick_runs(first: Path | None, second: Path | None) -> tuple[Path, Path]:
    """(before, after): two runs given; one run and the run before it; a group's last two;
    with nothing given, the last two runs of the group that ran last under reports/."""
    if first is not None and second is not None:
        return resolve_run(first), resolve_run(second)
    if first is None:
        group = newest_group()
        if group is None:
            raise RunnerError("no runs under reports/: give two run folders (runner diff RUN_A RUN_B)")
        first = group
    if first.is_dir() and not (first / RESULTS).is_file():
        runs = runs_in(first)
        if len(runs) < 2:
            raise RunnerError(f"{first}: {len(runs)} finished run(s) here, need two to compare")
        return runs[-2], runs[-1]
    after = resolve_run(first)
    before = previous_run(after)
    if before is None:
        raise RunnerError(f"{after}: no earlier run beside it to compare with")
    return before, after


def _leaves(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {path: leaf for key, inner in value.items()
                for path, leaf in _leaves(inner, f"{prefix}.{key}" if prefix else str(key)).items()}
    return {prefix: value}


def _changes(old: Any, new: Any, prefix: str) -> list[dict[str, Any]]:
    a, b = _leaves(old, prefix), _leaves(new, prefix)
    return [{"what": key, "before": a.get(key), "after": b.get(key)}
            for key in dict.fromkeys([*a, *b]) if a.get(key) != b.get(key)]


# run.json's options that change a run's results or cost, by the flag that sets them.
OPTION_FLAGS = {"batch": "--batch", "cache_dir": "--cache-dir", "no_cache": "--no-cache",
                "concurrency": "--concurrency", "executor": "--executor", "workers": "--workers", "trace": "--trace"}


def manifest_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """What differs in how two runs were made: runner, --set, --model, the options that change
    results or cost (each under its flag), params, models, the pipeline, its prompt and schema
    files, the input and the selection. An option an older run.json did not record is not
    compared."""
    changes = _changes(old.get("runner_version"), new.get("runner_version"), "runner_version")
    old_p, new_p = old.get("pipeline") or {}, new.get("pipeline") or {}
    changes += _changes(old_p.get("sets") or [], new_p.get("sets") or [], "--set")
    if "models_given" in old_p and "models_given" in new_p:
        changes += _changes(old_p["models_given"] or [], new_p["models_given"] or [], "--model")
    old_o, new_o = old.get("options") or {}, new.get("options") or {}
    for key, flag in OPTION_FLAGS.items():
        if key in old_o and key in new_o and old_o[key] != new_o[key]:
            changes.append({"what": flag, "before": old_o[key], "after": new_o[key]})
    old_r, new_r = old_p.get("resolved") or {}, new_p.get("resolved") or {}
    changes += _changes(old_r.get("params") or {}, new_r.get("params") or {}, "params")
    changes += _changes(old.get("models") or {}, new.get("models") or {}, "models")
    if old_p.get("sha256") != new_p.get("sha256"):
        others = [k for k in dict.fromkeys([*old_r, *new_r]) if k not in ("params", "models")
                  and old_r.get(k) != new_r.get(k)]
        changes.append({"what": "pipeline hash", "before": str(old_p.get("sha256"))[:12],
                        "after": str(new_p.get("sha256"))[:12], "sections": others})
    old_f, new_f = old_p.get("files") or {}, new_p.get("files") or {}
    for name in sorted(old_f.keys() | new_f.keys()):
        if old_f.get(name) != new_f.get(name):
            changes.append({"what": name, "before": (old_f.get(name) or "absent")[:12],
                            "after": (new_f.get(name) or "absent")[:12]})
    old_i, new_i = old.get("input") or {}, new.get("input") or {}
    for key in ("path", "sha256", "items"):
        if old_i.get(key) != new_i.get(key):
            changes.append({"what": f"input {key}", "before": old_i.get(key), "after": new_i.get(key)})
    changes += _changes(old.get("selection") or {}, new.get("selection") or {}, "selection")
    return changes


def check_same_input(before: Path, after: Path, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
    """Runs over different input contents compare different items under the same numbers."""
    a, b = (old or {}).get("input") or {}, (new or {}).get("input") or {}
    if a.get("sha256") and b.get("sha256") and a["sha256"] != b["sha256"]:
        raise RunnerError(f"not comparing runs over different inputs: {before} read {a.get('path')} "
                          f"(content {a['sha256'][:12]}, {a.get('items')} item(s)), {after} read {b.get('path')} "
                          f"(content {b['sha256'][:12]}, {b.get('items')} item(s)); item numbers would not match. "
                          "Pass --force to compare them anyway")


def diff_runs(before: Path, after: Path, fields: list[str] | None = None, force: bool = False) -> dict[str, Any]:
    """How the runs were made (their manifests), then the items whose verdict (the summary's
    count_by field), error or chosen fields changed, and the counts before and after: one merge
    of the two results files, nothing held. When a run is partial or interrupted, counts are
    over the items both runs have and rates are not compared."""
    old_manifest, new_manifest = read_manifest(before), read_manifest(after)
    if not force:
        check_same_input(before, after, old_manifest, new_manifest)
    old_summary, new_summary = read_summary(before), read_summary(after)
    count_by = new_summary.get("count_by") or old_summary.get("count_by")
    watched = list(dict.fromkeys([*([count_by] if count_by else []), *(fields or []), "error"]))
    changed: list[dict[str, Any]] = []
    only_before: list[int] = []
    only_after: list[int] = []
    common: dict[str, Counter[str]] = {"before": Counter(), "after": Counter()}     # over the items both runs have
    compared = 0
    unseen, keys = set(fields or []) - {"error"}, set[str]()      # a --field no result has: a typo
    old = ((r["index"], 0, r) for r in results_in_order(before))
    new = ((r["index"], 1, r) for r in results_in_order(after))
    for index, group in groupby(heapq.merge(old, new, key=itemgetter(0)), key=itemgetter(0)):  # nothing held
        entries = list(group)
        lefts, rights = ([r for _, side, r in entries if side == wanted] for wanted in (0, 1))
        only_before += [index] * (len(lefts) - len(rights))
        only_after += [index] * (len(rights) - len(lefts))
        for left, right in zip(lefts, rights, strict=False):
            compared += 1
            if count_by:
                common["before"][counted_as(left, count_by)] += 1
                common["after"][counted_as(right, count_by)] += 1
            changes = {f: [lookup(left, f), lookup(right, f)] for f in watched if lookup(left, f) != lookup(right, f)}
            if unseen:
                keys.update(left, right)
                unseen -= {f for f in unseen if any(_has(side, f) for side in (left, right))}
            if changes:
                changed.append({"index": index, "changes": changes})
    if unseen and compared:
        name = sorted(unseen)[0]
        raise InputError(f"--field {name}: no result of either run has it; "
                         + unknown("field", name, keys - {"index", "item_key"}, "their fields"))
    counts: dict[str, Any] = {"before": old_summary.get("counts") or {}, "after": new_summary.get("counts") or {}}
    old_rates, new_rates = rate_entries(old_summary), rate_entries(new_summary)
    rate_details = {name: [old_rates.get(name), new_rates.get(name)] for name in dict.fromkeys([*old_rates, *new_rates])
                    if old_rates.get(name) != new_rates.get(name)}       # a rate that vanished is a change too
    rates = {name: [(entry or {}).get("value") for entry in pair] for name, pair in rate_details.items()}
    partial = [str(run) for run, summary in ((before, old_summary), (after, new_summary)) if not is_whole(summary)]
    if partial:
        counts, rates, rate_details = common, {}, {}
    made = (manifest_changes(old_manifest, new_manifest) if old_manifest and new_manifest else None)
    return {"before": str(before), "after": str(after), "count_by": count_by, "fields": watched,
            "manifest": made, "without_manifest": [str(run) for run, m in ((before, old_manifest),
                                                                          (after, new_manifest)) if m is None],
            "partial": partial, "compared": compared,
            "counts": counts, "rates": rates, "rate_details": rate_details, "changed": changed,
            "only_before": [] if partial else only_before, "only_after": [] if partial else only_after}


def _has(result: dict[str, Any], field: str) -> bool:
    """Whether a result holds `field` (null counts: it is there), dotted through nested objects."""
    *path, last = field.split(".")
    inside = lookup(result, ".".join(path)) if path else result
    return lookup(result, field) is not None or (isinstance(inside, dict) and last in inside)


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list, bool)) else str(value)


def format_diff(diff: dict[str, Any]) -> list[str]:
    """The diff as terminal lines: how the runs were made, then what their items did."""
    lines = [f"before: {diff['before']}", f"after:  {diff['after']}", *overview(diff)]
    if not diff["changed"]:
        lines.append(f"no item changed ({', '.join(diff['fields'])} compared)")
    else:
        lines.append(f"{len(diff['changed'])} item(s) changed:")
        for entry in diff["changed"]:
            moves = "; ".join(f"{field}: {_show(old)} -> {_show(new)}"
                              for field, (old, new) in entry["changes"].items())
            lines.append(f"  item {entry['index']}: {moves}")
    return lines + only_in(diff)


def only_in(diff: dict[str, Any]) -> list[str]:
    """The items one run has and the other has not."""
    return [f"{label}: items {', '.join(map(str, diff[key]))}"
            for key, label in (("only_before", "only in before"), ("only_after", "only in after")) if diff[key]]


def overview(diff: dict[str, Any]) -> list[str]:
    """How the runs were made and what their counts and rates did: what `runner diff` prints
    before its items, and what `runner view`'s compare page shows."""
    lines: list[str] = []
    if diff.get("without_manifest"):
        lines.append(f"made how: unknown for {', '.join(diff['without_manifest'])} (no run.json: an older run)")
    elif diff.get("manifest") is not None:
        made = diff["manifest"]
        lines.append("made the same way (same runner, pipeline, prompts, models, options and input)" if not made
                     else "made differently:")
        for change in made:
            extra = f" ({', '.join(change['sections'])} changed)" if change.get("sections") else ""
            lines.append(f"  {change['what']}: {_show(change['before'])} -> {_show(change['after'])}{extra}")
    if diff.get("partial"):
        lines.append(f"partial or interrupted: {', '.join(diff['partial'])}; compared on the {diff['compared']} "
                     "item(s) both runs have, rates not compared")
    before, after = diff["counts"]["before"], diff["counts"]["after"]
    if before or after:
        names = [n for n in dict.fromkeys([*before, *after]) if before.get(n, 0) != after.get(n, 0)]
        same = len(set(before) | set(after)) - len(names)
        moved = ", ".join(f"{name} {before.get(name, 0)} -> {after.get(name, 0)}" for name in names)
        lines.append(f"counts by {diff['count_by']}: {moved or 'unchanged'}"
                     + (f" ({same} other value(s) unchanged)" if names and same else ""))
    for name, (old, new) in (diff.get("rate_details") or {}).items():
        lines.append(f"{name}: {_rate(old)} -> {_rate(new)}")
    return lines


def _rate(entry: dict[str, Any] | None) -> str:
    """A rate of one run with what it is over; `missing` when the run has no such rate."""
    return rate_text(entry) if entry is not None else "missing"


def rate_drops(diff: dict[str, Any], max_drop: float) -> list[str]:
    """`diff --max-drop`: the rates that fell by more than `max_drop`, failing closed: a rate
    that vanished, or became null, in the later run is a drop, and so is one that left out, or
    counted errored, more items than before (the two are not the same measure)."""
    if diff.get("partial"):
        return [f"rates not compared ({', '.join(diff['partial'])} partial or interrupted)"]
    fell = []
    for name, (old, new) in (diff.get("rate_details") or {}).items():
        before, after = ((entry or {}).get("value") for entry in (old, new))
        if before is None:
            continue                                     # nothing to drop from
        if new is None:
            fell.append(f"{name} vanished (it was {_rate(old)})")
        elif after is None:
            fell.append(f"{name} became n/a ({new.get('reason') or 'not computed'}; it was {_rate(old)})")
        elif exact(old) - exact(new) > as_given(max_drop):
            over = [f"{entry.get('numerator')}/{entry.get('denominator')}" for entry in (old, new)]
            fell.append(f"{name} fell from {before:.3g} to {after:.3g} ({over[0]} -> {over[1]})")
        elif _unclean_rose(old, new):
            fell.append(f"{name} left out, or counted errored, more items: {_rate(old)} -> {_rate(new)}")
    return fell


def _unclean_rose(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """More items left out of the rate, or counted in it errored, than before; a baseline
    written before rates counted their errored items (no `errored_counted`) is compared on
    what it said, the items it left out."""
    if "errored_counted" not in old:
        return int(new.get("left_out") or 0) > int(old.get("left_out") or 0)
    return unclean(new) > unclean(old)


MARKDOWN_ITEMS = 50          # items listed in a markdown diff; the rest are counted


def _md(value: Any) -> str:
    return _show(value).replace("|", "\\|").replace("\n", " ")


def format_markdown(diff: dict[str, Any], name: str) -> str:
    """The diff as a pull-request comment: how the runs were made, counts, rates, the items that changed."""
    from runner.calibration.eval_report import table
    lines = [f"### runner diff: {name}", "", f"Before `{diff['before']}`, after `{diff['after']}`.", ""]
    made = diff.get("manifest")
    if diff.get("without_manifest"):
        lines += [f"How {', '.join(diff['without_manifest'])} was made is unknown (no run.json: an older run).", ""]
    elif not made:
        lines += ["Made the same way (same runner, pipeline, prompts, models, options and input).", ""]
    else:
        rows = [[change["what"], change["before"], change["after"]] for change in made]
        lines += ["**How the runs were made**", "", table(["what", "before", "after"], rows, _md)]
    if diff.get("partial"):
        lines += [f"Partial or interrupted: {', '.join(diff['partial'])}; compared on the {diff['compared']} "
                  "item(s) both runs have, rates not compared.", ""]
    before, after = diff["counts"]["before"], diff["counts"]["after"]
    if before or after:
        rows = [[value, before.get(value, 0), after.get(value, 0)] for value in dict.fromkeys([*before, *after])]
        lines += [f"**Counts by {diff['count_by']}**", "", table([diff["count_by"], "before", "after"], rows, _md)]
    if diff["rates"]:
        rows = [[rate, _rate(old), _rate(new)] for rate, (old, new) in diff["rate_details"].items()]
        lines += ["**Rates**", "", table(["rate", "before", "after"], rows, _md)]
    changed = diff["changed"]
    if not changed:
        lines.append(f"No item changed ({', '.join(diff['fields'])} compared).")
    else:
        rows = [[entry["index"], field, old, new] for entry in changed[:MARKDOWN_ITEMS]
                for field, (old, new) in entry["changes"].items()]
        lines += [f"**{len(changed)} item(s) changed**", "", table(["item", "field", "before", "after"], rows, _md)]
        if len(changed) > MARKDOWN_ITEMS:
            lines.append(f"... and {len(changed) - MARKDOWN_ITEMS} more item(s) (`runner diff --json` lists all).")
    return "\n".join(lines).rstrip() + "\n"
