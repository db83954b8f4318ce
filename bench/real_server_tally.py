"""One pipeline's row of bench/real_server.sh's table, worked out from the run's outputs.

    python bench/real_server_tally.py NAME COLD_OUT RERUN_OUT PARSED COLD_SECONDS RERUN_SECONDS

- calls: the LLM calls the pipeline made in the cold run (one llm_logs file each; a call
  may be several HTTP requests: retries, the structured-output fallback)
- parsed (counted by the caller): answers that parsed and validated against their schema;
  only those are written to the response cache, so they are the cache's entries right after
  the cold run (the cached rerun's cache hits say the same)
- requests: HTTP requests sent in the cold run (summary.json, models.*.calls)
- failed: calls that got no usable answer (an ERROR in llm_logs: timeout, truncation, HTTP
  error), and answers that did not parse or validate
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def logs(out: Path) -> list[str]:
    return [f.read_text(encoding="utf-8") for f in sorted((out / "llm_logs").glob("*_[0-9][0-9][0-9][0-9]*.txt"))]


def response(text: str) -> str:
    return text.split("\n=== RESPONSE ===\n", 1)[-1]


def models(summary: dict, key: str) -> int:
    return sum(int(m.get(key, 0)) for m in (summary.get("models") or {}).values())


def main() -> None:
    name, cold_dir, rerun_dir, parsed_count, cold_s, rerun_s = sys.argv[1:7]
    cold, rerun, parsed = Path(cold_dir), Path(rerun_dir), int(parsed_count)
    summary = json.loads((cold / "summary.json").read_text(encoding="utf-8"))
    again = json.loads((rerun / "summary.json").read_text(encoding="utf-8"))
    calls = logs(cold)
    errors = [r for r in map(response, calls) if r.startswith("ERROR:")]
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
