"""The whole-pipeline examples of docs/pipeline-language.md, read from features.yaml beside this
module: each language feature as the files a project holds, the records it runs on and the
results it gives. The tests write each example into a project, validate and run it (a scripted
model answering where it calls one) and compare the results, so every example on the page holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Feature:
    title: str
    text: str
    files: dict[str, str]                  # path in the project -> text; the first is the one run
    records: list[dict[str, Any]]
    results: list[dict[str, Any]]           # the output fields each record gives
    answers: tuple[str, ...] = ()           # what the model answers, in order (a pipeline that calls one)
    extra: dict[str, str] = field(default_factory=dict)   # files the run needs but the page does not show


FEATURES = [Feature(**{**entry, "answers": tuple(entry.get("answers", ()))})
            for entry in yaml.safe_load((Path(__file__).parent / "features.yaml").read_text(encoding="utf-8"))]
