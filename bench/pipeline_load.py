"""CPU a load of each shipped pipeline, the first time in a process and again.

    python bench/pipeline_load.py [--repeats 10]

A load here is what `runner validate` does: read, compose, check (no validated marker).
The first load of a process pays for the imports and for checking each template; a probe,
a sweep, align or a server loads one pipeline many times in one process and pays the rest.
Figures in bench/RESULTS.md."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from runner.pipeline.loader import load_pipeline

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    repeats = parser.parse_args().repeats
    files = sorted((REPO / "pipelines").glob("*.yaml"))
    started = time.process_time()
    for file in files:
        load_pipeline(file)
    first = time.process_time() - started
    started = time.process_time()
    for _ in range(repeats):
        for file in files:
            load_pipeline(file)
    again = (time.process_time() - started) / repeats
    print(f"{len(files)} shipped pipelines: first load {first / len(files) * 1000:.1f} ms of CPU each "
          f"(imports included), again {again / len(files) * 1000:.1f} ms each ({repeats} repeats)")


if __name__ == "__main__":
    main()
