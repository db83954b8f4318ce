"""One pipeline's row of bench/real_server.sh's table, worked out from the run's outputs.

    python bench/real_server_tally.py NAME COLD_OUT RERUN_OUT PARSED COLD_SECONDS RERUN_SECONDS

- calls: the LLM calls the pipeline made in the cold run (one line of calls.jsonl each; a
  call may be several HTTP requests: retries, the structured-output fallback)
- parsed (counted by the caller): answers that parsed and validated against their schema;
  only those are written to the response cache, so they are the cache's entries right after
  the cold run (the cached rerun's cache hits say the same)
- requests: HTTP requests sent in the cold run (summary.json, models.*.calls)
- failed: calls that got no usable answer (an `error` in calls.jsonl: timeout, truncation,
  HTTP error), and answers that did not parse or validate
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def calls_of(out: Path) -> list[dict]:
    path = out / "calls.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.is_file() else []


def models(summary: dict, key: str) -> int:
    return sum(int(m.get(key, 0)) for m in (summary.get("models") or {}).values())


def main() -> None:
    name, cold_dir, rerun_dir, parsed_count, cold_s, rerun_s = sys.argv[1:7]
    cold, rerun, parsed = Path(cold_dir), Path(rerun_dir), int(parsed_count)
    summary = json.loads((cold / "summary.json").read_text(encoding="utf-8"))
    again = json.loads((rerun / "summary.json").read_text(encoding="utf-8"))
    calls = calls_of(cold)
    errors = [call["error"] for call in calls if call["error"]]
    invalid = len(calls) - len(errors) - parsed
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(summary.get("counts", {}).items(), key=lambda kv: -kv[1]))
    share = f"{parsed / len(calls):.0%}" if calls else "-"
    failed = ", ".join(part for part in (f"{len(errors)} no answer" if errors else "",
                                         f"{invalid} invalid" if invalid else "") if part) or "0"
    row = (f"| {name} | {parsed} / {len(calls)} ({share}) | {models(summary, 'calls')} | {failed} | "
           f"{summary['total']} items: {verdicts} | {float(cold_s):.1f} s | {float(rerun_s):.1f} s "
           f"({models(again, 'cache_hits')} hits, {models(again, 'calls')} sent) |")
    print(row)
    for error in sorted(set(errors)):
        print(f"    {name} failed call: {error.strip()[:300]}", file=sys.stderr)


if __name__ == "__main__":
    main()
