"""`runner probe` on every shipped pipeline's example, offline against the fake server: each
declares probes, each runs and writes probe.json, probe.md and probe.html."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from helpers import copy_example
from jurors import careful
from runner.pipeline.loader import load_pipeline

REPO = Path(__file__).resolve().parents[2]


def first_sentence(prompt: str) -> str:
    response = prompt.split("RESPONSE:\n", 1)[1].split("\n\n", 1)[0]
    return response.split(". ", 1)[0]


def parser(prompt: str, body: dict[str, Any]) -> str:
    """deep_judgment's parser, all stages: verbatim excerpts, reasoning, the parse (the
    numbers it reads from the response), no abstention."""
    if "You extract evidence" in prompt:
        names = re.findall(r"^- (\w+) \(", prompt, re.MULTILINE)
        return json.dumps({"excerpts": {n: [{"text": first_sentence(prompt), "confidence": "high"}] for n in names}})
    if "Fill the attributes below" in prompt:
        if "half_life_hours" in prompt:
            return json.dumps({"half_life_hours": None})
        dose, weeks = re.search(r"(\d+) mg", prompt), re.search(r"(\d+) weeks", prompt)
        return json.dumps({"dose_mg": int(dose.group(1)) if dose else None,
                           "duration_weeks": int(weeks.group(1)) if weeks else None,
                           "primary_endpoint_met": True, "most_common_side_effect": "mild dizziness"})
    if "decline to answer" in prompt:
        return json.dumps({"abstained": "don't have reliable information" in prompt, "reason": "as written"})
    return json.dumps({"reasoning": {}})


ANSWERS = {
    "verdict_analyzer": json.dumps({"verdict": "contradicts", "confidence": "high", "rationale": "Several trials report the opposite effect."}),
    "evidence_judge": json.dumps({"is_valid": True, "evidence_type": "contextual", "quality_score": 0.7,
                                  "issue": None}),
    "slide_judge": json.dumps({"rating": "green", "score": 90, "explanation": "matches", "issues": []}),
}
# pipeline -> (folder to run in, input, the overrides that point its models at the fake server)
CASES = {
    "citation_judge": ("examples/citation_judge", "report.md",
                       lambda url: [f"models.{s}.model=openai/careful" for s in ("local", "openai")]
                       + [f"models.{s}.api_base={url}" for s in ("local", "openai")]
                       + ["models.openai.enabled=true"]),
    "verdict_analyzer": (".", "examples/verdict_analyzer/input.jsonl", lambda url: [f"models.analyst.api_base={url}"]),
    "evidence_judge": (".", "examples/evidence_judge/input.json", lambda url: [f"models.judge.api_base={url}"]),
    "deep_judgment": (".", "examples/deep_judgment/input.json", lambda url: [f"models.parser.api_base={url}"]),
    "slide_judge": ("examples/slide_judge", "input.json", lambda url: [f"models.judge.api_base={url}"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_shipped_pipeline_probes_its_example(name, fake_llm, cli, tmp_path, monkeypatch):
    for folder in ("pipelines", "prompts", "schemas", "probes", "examples"):
        copy_example(REPO / folder, tmp_path / folder)
    where, source, overrides = CASES[name]
    monkeypatch.chdir(tmp_path / where)
    fake_llm.script(careful if name == "citation_judge" else parser if name == "deep_judgment"
                    else ANSWERS[name])
    pipeline = tmp_path / "pipelines" / f"{name}.yaml"
    args = [arg for setting in overrides(fake_llm.url) for arg in ("--set", setting)]
    result = cli("probe", str(pipeline), "--input", source, "--quiet", "--cache-dir", str(tmp_path / "cache"), *args)
    assert result.exit_code == 0, result.output
    [written] = list((tmp_path / where / "reports" / name).glob("*-probe/*/probe.json"))
    report = json.loads(written.read_text())
    declared = [probe.name for probe in load_pipeline(pipeline).probes]
    assert [p["name"] for p in report["probes"]] == declared and len(declared) >= 3
    assert sum(p["copies"] for p in report["probes"]) > 0
    assert any(row["n"] > 0 for p in report["probes"] for row in p["rows"]), report
    assert {f.name for f in written.parent.iterdir()} >= {"probe.json", "probe.md", "probe.html"}
    assert "<svg" in (written.parent / "probe.html").read_text()
    assert fake_llm.requests
