"""The search step (tavily against a fake server, local folders, caching) and deep
judgment's stage 1.5."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakellm import Reply
from helpers import run, scripted_seats, write_json
from test_deep_judgment import ABSTAIN, EXTRACT, GOOD, PARSE, REASON, RECORD, excerpts

REPO = Path(__file__).resolve().parents[2]
DEEP = REPO / "pipelines" / "deep_judgment.yaml"
TAVILY_RESULTS = {"results": [
    {"title": "ATLAS-2 results", "url": "https://example.org/atlas2", "content": "ZX-41 40 mg daily met its endpoint.",
     "score": 0.93},
    {"title": "ZX-41 label", "url": "https://example.org/label", "content": "Dose: 40 mg once daily.", "score": 0.71}]}


def search_pipeline(project, provider="tavily", extra=""):
    return project.pipeline(f"""
        version: 1
        name: s
        env: [SEARCH_URL, TAVILY_API_KEY]
        params: {{folder: corpus}}
        steps:
          - id: found
            uses: search
            with:
              query: "{{{{ item.q }}}}"
              provider: {provider}
              max_results: 2
              api_base: "{{{{ env.SEARCH_URL | default(none) }}}}"
              api_key: "{{{{ env.TAVILY_API_KEY | default(none) }}}}"
              folder: "{{{{ params.folder }}}}"
              backoff: 0.01
              {extra}
        output:
          results: "{{{{ steps.found.results }}}}"
          error: "{{{{ steps.found.error }}}}"
          cached: "{{{{ steps.found.cached }}}}"
        """)


@pytest.fixture
def tavily(fake_llm, monkeypatch):
    monkeypatch.setenv("SEARCH_URL", fake_llm.url.rsplit("/v1", 1)[0])
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-secret-key-1234")
    return fake_llm


def one(project, path, query="ZX-41 dose", **options):
    return run(path, write_json(project.root / "in.json", [{"q": query}]), **options).results[0]


def test_tavily_results_and_request(project, tavily):
    tavily.script(json.dumps(TAVILY_RESULTS))
    result = one(project, search_pipeline(project))
    assert result["results"][0] == {"title": "ATLAS-2 results", "url": "https://example.org/atlas2",
                                    "content": "ZX-41 40 mg daily met its endpoint.", "score": 0.93}
    assert "error" not in result and result["cached"] is False
    (request,) = tavily.requests
    assert request.path == "/search" and request.headers["authorization"] == "Bearer tvly-secret-key-1234"
    assert request.body == {"query": "ZX-41 dose", "max_results": 2, "search_depth": "basic"}


def test_tavily_error_is_data_not_a_crash(project, tavily):
    tavily.script(Reply(status=401))
    result = one(project, search_pipeline(project))
    assert result["results"] == [] and result["error"] == "tavily: HTTP 401"
    assert len(tavily.requests) == 1                          # a client error is not retried


def test_tavily_retries_server_errors(project, tavily):
    tavily.script(Reply(status=503), Reply(json.dumps(TAVILY_RESULTS)))
    assert len(one(project, search_pipeline(project))["results"]) == 2
    assert len(tavily.requests) == 2


def test_tavily_timeout(project, tavily):
    tavily.script(Reply(json.dumps(TAVILY_RESULTS), delay=1.0))
    result = one(project, search_pipeline(project, extra="timeout: 0.3\n              retries: 1"))
    assert result["results"] == [] and result["error"] == "tavily: timed out after 0.3 s"
    assert len(tavily.requests) == 2


def test_tavily_without_a_key(project, tavily, monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY")
    result = one(project, search_pipeline(project))
    assert result["error"] == "missing API key: set TAVILY_API_KEY" and tavily.requests == []


def test_searches_are_cached_without_the_key(project, tavily, monkeypatch):
    tavily.script(json.dumps(TAVILY_RESULTS))
    path = search_pipeline(project)
    one(project, path)
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-another-key-5678")
    again = one(project, path)
    assert again["cached"] is True and len(tavily.requests) == 1
    assert one(project, path, query="other query")["cached"] is False
    for file in (project.root / "cache").rglob("*"):
        if file.is_file():
            assert b"tvly-secret-key-1234" not in file.read_bytes()


def test_local_folder_search_and_cache(project):
    project.file("corpus/atlas.txt", "Intro paragraph about trials.\n\nZX-41 at 40 mg once daily lowered "
                                     "systolic pressure.\n\nUnrelated closing words.\n")
    project.file("corpus/other.md", "Weather report: sunny.\n")
    path = search_pipeline(project, provider="local")
    result = one(project, path, query="ZX-41 40 mg daily")
    top = result["results"][0]
    assert top["path"] == "atlas.txt" and top["title"] == "atlas.txt:L3" and "40 mg" in top["content"]
    assert 0 < top["score"] <= 1 and len(result["results"]) == 2
    assert one(project, path, query="ZX-41 40 mg daily")["cached"] is True
    project.file("corpus/atlas.txt", "ZX-41 at 80 mg once daily.\n")            # edited folder: a miss
    edited = one(project, path, query="ZX-41 40 mg daily")
    assert edited["cached"] is False and "80 mg" in edited["results"][0]["content"]
    missing = one(project, search_pipeline(project, provider="local", extra=""), query="x",
                  overrides=["params.folder=nowhere"])
    assert missing["error"] == "local search: folder 'nowhere' not found"


def test_unknown_provider(project):
    result = one(project, search_pipeline(project, provider="bingo"))
    assert "unknown search provider 'bingo'" in result["error"]


def deep(project, scripted_llm, *extra):
    source = write_json(project.root / "in.json", [RECORD])
    return run(DEEP, source, out=project.root / "out", cache_dir=project.root / "cache",
               overrides=[*scripted_seats("parser"), "models.parser.retries=0",
                          "params.search_enabled=true", *extra]).results[0]


def script_deep(scripted_llm, risks):
    scripted_llm.script(excerpts({**GOOD, "dose_mg": GOOD["dose_mg"] + [
        {"text": "for 12 weeks", "confidence": "medium"}]}), contains=EXTRACT)
    scripted_llm.script(json.dumps({"risks": risks["dose_mg"]}), contains='attribute "dose_mg"')
    scripted_llm.script(json.dumps({"risks": risks["endpoint_met"]}), contains='attribute "endpoint_met"')
    scripted_llm.script(json.dumps({"reasoning": {"dose_mg": {"reasoning": "40 mg stated", "hallucination_risk": "medium"},
                                              "endpoint_met": {"reasoning": "met", "hallucination_risk": "none"}}}),
                    contains=REASON)
    scripted_llm.script(json.dumps({"dose_mg": 40, "endpoint_met": True}), contains=PARSE)
    scripted_llm.script(json.dumps({"abstained": False, "reason": "answered"}), contains=ABSTAIN)


def test_stage_one_point_five_takes_the_max_risk(project, scripted_llm, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-key")
    project.file("corpus/atlas.txt", "ZX-41 at 40 mg once daily for 12 weeks met the primary endpoint.\n")
    script_deep(scripted_llm, {
        "dose_mg": [{"excerpt": "ZX-41 at 40 mg once daily", "risk": "low"},
                    {"excerpt": "for 12 weeks", "risk": "medium"}],
        "endpoint_met": [{"excerpt": "The primary endpoint was met", "risk": "none"}]})
    result = deep(project, scripted_llm, "params.search_provider=local", f"params.search_folder={project.root / 'corpus'}")
    dj = result["deep_judgment"]
    assert dj["hallucination_risk_assessment"] == {"dose_mg": "medium", "endpoint_met": "none"}
    assert dj["search_results"]["dose_mg"][0]["results"][0]["path"] == "atlas.txt"
    assert dj["attribute_reasoning"] == {"dose_mg": "40 mg stated", "endpoint_met": "met"}
    assert dj["deep_judgment_model_calls"] == 6        # excerpts, 2 risk checks, reasoning, parse, abstention
    assert result["verify_result"] is True                            # informational only
    risk_prompt = scripted_llm.calls(contains='attribute "dose_mg"')[0].prompt
    assert 'EXCERPT: "for 12 weeks"' in risk_prompt and "atlas.txt" in risk_prompt
    reasoning_prompt = scripted_llm.calls(contains=REASON)[0].prompt
    assert "hallucination risk from search: medium" in reasoning_prompt and '"hallucination_risk"' in reasoning_prompt


def test_high_risk_never_auto_fails(project, scripted_llm):
    project.file("corpus/a.txt", "Something about ZX-41.\n")
    script_deep(scripted_llm, {"dose_mg": [{"excerpt": "x", "risk": "high"}], "endpoint_met": []})
    result = deep(project, scripted_llm, "params.search_provider=local", f"params.search_folder={project.root / 'corpus'}")
    assert result["deep_judgment"]["hallucination_risk_assessment"] == {"dose_mg": "high"}
    assert result["verify_result"] is True and "warnings" not in result


def test_deep_judgment_completes_when_search_fails(project, scripted_llm, monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    script_deep(scripted_llm, {"dose_mg": [], "endpoint_met": []})
    result = deep(project, scripted_llm)                                 # tavily without a key: every search fails
    dj = result["deep_judgment"]
    assert dj["hallucination_risk_assessment"] == {}
    assert dj["search_results"]["dose_mg"][0]["error"] == "missing API key: set TAVILY_API_KEY"
    assert scripted_llm.calls(contains="hallucination risk of each excerpt") == []
    assert result["verify_result"] is True and result["parsed"] == {"dose_mg": 40, "endpoint_met": True}
    assert dj["deep_judgment_model_calls"] == 4
