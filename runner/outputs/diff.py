"""`runner diff`: what changed between two runs, item by item (matched by `index`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runner.errors import RunnerError
from runner.outputs.report_view import lookup
from runner.outputs.results_file import in_order, result_lines, sorted_lines
from runner.stores.runs import RESULTS, SUMMARY, newest_group, previous_run, resolve_run, runs_in


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


def _summary(run: Path) -> dict[str, Any]:
    try:
        loaded = json.loads((run / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunnerError(f"{run}: cannot read its results ({exc})") from None
    return loaded if isinstance(loaded, dict) else {}


def _by_index(run: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, result) in index order, read one at a time (a killed run's file is sorted on disk first)."""
    path = run / RESULTS
    try:
        lines = result_lines(path) if in_order(result_lines(path)) else sorted_lines(path, run)
        for number, line in enumerate(lines):
            result = json.loads(line)
            yield int(result.get("index", number + 1)), result
    except (OSError, ValueError) as exc:
        raise RunnerError(f"{run}: cannot read its results ({exc})") from None


def diff_runs(before: Path, after: Path, fields: list[str] | None = None) -> dict[str, Any]:
    """Items whose verdict (the summary's count_by field), error or chosen fields changed,
    and the counts before and after: one merge of the two results files, nothing held."""
    old_summary, new_summary = _summary(before), _summary(after)
    count_by = new_summary.get("count_by") or old_summary.get("count_by")
    watched = list(dict.fromkeys([*([count_by] if count_by else []), *(fields or []), "error"]))
    changed: list[dict[str, Any]] = []
    only_before: list[int] = []
    only_after: list[int] = []
    old, new = _by_index(before), _by_index(after)
    left, right = next(old, None), next(new, None)
    while left is not None or right is not None:
        if left is not None and (right is None or left[0] < right[0]):
            only_before.append(left[0])
            left = next(old, None)
        elif right is not None and (left is None or right[0] < left[0]):
            only_after.append(right[0])
            right = next(new, None)
        elif left is not None and right is not None:
            changes = {f: [lookup(left[1], f), lookup(right[1], f)] for f in watched
                       if lookup(left[1], f) != lookup(right[1], f)}
            if changes:
                changed.append({"index": left[0], "changes": changes})
            left, right = next(old, None), next(new, None)
    counts = {"before": old_summary.get("counts") or {}, "after": new_summary.get("counts") or {}}
    rates = {name: [old_summary.get(name), new_summary.get(name)] for name in new_summary
             if name.endswith("_rate") and old_summary.get(name) != new_summary.get(name)}
    return {"before": str(before), "after": str(after), "count_by": count_by, "fields": watched,
            "counts": counts, "rates": rates, "changed": changed,
            "only_before": only_before, "only_after": only_after}


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


def format_diff(diff: dict[str, Any]) -> list[str]:
    """The diff as terminal lines."""
    lines = [f"before: {diff['before']}", f"after:  {diff['after']}"]
    before, after = diff["counts"]["before"], diff["counts"]["after"]
    if before or after:
        names = [n for n in dict.fromkeys([*before, *after]) if before.get(n, 0) != after.get(n, 0)]
        same = len(set(before) | set(after)) - len(names)
        moved = ", ".join(f"{name} {before.get(name, 0)} -> {after.get(name, 0)}" for name in names)
        lines.append(f"counts by {diff['count_by']}: {moved or 'unchanged'}"
                     + (f" ({same} other value(s) unchanged)" if names and same else ""))
    for name, (old, new) in diff["rates"].items():
        lines.append(f"{name}: {_show(old)} -> {_show(new)}")
    if not diff["changed"]:
        lines.append(f"no item changed ({', '.join(diff['fields'])} compared)")
    else:
        lines.append(f"{len(diff['changed'])} item(s) changed:")
        for entry in diff["changed"]:
            moves = "; ".join(f"{field}: {_show(old)} -> {_show(new)}"
                              for field, (old, new) in entry["changes"].items())
            lines.append(f"  item {entry['index']}: {moves}")
    for key, label in (("only_before", "only in before"), ("only_after", "only in after")):
        if diff[key]:
            lines.append(f"{label}: items {', '.join(map(str, diff[key]))}")
    return lines
