"""The csv input adapter, `--input -` (JSONL or CSV on standard input) and CSV labels for
`runner eval`, through the command line against the scripted model."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.inputs import iter_records

PIPELINE = """
version: 1
name: csvjudge
models:
  judge: {model: scripted/judge, retries: 0}
input:
  adapter: csv
  with: {types: {score: number, urgent: boolean}}
steps:
  - id: judge
    uses: llm
    with: {model: judge, prompt: judge.j2, output_schema: v.schema.json}
output:
  id: "{{ item.id }}"
  score: "{{ item.score }}"
  urgent: "{{ item.urgent }}"
  verdict: "{{ steps.judge.output.verdict }}"
summary: {count_by: verdict}
"""
SCHEMA = {"type": "object", "required": ["verdict"], "properties": {"verdict": {"type": "string"}}}
ROWS = ('\ufeffid,text,score,urgent\r\n'
        '1,"Paris is in France, says ""the atlas""",0.5,yes\r\n'
        '2,"two\r\nlines",3,no\r\n'
        '\r\n'
        '   \r\n'
        '3,plain,,true\r\n')


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app.narrowed_to(args), list(args), input=stdin, catch_exceptions=False)


@pytest.fixture
def judge(project, scripted_llm):
    project.schema("v.schema.json", SCHEMA)
    project.prompt("judge.j2", "Judge item {{ item.id }}: {{ item.text }}\n")
    scripted_llm.answer_json({"verdict": "TRUE"}, contains="item 1:")
    scripted_llm.answer_json({"verdict": "FALSE"}, contains="item 2:")
    scripted_llm.answer_json({"verdict": "TRUE"}, contains="item 3:")
    return project.pipeline(PIPELINE)


