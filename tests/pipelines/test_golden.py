"""The shipped pipelines give the same results, summaries and prompts as recorded: every
scenario runs a shipped pipeline against scripted answers and compares what it wrote
(results.jsonl, summary.json and each call's messages and answer, from calls.jsonl) with
tests/pipelines/golden/<scenario>.json, modulo timings, the fake server's port and the
project's folder. The recordings were made with the pipelines as they stood before the
language's version 2 (issue 52) and are the proof that the rewrite changed nothing.

`RUNNER_WRITE_GOLDEN=1 python -m pytest tests/pipelines/test_golden.py` records them again
(only after a change of results that is meant)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fakellm import FakeLLM, Reply
from helpers import copy_example, run, write_json
from test_citation_judge import SCRIPT as CITATION_SCRIPT
from test_citation_judge import SEATS
from test_citation_judge import answer as juror_answer

REPO = Path(__file__).resolve().parents[2]
JUROR = re.compile(r"model '\w+' \(openai/[\w-]+\)")
GOLDEN = Path(__file__).resolve().parent / "golden"
VOLATILE = {"latency_ms", "duration_ms", "trace_id", "timestamp", "started", "ended", "key", "endpoint",
            "call", "usage", "started_at", "ended_at", "elapsed_s", "mlflow_trace_id"}

# ---- deep judgment ---------------------------------------------------------------------------

RESPONSE = ("In the ATLAS-2 trial, patients received ZX-41 at 40 mg once daily for 12 weeks. "
            "The primary endpoint was met: systolic blood pressure fell by 11.2 mmHg compared with placebo.")
RECORD = {"question": "What did ATLAS-2 find?", "response": RESPONSE,
          "template": {"attributes": {"dose_mg": {"type": "number", "description": "Daily dose"},
                                      "endpoint_met": {"type": "boolean", "description": "Primary endpoint met"}}},
          "expected": {"dose_mg": 40, "endpoint_met": True}}
EXTRACT, RETRY, REASON = "You extract evidence", "could not be found in the response", "explain in one or two"
PARSE, ABSTAIN, RISK = "Fill the attributes below", "decline to answer", "hallucination risk of each excerpt"
GOOD = {"dose_mg": [{"text": "ZX-41 at 40 mg once daily", "confidence": "high"}],
        "endpoint_met": [{"text": "The primary endpoint was met", "confidence": "high"}]}
PARAPHRASE = [{"text": "the main study goal was successfully reached", "confidence": "medium"}]


def excerpts(value: dict[str, Any]) -> str:
    return json.dumps({"excerpts": value})


def common(fake: FakeLLM, abstained: bool = False, parsed: dict[str, Any] | None = None) -> None:
    fake.script(json.dumps({"reasoning": {"dose_mg": "stated as 40 mg", "endpoint_met": "stated as met"}}),
                contains=REASON)
    fake.script(json.dumps(parsed or {"dose_mg": 40, "endpoint_met": True}), contains=PARSE)
    fake.script(json.dumps({"abstained": abstained, "reason": "declined" if abstained else "answered"}),
                contains=ABSTAIN)


def risks(fake: FakeLLM, dose: list[dict[str, str]], endpoint: list[dict[str, str]]) -> None:
    fake.script(json.dumps({"risks": dose}), contains='attribute "dose_mg"')
    fake.script(json.dumps({"risks": endpoint}), contains='attribute "endpoint_met"')


SEARCH_REASONING = json.dumps({"reasoning": {
    "dose_mg": {"reasoning": "40 mg stated", "hallucination_risk": "medium"},
    "endpoint_met": {"reasoning": "met", "hallucination_risk": "none"}}})


@dataclass
class Scenario:
    name: str
    pipeline: str
    script: Callable[[FakeLLM], None]
    records: list[Any] | None = None          # written as in.json; else `input` is copied from examples/
    input: str | None = None
    sets: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    model_sets: Callable[[str], list[str]] = lambda url: []
    cwd_example: str | None = None            # run from a copy of examples/<this>


def dj_sets(url: str) -> list[str]:
    return [f"models.parser.api_base={url}", "models.parser.retries=0"]


def dj(name: str, script: Callable[[FakeLLM], None], records: list[Any] | None = None, *sets: str,
       files: dict[str, str] | None = None) -> Scenario:
    return Scenario(f"deep_judgment_{name}", "deep_judgment", script, records or [RECORD], sets=list(sets),
                    files=files or {}, model_sets=dj_sets)


def s_all_valid(fake: FakeLLM) -> None:
    fake.script(excerpts(GOOD), contains=EXTRACT)
    common(fake)


def s_retry_fixed(fake: FakeLLM) -> None:
    fake.script(excerpts({**GOOD, "endpoint_met": PARAPHRASE}), contains=EXTRACT)
    fake.script(excerpts({"endpoint_met": [{"text": "The primary endpoint was met", "confidence": "high"}]}),
                contains=RETRY)
    common(fake)


def s_never_fixed(fake: FakeLLM) -> None:
    fake.script(excerpts({**GOOD, "endpoint_met": PARAPHRASE}), contains=EXTRACT)
    fake.script(excerpts({"endpoint_met": [{"text": "the trial was a triumph", "confidence": "low"}]}),
                contains=RETRY)
    common(fake)


def s_second_retry_fixes(fake: FakeLLM) -> None:
    fake.script(excerpts({"dose_mg": [{"text": "forty milligrams", "confidence": "high"}],
                          "endpoint_met": PARAPHRASE}), contains=EXTRACT)
    fake.script(excerpts({"dose_mg": [{"text": "ZX-41 at 40 mg once daily", "confidence": "high"},
                                      {"text": "ZX-41 at 40 mg once daily", "confidence": "high"}]}),
                contains='"forty milligrams"')
    fake.script(excerpts({"endpoint_met": [{"text": "endpoint reached", "confidence": "low"}]}),
                contains='"the main study goal was successfully reached"')
    fake.script(excerpts({"endpoint_met": [{"text": "primary endpoint was met", "confidence": "medium"},
                                           {"text": "nonsense", "confidence": "low"}]}),
                contains='"endpoint reached"')
    common(fake)


def s_abstention(fake: FakeLLM) -> None:
    fake.script(excerpts({"half_life_hours": [{"text": "", "confidence": "none"}]}), contains=EXTRACT)
    fake.script(json.dumps({"reasoning": {"half_life_hours": "not given"}}), contains=REASON)
    fake.script(json.dumps({"half_life_hours": None}), contains=PARSE)
    fake.script(json.dumps({"abstained": True, "reason": "declined"}), contains=ABSTAIN)


ABSTAINING = {"response": "I'm sorry, I don't know the half-life of ZX-41.",
              "template": {"attributes": {"half_life_hours": {"type": "number"}}}}


def s_missing_not_abstained(fake: FakeLLM) -> None:
    fake.script(excerpts({"half_life_hours": [{"text": "", "confidence": "none"}]}), contains=EXTRACT)
    fake.script(json.dumps({"reasoning": {"half_life_hours": "not given"}}), contains=REASON)
    fake.script(json.dumps({"half_life_hours": None}), contains=PARSE)
    fake.script(json.dumps({"abstained": False, "reason": "it answered"}), contains=ABSTAIN)


def s_disabled(fake: FakeLLM) -> None:
    common(fake)


def s_mismatch(fake: FakeLLM) -> None:
    fake.script(excerpts(GOOD), contains=EXTRACT)
    common(fake, parsed={"dose_mg": 20, "endpoint_met": True})


def s_parse_invalid(fake: FakeLLM) -> None:
    fake.script(excerpts(GOOD), contains=EXTRACT)
    common(fake, parsed={"dose_mg": "forty", "endpoint_met": True})


def s_extract_not_json(fake: FakeLLM) -> None:
    fake.script("no json", contains=EXTRACT)
    common(fake)


def s_extract_500(fake: FakeLLM) -> None:
    fake.script(Reply(status=500), contains=EXTRACT)
    common(fake)


def s_reasoning_fails(fake: FakeLLM) -> None:
    fake.script(excerpts(GOOD), contains=EXTRACT)
    fake.script("not json at all", contains=REASON)
    fake.script(json.dumps({"dose_mg": 40, "endpoint_met": True}), contains=PARSE)
    fake.script(json.dumps({"abstained": False, "reason": "answered"}), contains=ABSTAIN)


def s_abstention_fails(fake: FakeLLM) -> None:
    fake.script(excerpts({**GOOD, "endpoint_met": PARAPHRASE}), contains=EXTRACT)
    fake.script(excerpts({"endpoint_met": [{"text": "nope", "confidence": "low"}]}), contains=RETRY)
    fake.script(json.dumps({"reasoning": {"dose_mg": "stated", "endpoint_met": "unclear"}}), contains=REASON)
    fake.script(json.dumps({"dose_mg": 40, "endpoint_met": None}), contains=PARSE)
    fake.script(Reply(status=500), contains=ABSTAIN)


def s_reask_fails(fake: FakeLLM) -> None:
    fake.script(excerpts({**GOOD, "endpoint_met": PARAPHRASE}), contains=EXTRACT)
    fake.script(Reply(status=500), contains=RETRY)
    common(fake)


def s_mixed_confidence(fake: FakeLLM) -> None:
    fake.script(excerpts({"dose_mg": [{"text": "", "confidence": "none"},
                                      {"text": "40 mg once daily", "confidence": "high"},
                                      {"text": "ZX-41 at 40 mg", "confidence": "medium"},
                                      {"text": "patients received ZX-41", "confidence": "low"}],
                          "endpoint_met": [{"text": "The primary endpoint was met", "confidence": "high"},
                                           {"text": "The primary endpoint was met", "confidence": "high"}],
                          "unknown_attribute": [{"text": "ignored", "confidence": "high"}]}),
                contains=EXTRACT)
    common(fake)


def s_parse_repaired(fake: FakeLLM) -> None:
    fake.script(excerpts(GOOD), contains=EXTRACT)
    fake.script(json.dumps({"reasoning": {"dose_mg": "stated", "endpoint_met": "met"}}), contains=REASON)
    fake.script(Reply(json.dumps({"dose_mg": "forty", "endpoint_met": True})),
                Reply(json.dumps({"dose_mg": 40, "endpoint_met": True})), contains=PARSE)
    fake.script(json.dumps({"abstained": False, "reason": "answered"}), contains=ABSTAIN)


def both(*parts: str) -> Callable[[dict[str, Any]], bool]:
    """A rule's `when`: the request's messages hold every part."""
    return lambda body: all(part in json.dumps(body.get("messages"), ensure_ascii=False) for part in parts)


def s_example(fake: FakeLLM) -> None:
    fake.script(json.dumps({"reasoning": {"dose_mg": "40 mg", "duration_weeks": "12 weeks",
                                          "primary_endpoint_met": "met", "most_common_side_effect": "dizziness"}}),
                contains=REASON)
    fake.script(json.dumps({"dose_mg": 40, "duration_weeks": 12, "primary_endpoint_met": True,
                            "most_common_side_effect": "Mild dizziness"}), when=both(PARSE, "Daily dose"))
    fake.script(json.dumps({"half_life_hours": None}), when=both(PARSE, "Elimination half-life"))
    fake.script(json.dumps({"abstained": False, "reason": "answered"}), when=both(ABSTAIN, "ATLAS-2 trial, patients"))
    fake.script(json.dumps({"abstained": True, "reason": "declined"}), when=both(ABSTAIN, "half-life of ZX-41"))
    fake.script(excerpts({"dose_mg": [{"text": "ZX-41 at 40 mg once daily", "confidence": "high"}],
                          "duration_weeks": [{"text": "for 12 weeks", "confidence": "high"}],
                          "primary_endpoint_met": [{"text": "The primary endpoint was met", "confidence": "high"}],
                          "most_common_side_effect": [{"text": "Mild dizziness was the most common side effect",
                                                       "confidence": "high"}]}),
                when=both(EXTRACT, "ATLAS-2 trial, patients"))
    fake.script(excerpts({"half_life_hours": [{"text": "", "confidence": "none"}]}),
                when=both(EXTRACT, "half-life of ZX-41"))


def search_script(dose: list[dict[str, str]], endpoint: list[dict[str, str]], reasoning: str = SEARCH_REASONING,
                  extra: bool = True) -> Callable[[FakeLLM], None]:
    def script(fake: FakeLLM) -> None:
        more = [{"text": "for 12 weeks", "confidence": "medium"}] if extra else []
        fake.script(excerpts({**GOOD, "dose_mg": GOOD["dose_mg"] + more}), contains=EXTRACT)
        risks(fake, dose, endpoint)
        fake.script(reasoning, contains=REASON)
        fake.script(json.dumps({"dose_mg": 40, "endpoint_met": True}), contains=PARSE)
        fake.script(json.dumps({"abstained": False, "reason": "answered"}), contains=ABSTAIN)
    return script


def s_assess_fails(fake: FakeLLM) -> None:
    fake.script(excerpts(GOOD), contains=EXTRACT)
    fake.script(Reply(status=500), contains='attribute "dose_mg"')
    fake.script("{broken", contains='attribute "endpoint_met"')
    fake.script(SEARCH_REASONING, contains=REASON)
    fake.script(json.dumps({"dose_mg": 40, "endpoint_met": True}), contains=PARSE)
    fake.script(json.dumps({"abstained": False, "reason": "answered"}), contains=ABSTAIN)


CORPUS = {"corpus/atlas.txt": "ZX-41 at 40 mg once daily for 12 weeks met the primary endpoint.\n\n"
                              "Unrelated paragraph about weather.\n"}
LOCAL = ("params.search_enabled=true", "params.search_provider=local", "params.search_folder=corpus")
NO_RECORD = {**RECORD}
NO_RECORD.pop("expected")
TWO = [RECORD, {**RECORD, "question": "Second copy?", "response": RESPONSE + " Second copy.", "expected": {"dose_mg": 40, "endpoint_met": False}}]

DEEP = [
    dj("all_valid", s_all_valid),
    dj("retry_fixed", s_retry_fixed),
    dj("never_fixed", s_never_fixed),
    dj("second_retry_fixes", s_second_retry_fixes),
    dj("one_retry", s_never_fixed, None, "params.excerpt_retry_attempts=1"),
    dj("no_retries", s_never_fixed, None, "params.excerpt_retry_attempts=0"),
    dj("abstention", s_abstention, [ABSTAINING]),
    dj("missing_not_abstained", s_missing_not_abstained, [ABSTAINING]),
    dj("disabled", s_disabled, None, "params.deep_judgment_enabled=false"),
    dj("disabled_with_search", s_disabled, None, "params.deep_judgment_enabled=false", *LOCAL, files=CORPUS),
    dj("mismatch", s_mismatch),
    dj("parse_invalid", s_parse_invalid, None, "params.parse_repair_attempts=0"),
    dj("parse_invalid_after_repair", s_parse_invalid),
    dj("extract_not_json", s_extract_not_json),
    dj("extract_500", s_extract_500),
    dj("reasoning_fails", s_reasoning_fails),
    dj("abstention_fails", s_abstention_fails),
    dj("reask_fails", s_reask_fails),
    dj("mixed_confidence", s_mixed_confidence, None, "params.max_excerpts_per_attribute=2"),
    dj("no_expected", s_all_valid, [NO_RECORD]),
    dj("two_items", s_all_valid, TWO),
    dj("example", s_example, json.loads((REPO / "examples/deep_judgment/input.json").read_text())),
    dj("search_risks", search_script([{"excerpt": "ZX-41 at 40 mg once daily", "risk": "low"},
                                      {"excerpt": "for 12 weeks", "risk": "medium"}],
                                     [{"excerpt": "The primary endpoint was met", "risk": "none"}]),
       None, *LOCAL, files=CORPUS),
    dj("search_high_and_empty", search_script([{"excerpt": "x", "risk": "high"}], []), None, *LOCAL,
       files={"corpus/a.txt": "Something about ZX-41.\n"}),
    dj("search_unknown_risk_words", search_script([{"excerpt": "x", "risk": "none"}, {"excerpt": "y", "risk": "low"}],
                                                  [{"excerpt": "z", "risk": "high"}], extra=False),
       None, *LOCAL, "params.search_max_results=1", "params.search_query_words=2", files=CORPUS),
    dj("search_folder_missing", search_script([], []), None, "params.search_enabled=true",
       "params.search_provider=local", "params.search_folder=nowhere"),
    dj("search_tavily_without_key", search_script([], []), None, "params.search_enabled=true"),
    dj("search_empty_folder", search_script([], []), None, *LOCAL, files={"corpus/empty.txt": "\n"}),
    dj("search_assess_fails", s_assess_fails, None, *LOCAL, files=CORPUS),
    dj("parse_repaired", s_parse_repaired),
    dj("search_with_retries", lambda fake: (s_never_fixed(fake), risks(fake, [{"excerpt": "a", "risk": "low"}], [])),
       None, *LOCAL, files=CORPUS),
]

# ---- citation judge -------------------------------------------------------------------------


def citation_script(fake: FakeLLM) -> None:
    for fragment, answers in CITATION_SCRIPT.items():
        for (seat, model), verdict in zip(SEATS.items(), answers, strict=True):
            fake.script(Reply(status=500) if verdict is None else Reply(juror_answer(verdict, seat)),
                        model=model, contains=fragment)


def seats(*names: str) -> Callable[[str], list[str]]:
    def sets(url: str) -> list[str]:
        out = []
        for seat in names:
            out += [f"models.{seat}.model=openai/{SEATS[seat]}", f"models.{seat}.api_base={url}",
                    f"models.{seat}.enabled=true", f"models.{seat}.retries=0", f"models.{seat}.backoff=0.01"]
        return out
    return sets


def cj(name: str, *sets: str, jurors: tuple[str, ...] = ("local", "gemini", "openai"),
       script: Callable[[FakeLLM], None] = citation_script, records: list[Any] | None = None,
       input: str | None = "report.md") -> Scenario:
    return Scenario(f"citation_judge_{name}", "citation_judge", script, records, None if records else input,
                    sets=list(sets), model_sets=seats(*jurors), cwd_example="citation_judge")


def labelled_script(fake: FakeLLM) -> None:
    for seat, model in SEATS.items():
        fake.script(juror_answer("VALID", seat), model=model, contains="Senate")
        fake.script(Reply(status=500), model=model, contains="President")
        fake.script(juror_answer("UNSUPPORTED" if seat == "local" else "MISLEADING", seat), model=model)


CITATION = [
    cj("example"),
    cj("debug_jury", "params.skip_jury_when_quote_not_found=false"),
    cj("strict_threshold", "params.quote_threshold=0.98"),
    cj("one_seat", jurors=("local",)),
    cj("two_seats_tie", jurors=("local", "openai")),
    cj("context_lines", "params.context_lines=1", "params.min_quote_words=3"),
    cj("labelled", input="labelled/report.md", script=labelled_script),
    cj("records", records=[
        {"claim": "Madison said ambition must counteract ambition", "quote": "Ambition must be made to counteract "
         "ambition", "file": "federalist_51.txt", "start": 14, "end": 15},
        {"claim": "No quote given, the claim is searched", "file": "federalist_51.txt", "start": 14},
        {"file": "us_constitution.txt", "start": 100000, "claim": "beyond the end"},
        {"file": "../../etc/passwd", "start": 1, "quote": "root"},
        {"index": 7, "file": "mit_license.txt", "start": 1, "end": 3, "claim": "It is the MIT license",
         "quote": "MIT License"}]),
]

# ---- the other shipped pipelines ------------------------------------------------------------


def ollama_sets(name: str) -> Callable[[str], list[str]]:
    return lambda url: [f"models.{name}.api_base={url.rsplit('/v1', 1)[0]}", f"models.{name}.retries=0",
                        f"models.{name}.backoff=0.01"]


def evidence_script(fake: FakeLLM) -> None:
    fake.script(json.dumps({"is_valid": True, "evidence_type": "explicit", "quality_score": 0.95, "issue": None}),
                contains="Ms. Dana Whitfield.")
    fake.script(Reply(status=500), contains="class of 1998")
    fake.script(json.dumps({"is_valid": False, "evidence_type": "inappropriate", "issue": "products"}),
                contains="skincare")
    fake.script(json.dumps({"is_valid": True, "evidence_type": "weak", "quality_score": 0}))


def slide_script(fake: FakeLLM) -> None:
    fake.script(json.dumps({"rating": "green", "explanation": "all numbers match", "issues": []}), contains="Q1 revenue")
    fake.script(Reply(status=500), contains="Growth")
    fake.script(json.dumps({"score": 55, "explanation": "partly", "issues": [{"type": "number", "detail": "x"}]}))


def verdict_script(fake: FakeLLM) -> None:
    fake.script(json.dumps({"verdict": "contradicts", "confidence": "high",
                            "rationale": "Several trials show the opposite result."}), contains="Metformin")
    fake.script("not json", contains="aerobic exercise")
    fake.script(json.dumps({"verdict": "undecided", "confidence": "low", "rationale": "The evidence is mixed here."}))


OTHERS = [
    Scenario("evidence_judge_example", "evidence_judge", evidence_script, input="evidence_judge/input.json",
             model_sets=ollama_sets("judge")),
    Scenario("slide_judge_example", "slide_judge", slide_script, input="input.json", model_sets=ollama_sets("judge"),
             cwd_example="slide_judge"),
    Scenario("verdict_analyzer_example", "verdict_analyzer", verdict_script, input="verdict_analyzer/input.jsonl",
             model_sets=ollama_sets("analyst")),
]

SCENARIOS = [*DEEP, *CITATION, *OTHERS]


def normalized(value: Any, replace: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: normalized(v, replace) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalized(v, replace) for v in value]
    if isinstance(value, str):
        for old, new in replace.items():
            value = value.replace(old, new)
        return value
    return value


def outcome_of(scenario: Scenario, root: Path, fake: FakeLLM) -> dict[str, Any]:
    """Run the scenario in `root` (the working folder) and read back what the run wrote."""
    if scenario.cwd_example:
        work = root / "work"
        copy_example(REPO / "examples" / scenario.cwd_example, work)
    else:
        work = root
    os.chdir(work)
    for name, text in scenario.files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
    if scenario.records is not None:
        source = write_json(work / "in.json", scenario.records)
    elif scenario.cwd_example:
        source = Path(str(scenario.input))
    else:
        source = REPO / "examples" / str(scenario.input)
    scenario.script(fake)
    out = work / "out"
    run(REPO / "pipelines" / f"{scenario.pipeline}.yaml", source, out=out, cache_dir=root / "cache",
        overrides=[*scenario.model_sets(fake.url), *scenario.sets])
    results = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    calls_file = out / "calls.jsonl"
    calls = [json.loads(line) for line in calls_file.read_text(encoding="utf-8").splitlines()] \
        if calls_file.is_file() else []
    shown = sorted(({"item": c["item"], "step": c["step"], "model": c["model"], "messages": c["messages"],
                     "answer": c["answer"], "cached": c["cached"], "error": c["error"]} for c in calls),
                   key=lambda c: json.dumps(c, sort_keys=True))
    replace = {fake.url.rsplit("/v1", 1)[0]: "http://FAKE", str(root.resolve()): "<ROOT>", str(root): "<ROOT>"}
    return normalized({"results": results, "summary": summary, "calls": shown}, replace)


def without_races(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary but for what a race decides: which of several failed jurors' calls ended last
    (the one an item's error names), and so the order of equal-count error groups."""
    groups = summary.get("error_groups")
    if groups is None:
        return summary
    counts: dict[str, int] = {}
    for group in groups:
        error = JUROR.sub("model M", group["error"])
        counts[error] = counts.get(error, 0) + group["count"]
    return {**summary, "error_groups": sorted(counts.items())}


# OTHERS reach their model through litellm (Ollama's protocol): imported by one worker only
# Each shipped pipeline's example runs in the README's test command; the other scenarios (a
# path each through deep_judgment and citation_judge) under `-m slow`, as CI runs them.
@pytest.mark.parametrize("scenario", [
    pytest.param(s, marks=[*([pytest.mark.xdist_group("litellm")] if s in OTHERS else []),
                           *([] if s.name.endswith("_example") else [pytest.mark.slow])])
    for s in SCENARIOS], ids=[s.name for s in SCENARIOS])
def test_same_results_as_recorded(scenario: Scenario, tmp_path: Path, fake_llm: FakeLLM,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    got = outcome_of(scenario, tmp_path, fake_llm)
    golden = GOLDEN / f"{scenario.name}.json"
    if os.environ.get("RUNNER_WRITE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(json.dumps(got, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
        return
    expected = json.loads(golden.read_text(encoding="utf-8"))
    assert got["results"] == expected["results"]
    assert without_races(got["summary"]) == without_races(expected["summary"])
    assert got["calls"] == expected["calls"]
