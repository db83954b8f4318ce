"""One pipeline's row of bench/real_server.sh's table, worked out from the run's outputs.

    python bench/real_server_tally.py NAME COLD_OUT RERUN_OUT CACHE_DIR COLD_SECONDS RERUN_SECONDS

- requests: HTTP requests sent in the cold run (summary.json, models.*.calls, retries included)
- answers: calls that got an answer back (llm_logs files whose response is not an ERROR)
- parsed: answers that parsed and validated against their schema; only those are written to
  the response cache, so they are the cache's entries after the cold run (checked against
  the cached rerun's cache hits)
- failed calls: llm_logs files whose response is an ERROR (transport, truncation, refusal)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def logs(out: Path) -> list[str]:
    return [f.read_text(encoding="utf-8") for f in sorted((out / "llm_logs").glob("*_[0-9][0-9][0-9][0-9].txt"))]


def response(text: str) -> str:
    return text.split("\n=== RESPONSE ===\n", 1)[-1]


def models(summary: dict, key: str) -> int:
    return sum(int(m.get(key, 0)) for m in (summary.get("models") or {}).values())


def main() -> None:
    name, cold_dir, rerun_dir, cache_dir, cold_s, rerun_s = sys.argv[1:7]
    cold, rerun = Path(cold_dir), Path(rerun_dir)
    import diskcache
    with diskcache.Cache(str(Path(cache_dir) / "responses")) as cache:
        parsed = len(cache)
    summary = json.loads((cold / "summary.json").read_text(encoding="utf-8"))
    again = json.loads((rerun / "summary.json").read_text(encoding="utf-8"))
    calls = logs(cold)
    errors = [r for r in map(response, calls) if r.startswith("ERROR:")]
    answers = len(calls) - len(errors)
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(summary.get("counts", {}).items(), key=lambda kv: -kv[1]))
    share = f"{parsed / answers:.0%}" if answers else "-"
    row = (f"| {name} | {parsed} / {answers} ({share}) | {models(summary, 'calls')} | {len(errors)} | "
           f"{summary['total']} items: {verdicts} | {float(cold_s):.1f} s | {float(rerun_s):.1f} s "
           f"({models(again, 'cache_hits')} hits, {models(again, 'calls')} sent) |")
    print(row)
    for error in sorted(set(errors)):
        print(f"    {name} failed call: {error.strip()[:300]}", file=sys.stderr)


if __name__ == "__main__":
    main()
