"""Small helpers shared by tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.api import ItemSource, RunOutcome, run_pipeline
from runner.engine.execute import RunOptions
from runner.stores.runs import group_name


def group_dir(root: Path, pipeline: str, input_file: str) -> Path:
    """reports/<pipeline>/<stem>-<hash>/ of an input at `root / input_file` (root: the project)."""
    return root / "reports" / pipeline / group_name(root / input_file, [], root)


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def run(pipeline: Path, input_path: Path | None = None, records: list[str] | None = None,
        overrides: list[str] | None = None, out: str | Path = "out", **options: Any) -> RunOutcome:
    root = pipeline.parent.parent
    progress = options.pop("progress", None)
    opts = RunOptions(cache_dir=Path(options.pop("cache_dir", root / "cache")), out_dir=Path(out), **options)
    return run_pipeline(pipeline, ItemSource(input_path, records or []), opts, overrides or [], progress)
