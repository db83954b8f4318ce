"""The citation judge end to end: the bundled example against three scripted jurors (the
scripted model; the first run through HTTP, against the fake server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakellm import Reply
from helpers import calls_of, copy_example
from runner.engine.steps.read_lines import FileCache

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "citation_judge"
PIPELINE = REPO / "pipelines" / "citation_judge.yaml"

# claim fragment -> answers of local, gemini, openai (None: that juror fails)
SCRIPT = {
    "opens by declaring": ("VALID", "VALID", "VALID"),
    "holds it self-evident": ("VALID", "VALID", "MISLEADING"),
    "CLAIM BEING MADE: Excessive bail": (None, "VALID", "VALID"),
    "remedy for concentrated power": ("VALID", None, "UNSUPPORTED"),
    "conceded outright": ("MISLEADING", "MISLEADING", "MISLEADING"),
    "limits presidents to two terms": (None, None, None),
    "Each senator is powerful": ("INSUFFICIENT", "INSUFFICIENT", "INSUFFICIENT"),
    "Second Amendment guarantees": ("VALID", "VALID", "VALID"),
    "July 4, 1774": ("VALID", "VALID", "VALID"),
    "Eighth Amendment forbids": ("UNSUPPORTED", "UNSUPPORTED", "UNSUPPORTED"),
}
SEATS = {"local": "local-model", "gemini": "gemini-fake", "openai": "gpt-fake"}


def answer(verdict: str, seat: str) -> str:
    good = verdict == "VALID"
    return json.dumps({"verdict": verdict, "substantive_quote": verdict != "INSUFFICIENT", "quote_in_context": good,
                       "supports_claim": good, "reason": f"{seat} finds it {verdict.lower()}"})


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    copy_example(EXAMPLE, tmp_path / "example")
    monkeypatch.chdir(tmp_path / "example")
    return tmp_path / "example"


def jury_overrides(url: str | None = None) -> list[str]:
    """The three seats at the fake server at `url`, or with no url the scripted model."""
    args = []
    for seat, model in SEATS.items():
        for key, value in (("model", f"openai/{model}" if url else f"scripted/{model}"), ("api_base", url or "null"),
                           ("enabled", "true"),
                           ("retries", "0"), ("backoff", "0.01")):
            args += ["--set", f"models.{seat}.{key}={value}"]
    return args


def script(fake_llm) -> None:
    for fragment, answers in SCRIPT.items():
        for (seat, model), verdict in zip(SEATS.items(), answers):
            reply = Reply(status=500) if verdict is None else Reply(answer(verdict, seat))
            fake_llm.script(reply, model=model, contains=fragment)


def test_example_end_to_end(workdir, fake_llm, cli, tmp_path, monkeypatch):
    script(fake_llm)
    opened = []
    original = FileCache.get

    def recording(self, path, encoding):
        opened.append(path)
        return original(self, path, encoding)

    monkeypatch.setattr(FileCache, "get", recording)
    args = ["run", str(PIPELINE), "--input", "report.md", "--out", "out", "--cache-dir", str(tmp_path / "cache"),
            *jury_overrides(fake_llm.url)]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    results = [json.loads(line) for line in (workdir / "out" / "results.jsonl").read_text().splitlines()]
    verdicts = [r["verdict"] for r in results]
    assert verdicts == ["VALID", "VALID", "VALID", "HUNG_JURY", "MISLEADING", "LLM_ERROR", "INSUFFICIENT",
                        "QUOTE_NOT_FOUND", "QUOTE_NOT_FOUND", "QUOTE_NOT_FOUND", "LINES_NOT_FOUND",
                        "FILE_NOT_FOUND", "PATH_OUTSIDE_ROOT"]
    by_index = {r["index"]: r for r in results}
    semantic = {i: by_index[i]["step_3_semantic"] for i in range(1, 11)}
    assert semantic[1]["reason"] == "Consensus (3/3): VALID: local finds it valid"
    assert semantic[2]["reason"] == "Majority (2/3): VALID: local finds it valid"
    assert semantic[3]["reason"] == "Consensus (2/2): VALID: gemini finds it valid"
    assert semantic[4]["reason"] == "Hung jury: 1 VALID, 1 UNSUPPORTED"
    assert semantic[6]["reason"].startswith("All 3 jurors failed: model 'local' (openai/local-model)")
    assert semantic[6]["supports_claim"] is None
    assert (semantic[1]["substantive_quote"], semantic[1]["quote_in_context"], semantic[1]["supports_claim"]) == \
        (True, True, True)
    assert [v["model"] for v in semantic[3]["votes"]] == ["local", "gemini", "openai"]
    assert semantic[3]["votes"][0]["error"] and semantic[3]["votes"][1]["value"] == "VALID"
    # quote not found: the verdict cannot change, so no juror is asked; the reason is the quote check's
    fabricated = by_index[8]
    assert fabricated["step_2_quote_match"] is False and fabricated["step_3_semantic"] is None
    assert fabricated["reason"] == "Quote check failed: not found in the source"
    assert by_index[9]["reason"] == "Quote check failed: a number differs from the source"
    assert by_index[1]["reason"] == semantic[1]["reason"]
    assert by_index[12]["reason"] == "file 'magna_carta.txt' not found under data/canonical"
    assert "changed_number" in by_index[9]["quote_flags"]
    first = by_index[1]
    assert first["step_1_existence"] is True and first["step_2_quote_match"] is True and first["quote_score"] == 1.0
    assert first["verified"] is True and first["text_found"].startswith("[L100] Congress shall make no law")
    assert first["citation"] == {"index": 1, "file": "us_constitution.txt", "start": 100, "end": 101,
                                 "claim": 'The First Amendment opens by declaring that "Congress shall make no law '
                                          'respecting an establishment of religion"',
                                 "quote": "Congress shall make no law respecting an establishment of religion"}
    assert "error" not in first
    for index, status in ((11, "LINES_NOT_FOUND"), (12, "FILE_NOT_FOUND"), (13, "PATH_OUTSIDE_ROOT")):
        unreadable = by_index[index]
        assert unreadable["step_1_existence"] is False and unreadable["step_3_semantic"] is None
        assert unreadable["error"].startswith(f"{status}: ")
    root = (workdir / "data" / "canonical").resolve()
    assert opened and all(path.is_relative_to(root) for path in opened)
    assert not any("etc" in p.parts or "magna" in p.name for p in fake_llm_prompts(fake_llm))
    assert len(fake_llm.requests) == 21            # 7 readable citations with their quote found x 3 jurors
    summary = json.loads((workdir / "out" / "summary.json").read_text())
    assert summary["total"] == 13 and summary["verified"] == 3 and summary["verification_rate"] == 0.2308
    assert summary["counts"]["QUOTE_NOT_FOUND"] == 3 and summary["counts"]["HUNG_JURY"] == 1
    report = (workdir / "out" / "report.md").read_text()
    # the report names each citation's claim and quote, and each vote's call (issue 18)
    assert ("| 4 | federalist_51.txt | 14 | 15 | Madison's remedy for concentrated power was rivalry: \"Ambition "
            "must be made to counteract ambition\" | Ambition must be made to counteract ambition | HUNG_JURY | 1 | "
            "Hung jury: 1 VALID, 1 UNSUPPORTED |  |  |") in report
    assert "  - openai (" in report and "(call 4.3)" in report
    assert "| QUOTE_NOT_FOUND | 0.431 | Quote check failed: not found in the source |" in report
    assert "overrides the jury's" not in report
    calls = calls_of(workdir / "out")
    assert len(calls) == 21 and {(c["item"], c["model"]) for c in calls} >= {(1, "gemini"), (2, "gemini")}

    # a second run repeats no successful call: only the failed ones are sent again
    fake_llm.requests.clear()
    assert cli(*args).exit_code == 0
    resent = sorted((r.model, next(f for f in SCRIPT if f in r.prompt)) for r in fake_llm.requests)
    assert resent == sorted([("local-model", "CLAIM BEING MADE: Excessive bail"),
                             ("gemini-fake", "remedy for concentrated power"),
                             ("local-model", "limits presidents to two terms"),
                             ("gemini-fake", "limits presidents to two terms"),
                             ("gpt-fake", "limits presidents to two terms")])


def test_the_jury_still_runs_for_debugging_when_asked(workdir, scripted_llm, cli, tmp_path):
    script(scripted_llm)
    result = cli("run", str(PIPELINE), "--input", "report.md", "--out", "out", "--cache-dir", str(tmp_path / "cache"),
                 "--set", "params.skip_jury_when_quote_not_found=false", *jury_overrides())
    assert result.exit_code == 0, result.output
    results = [json.loads(line) for line in (workdir / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in results][7:10] == ["QUOTE_NOT_FOUND"] * 3
    fabricated = results[7]
    assert fabricated["step_3_semantic"]["verdict"] == "VALID"          # the jury ran, and was overruled
    assert fabricated["reason"] == "Quote check failed: not found in the source"
    assert len(scripted_llm.requests) == 30
    report = (workdir / "out" / "report.md").read_text()
    assert "- final verdict QUOTE_NOT_FOUND overrides the jury's VALID" in report
    assert "| QUOTE_NOT_FOUND | 0.431 | Quote check failed: not found in the source |" in report


def fake_llm_prompts(fake_llm) -> list[Path]:
    return [Path(word) for r in fake_llm.requests for word in r.prompt.split() if "/" in word]


def test_no_model_reachable_finishes_quickly_with_a_hint(workdir, cli, tmp_path):
    result = cli("run", str(PIPELINE), "--input", "report.md", "--out", "out", "--cache-dir", str(tmp_path / "c"),
                 "--set", "models.local.api_base=http://127.0.0.1:9/v1")
    assert result.exit_code == 3                     # no model answered any call (though 6 items needed none)
    assert "7/13 items: model 'local' (openai/local-model) at http://127.0.0.1:9/v1: connection refused" \
        in result.stderr.splitlines()
    assert "local unreachable (connection refused): start a model server there" in result.stderr
    results = [json.loads(line) for line in (workdir / "out" / "results.jsonl").read_text().splitlines()]
    readable = [r for r in results if r["step_1_existence"]]
    assert {(r["step_3_semantic"] or {}).get("verdict") for r in readable} == {"LLM_ERROR", None}
    assert {r["verdict"] for r in readable} == {"LLM_ERROR", "QUOTE_NOT_FOUND"}


def test_single_claim_with_record(workdir, scripted_llm, cli, tmp_path):
    for model in SEATS.values():
        scripted_llm.script(answer("VALID", model), model=model)
    result = cli("run", str(PIPELINE), "--record", "claim=Madison said ambition must counteract ambition",
                 "--record", "quote=Ambition must be made to counteract ambition", "--record", "file=federalist_51.txt",
                 "--record", "start=14", "--record", "end=15", "--out", "one",
                 "--cache-dir", str(tmp_path / "cache"), *jury_overrides())
    assert result.exit_code == 0, result.output
    (only,) = [json.loads(line) for line in (workdir / "one" / "results.jsonl").read_text().splitlines()]
    assert only["verdict"] == "VALID" and only["verified"] is True and only["quote_score"] == 1.0
    assert only["citation"]["file"] == "federalist_51.txt"


def test_render_previews_every_prompt_without_a_model(workdir, cli, tmp_path, scripted_llm):
    result = cli("render", str(PIPELINE), "--input", "report.md", "--cache-dir", str(tmp_path / "cache"))
    assert result.exit_code == 0
    assert result.stdout.count("--- LLM call: model local") == 7      # not for the 3 quotes not found
    assert "CLAIM BEING MADE: The First Amendment opens by declaring" in result.stdout
    assert "SOURCE FILE: us_constitution.txt\nCITED LINES: L100-L101" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("LLM calls: 7 (0 cached), est. prompt tokens: ")
    assert scripted_llm.requests == []


def test_shipped_pipelines_validate(cli):
    files = sorted(str(p) for p in (REPO / "pipelines").glob("*.yaml"))
    result = cli("validate", *files)
    assert result.exit_code == 0, result.output
    for file in files:
        assert Path(file).read_text().startswith("# yaml-language-server: $schema=../schemas/pipeline.schema.json")
