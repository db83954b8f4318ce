"""What bench/probe_real.sh measured, from its probe run's folder.

    python bench/probe_real_tally.py RUN_FOLDER SECONDS PIPELINE INPUT PROBES

- per probe: the local juror's and the final verdict's flips and failures (probe.json)
- the confidence each vote carries (`confidence: true` on the jury), on the originals and on
  each probe's copies: how many votes carry one, their mean, min and max, per verdict
- the calls and HTTP requests of the run (calls.jsonl, summary.json)

Which result is an original and which a copy of which probe comes from the probe run's plan,
made again from the pipeline (with the run's --set) and the input (runner/probe/measure.py)."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from runner.api import ItemSource, load_items
from runner.pipeline.loader import load_pipeline
from runner.probe.measure import plan
from runner.probe.run import chosen_probes


def roles(folder: Path, pipeline_file: Path, input_file: Path, names: list[str]) -> dict[int, str]:
    sets = json.loads((folder / "run.json").read_text())["pipeline"]["sets"]       # the run's --set, as given
    pipeline = load_pipeline(pipeline_file, sets)
    planned = plan(load_items(pipeline, ItemSource(input_file)), chosen_probes(pipeline, names))
    return {p.item.index: "original" if p.probe is None else p.probe.name for p in planned if p.item is not None}


def main(folder: Path, seconds: float, pipeline_file: Path, input_file: Path, names: list[str]) -> None:
    report = json.loads((folder / "probe.json").read_text())
    summary = json.loads((folder / "summary.json").read_text())
    calls = (folder / "calls.jsonl").read_text().splitlines()
    requests = sum(int(m.get("calls", 0)) for m in (summary.get("models") or {}).values())
    print(f"{report['items']} items, {report['copies']} copies, {len(calls)} calls, {requests} HTTP requests, "
          f"{seconds:.0f} s, {summary.get('errors')} errored items")
    for probe in report["probes"]:
        for row in probe["rows"]:
            print(f"{probe['name']} {row['who']}: n {row['n']}, flips {row['flips']} ({row['flip_rate']}, CI "
                  f"{row['flip_ci95']}), failures {row['failures']} ({row['failure_rate']}, CI {row['failure_ci95']})")
    role = roles(folder, pipeline_file, input_file, names)
    found: dict[tuple[str, str], list[float | None]] = {}
    for line in (folder / "results.jsonl").read_text().splitlines():
        result = json.loads(line)
        for vote in (result.get("step_3_semantic") or {}).get("votes") or []:
            if vote.get("value") is not None:
                found.setdefault((role[result["index"]], vote["value"]), []).append(vote.get("confidence"))
    for (kind, verdict), values in sorted(found.items()):
        given = [v for v in values if v is not None]
        shown = (f"mean {statistics.fmean(given):.4f}, min {min(given):.4f}, max {max(given):.4f}"
                 if given else "none")
        print(f"confidence, {kind} votes {verdict}: {len(given)} of {len(values)} carry one; {shown}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5].split(","))