def test_rows_read_with_bom_crlf_quotes_and_types(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(ROWS.encode("utf-8"))
    records = list(iter_records("csv", path, {"types": {"score": "number", "urgent": "boolean"}}))
    assert [r.value for r in records] == [
        {"id": "1", "text": 'Paris is in France, says "the atlas"', "score": 0.5, "urgent": True},
        {"id": "2", "text": "two\r\nlines", "score": 3, "urgent": False},
        {"id": "3", "text": "plain", "score": None, "urgent": True}]
    assert [r.line for r in records] == [2, 3, 7]


def test_a_bad_row_is_an_item_naming_its_line_and_the_others_go_on(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(b'id,n,tags\n1,2,"[1]"\n2,x,[]\n3,4\n4,5,"a"b\n5,\xff,[]\n6,7,{bad\n7,8,[2]\n')
    records = list(iter_records("csv", path, {"types": {"n": "integer", "tags": "json"}}))
    assert [(r.value, r.error) for r in records] == [
        ({"id": "1", "n": 2, "tags": [1]}, None),
        ({"line": 3}, f"{path}:3: column 'n': 'x' is not an integer"),
        ({"line": 4}, f"{path}:4: 2 field(s), the header has 3"),
        ({"line": 5}, f"{path}:5: not valid CSV (',' expected after '\"')"),
        ({"line": 6}, f"{path}:6:3: not UTF-8 text (byte 0xff)"),
        ({"line": 7}, f"{path}:7: column 'tags': '{{bad' is not JSON"),
        ({"id": "7", "n": 8, "tags": [2]}, None)]


@pytest.mark.parametrize("kind", ["integer", "number"])
def test_a_number_cell_past_the_digit_limit_says_so(tmp_path, kind):
    """A number of more digits than Python reads is named as that, not as a non-number."""
    path = tmp_path / "in.csv"
    path.write_text("id,n\n1," + "0" * 4400 + "1\n2,3\n")
    records = list(iter_records("csv", path, {"types": {"n": kind}}))
    assert records[0].error == (f"{path}:2: column 'n': a number of more than 4300 digits, past what runner "
                                "reads (declare the column a string)")
    assert records[1].value == {"id": "2", "n": 3}


@pytest.mark.parametrize(("text", "options", "message"), [
    ("", {}, "no header row (the file is empty)"),
    ("id,,x\n1,2,3\n", {}, ":1: column 2 of the header has no name"),
    ("id,x,id\n", {}, ":1: column 'id' is named twice in the header"),
    ("id,x\n", {"types": {"score": "number"}}, ":1: input.with.types names column 'score', which the header (id, x)"),
])
def test_an_unusable_file_is_refused_before_the_first_record(tmp_path, text, options, message):
    from runner.errors import InputError
    path = tmp_path / "in.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        list(iter_records("csv", path, options))


def test_run_and_eval_a_csv_input_with_csv_labels(judge, project, scripted_llm):
    project.file("items.csv", ROWS)
    run = invoke("run", str(judge), "--input", "items.csv", "--out", "out", "--quiet")
    assert run.exit_code == 0, run.output
    results = project.results()
    assert [(r["id"], r["score"], r["urgent"], r["verdict"]) for r in results] == [
        ("1", 0.5, True, "TRUE"), ("2", 3, False, "FALSE"), ("3", None, True, "TRUE")]
    assert 'Judge item 1: Paris is in France, says "the atlas"' in scripted_llm.calls()[0].prompt
    project.file("labels.csv", 'id,label,note\r\n1,TRUE,"fine, really"\r\n2,TRUE,\r\n3,TRUE,"two\nlines"\r\n')
    scored = invoke("eval", "out", "--labels", "labels.csv", "--key", "id", "--truth", "label")
    assert scored.exit_code == 0, scored.output
    assert "scored 3 of 3 label(s) against 3 result(s)" in scored.output
    report = json.loads((project.root / "out" / "eval.json").read_text(encoding="utf-8"))
    assert report["metrics"]["accuracy"] == 0.6667
    again = invoke("eval", str(judge), "--input", "items.csv", "--out", "again", "--labels", "labels.csv",
                   "--key", "id", "--truth", "label")
    assert again.exit_code == 0, again.output
    assert "accuracy 0.6667" in again.output


def test_eval_runs_a_pipeline_over_standard_input(judge, project):
    project.file("labels.csv", "id,label\n1,TRUE\n2,FALSE\n3,FALSE\n")
    scored = invoke("eval", str(judge), "--input", "-", "--out", "out", "--labels", "labels.csv", "--key", "id",
                    "--truth", "label", stdin=ROWS)
    assert scored.exit_code == 0, scored.output
    assert "scored 3 of 3 label(s) against 3 result(s)" in scored.output and "accuracy 0.6667" in scored.output


def test_a_bad_label_row_is_refused_with_its_line(judge, project):
    project.file("items.csv", ROWS)
    assert invoke("run", str(judge), "--input", "items.csv", "--out", "out", "--quiet").exit_code == 0
    project.file("labels.csv", "id,label\n1,TRUE\n2,TRUE,extra\n")
    refused = invoke("eval", "out", "--labels", "labels.csv", "--key", "id", "--truth", "label")
    assert refused.exit_code == 2
    assert "labels.csv:3: 3 field(s), the header has 2" in refused.stderr


def test_a_bad_input_row_errs_its_item_only(judge, project):
    project.file("items.csv", "id,text,score,urgent\n1,a,0.5,yes\n2,b,high,no\n3,c,1,no\n")
    run = invoke("run", str(judge), "--input", "items.csv", "--out", "out", "--quiet")
    assert run.exit_code == 0, run.output
    results = project.results()
    assert [r.get("verdict") for r in results] == ["TRUE", None, "TRUE"]
    assert results[1]["error"] == "items.csv:3: column 'score': 'high' is not a number"
    assert "1/3 items: items.csv:3: column 'score': 'high' is not a number" in run.stderr


def test_a_wrong_column_type_is_refused_by_validate_with_its_place(judge, project):
    path = project.pipeline(PIPELINE.replace("urgent: boolean", "urgent: bool"), "wrong.yaml")
    checked = invoke("validate", str(path))
    assert checked.exit_code == 2
    assert "pipelines/wrong.yaml:7:41: input.with.types.urgent: 'bool' is not one of" in checked.stderr


def test_csv_on_standard_input(judge, project):
    run = invoke("run", str(judge), "--input", "-", "--out", "out", "--quiet", stdin=ROWS)
    assert run.exit_code == 0, run.output
    assert [r["verdict"] for r in project.results()] == ["TRUE", "FALSE", "TRUE"]
    manifest = json.loads((project.root / "out" / "run.json").read_text(encoding="utf-8"))
    assert manifest["input"]["path"] == "-" and manifest["input"]["stdin"] is True
    assert manifest["input"]["items"] == 3 and len(manifest["input"]["sha256"]) == 64
    assert not [p for p in Path(manifest["cwd"]).iterdir() if p.name.startswith("runner-stdin-")]


def test_jsonl_on_standard_input_with_input_format(judge, project):
    lines = "".join(json.dumps({"id": n, "text": t, "score": 1, "urgent": False}) + "\n" for n, t in ((1, "a"), (2, "b")))
    run = invoke("run", str(judge), "--input", "-", "--input-format", "jsonl", "--quiet", stdin=lines)
    assert run.exit_code == 0, run.output
    group = next((project.root / "reports" / "csvjudge").iterdir())
    assert group.name.startswith("stdin-")
    rendered = invoke("render", str(judge), "--input", "-", "--input-format", "jsonl", stdin=lines)
    assert rendered.exit_code == 0 and "Judge item 2: b" in rendered.output
    unknown = invoke("run", str(judge), "--input", "-", "--input-format", "jsonll", stdin=lines)
    assert unknown.exit_code == 2 and "jsonl" in unknown.stderr


def test_a_sweep_refuses_standard_input(judge, project):
    refused = invoke("sweep", str(judge), "--input", "-", "--labels", "labels.csv", "--key", "id",
                     "--truth", "label", "--grid", "params.x=1,2", stdin="id\n1\n")
    assert refused.exit_code == 2 and "a sweep reads its input once per setting; give a file" in refused.stderr


def test_a_terminal_is_not_read_as_standard_input():
    from runner.errors import InputError
    from runner.inputs.stdin import spool

    class Terminal(io.TextIOWrapper):
        def isatty(self) -> bool:
            return True

    with pytest.raises(InputError, match="standard input is a terminal; pipe the input in"):
        spool(Terminal(io.BytesIO()))


def test_a_record_given_to_a_csv_pipeline_is_the_item_its_row_makes(project, cli):
    """--record parsed each value as YAML: `id=007` became 7, `urgent=1` stayed 1 where the
    column's type makes it true, `weight=1e1` a string, so the prompt, result and item_key
    were not the row's."""
    path = project.pipeline("""
        version: 1
        name: rows
        input: {adapter: csv, with: {types: {urgent: boolean, weight: number}}}
        steps: [{id: c, uses: compute, with: {twice: "{{ item.weight * 2 }}"}}]
        output: {id: "{{ item.id }}", urgent: "{{ item.urgent }}", twice: "{{ steps.c.twice }}"}
        """)
    (project.root / "one.csv").write_text("id,urgent,weight\n007,1,1e1\n")
    cli("run", str(path), "--input", "one.csv", "--out", "rows", "--quiet")
    cli("run", str(path), "--record", "id=007", "--record", "urgent=1", "--record", "weight=1e1", "--out", "record",
        "--quiet")
    assert project.results("record") == project.results("rows") == [
        {"index": 1, "item_key": project.results("rows")[0]["item_key"], "id": "007", "urgent": True, "twice": 20.0}]
    wrong = cli("run", str(path), "--record", "urgent=maybe", "--out", "bad")
    assert wrong.exit_code == 2 and wrong.stderr.strip() == ("--record urgent=maybe: column 'urgent': 'maybe' is not "
                                                            "a boolean (true/false, yes/no, 1/0)")


def test_a_json_cell_is_read_as_a_json_input_is_and_a_number_cell_takes_no_underscore(tmp_path):
    """(hunt) A 2000-deep json cell was a RecursionError traceback (nothing judged), a key given
    twice kept the last silently, and `1_000` read as 1000."""
    path = tmp_path / "in.csv"
    path.write_text("n,m\n1,2\n" + "[" * 2000 + "]" * 2000 + ',3\n"{""k"":1,""k"":2}",4\n5,1_000\nyes,7\n')
    records = list(iter_records("csv", path, {"types": {"n": "json", "m": "integer"}}))
    assert [r.error for r in records] == [
        None, f"{path}:3: column 'n': JSON nested too deeply (more than 200 levels)",
        f"{path}:4: column 'n': the key 'k' is given twice in one object (only one value would be read)",
        f"{path}:5: column 'm': '1_000' is not an integer", f"{path}:6: column 'n': 'yes' is not JSON"]
