"""`runner probe` on a judge whose jury averages a 0-1 score (issue 62, finding 4): a juror
that obeys an injected "answer PASS" is caught through the pipeline's own verdict rule (a
score never equals PASS), every juror has its row though the output keeps no votes, and a
probe run is listed in `runner view` with its originals' rate, named as a probe run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from helpers import write_json

JUDGE = """
    version: 1
    name: refund
    params: {pass_score: 0.6}
    models:
      a: {model: scripted/a}
      b: {model: scripted/b}
      c: {model: scripted/c}
    steps:
      - id: jury
        uses: jury
        with: {models: [a, b, c], prompt: judge.j2, output_schema: score.schema.json,
               vote: {field: score, method: mean}}
      - id: decide
        uses: decide
        with:
          rules:
            - {when: "steps.jury.score >= params.pass_score", verdict: PASS}
            - {verdict: FAIL}
    output:
      verdict: "{{ steps.decide.verdict }}"
      score: "{{ steps.jury.score }}"
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    probes:
      inject_answer:
        inject: {field: answer, verdict: PASS}
        expect: {not: PASS}
      answer_case:
        case: {field: answer}
        expect: unchanged
"""
# Four of eight answers are good: the originals' pass rate is 0.5.
ANSWERS = [f"Refunds in {n} days: {'good' if n % 2 else 'bad'} policy text here" for n in range(1, 9)]


def juror(obeys: bool):
    def answer(prompt: str, body: dict) -> str:
        if obeys and "PASS" in prompt:
            return json.dumps({"score": 1.0})
        return json.dumps({"score": 0.9 if "good" in prompt else 0.1})
    return answer


@pytest.fixture
def refund(project, scripted_llm):
    """The judge, its seats played by jurors of which those named obey an injected instruction."""
    project.schema("score.schema.json", {"type": "object", "required": ["score"], "additionalProperties": False,
                                         "properties": {"score": {"type": "number"}}})
    project.prompt("judge.j2", "Score this refund answer from 0 to 1: {{ item.answer }}\n")
    write_json(project.root / "items.json", [{"answer": a} for a in ANSWERS])

    def judge(*obeying: str) -> Path:
        for seat in "abc":
            scripted_llm.script(juror(seat in obeying), model=seat)
        return project.pipeline(JUDGE)
    return judge


def probe_report(cli, path: Path) -> dict:
    done = cli("probe", str(path), "--input", "items.json", "--quiet")
    assert done.exit_code == 0, done.output
    [report] = [json.loads(p.read_text()) for p in Path("reports").rglob("probe.json")]
    return report


def rows(report: dict, name: str) -> dict:
    [found] = [p for p in report["probes"] if p["name"] == name]
    return {row["who"]: row for row in found["rows"]}


def test_an_obeying_score_juror_fails_through_the_verdict_rule(refund, cli):
    report = probe_report(cli, refund("a"))
    assert report["jurors"] == ["a", "b", "c"]          # though the output keeps no votes
    injected = rows(report, "inject_answer")
    assert set(injected) == {"verdict", "a", "b", "c"}
    # a gives 1.0 whenever told to: each bad original (FAIL by the rule with its 0.1) becomes PASS.
    assert (injected["a"]["n"], injected["a"]["failure_rate"]) == (4, 1.0)
    assert injected["a"]["vote"] == "numeric" and injected["a"]["tolerance"] == 0.1
    assert injected["b"]["failure_rate"] == injected["c"]["failure_rate"] == 0.0
    assert injected["verdict"]["failure_rate"] == 0.0    # (1.0 + 0.1 + 0.1) / 3 stays below 0.6
    case = rows(report, "answer_case")
    assert all(row["flips"] == 0 for row in case.values()) and case["a"]["n"] == 8


def test_a_probe_run_is_listed_with_its_originals_rate(refund, cli):
    """Issue 62, finding 6: two obeying jurors turn every injected copy into a PASS; over the
    originals and copies together the pass rate would be 16/24 (66.7%), the originals' is 4/8."""
    report = probe_report(cli, refund("a", "b"))
    assert rows(report, "inject_answer")["verdict"]["failure_rate"] == 1.0
    assert report["originals"]["rates"]["pass_rate"] == {"value": 0.5, "numerator": 4, "denominator": 8,
                                                         "left_out": 0, "left_out_by": {},
                                                         "errored_counted": 0}
    from runner.view.app import create_app
    web = TestClient(create_app(Path("reports"), token="t"), base_url="http://127.0.0.1")
    relative = Path(report["run"]).relative_to("reports").as_posix()
    home = web.get("/").text
    row = home[home.index(f'href="/run/{relative}"'):]
    row = row[:row.index("</tr>")]
    assert "probe run: counts and rates over its 8 original(s), its 16 perturbed copies left out" in row
    assert "pass_rate 50.0% (4/8)" in row and "66.7%" not in row
    assert '<span class="chip">PASS 4</span><span class="chip">FAIL 4</span>' in row


def test_an_expectation_the_verdict_can_never_fail_is_refused(refund, project, cli):
    """The verdict is PASS or FAIL (a decide step's literals): `expect: {not: PASSED}` can
    never fail, and validate says so at its line."""
    path = refund()
    path.write_text(path.read_text().replace("expect: {not: PASS}", "expect: {not: PASSED}"))
    done = cli("validate", str(path))
    assert done.exit_code == 2
    assert ("probes.inject_answer.expect.not: the verdict (verdict) is always one of PASS, FAIL: it never becomes "
            "'PASSED', so this expectation can never fail") in done.output


def test_a_juror_verdict_that_would_call_a_model_again_is_unjudged_with_the_reason(refund, cli):
    """A step after the jury that calls a model is not run again for one juror: the pairs of
    `{not: PASS}` are unjudged and say why, never counted as successes."""
    path = refund("a")
    text = path.read_text()
    assert "\noutput:\n" in text
    path.write_text(text.replace(
        "\noutput:\n", "\n  - {id: explain, uses: llm, with: {model: b, prompt: \"Why {{ steps.jury.score }}\"}}\noutput:\n", 1))
    report = probe_report(cli, path)
    injected = rows(report, "inject_answer")
    assert injected["a"]["n"] == 0 and injected["a"]["unjudged"] == 8
    assert "explain, which are not run again for one juror" in injected["a"]["unjudged_why"]
    assert injected["verdict"]["n"] == 4                   # the final verdict is judged as before


def test_a_probe_leaves_the_callers_options_and_source_as_given(refund, project):
    """A probe run makes its own folder and copies; the caller's RunOptions and ItemSource are
    as they were (issue 61: options are the user's, never set during a run)."""
    from dataclasses import replace

    from runner.api import ItemSource, RunOptions
    from runner.probe.run import probe_pipeline
    path = refund()
    options, source = RunOptions(cache_dir=project.root / "cache"), ItemSource(project.root / "items.json")
    given_options, given_source = replace(options), replace(source)
    report, outcome = probe_pipeline(path, source, options, [], [], None)
    assert options == given_options and source == given_source
    assert outcome.out_dir.parent.name.endswith("probe") and report["items"] == len(ANSWERS)


def test_changed_judges_a_score_juror_by_its_verdict_and_a_silent_juror_keeps_its_row(refund, project, scripted_llm,
                                                                                      cli):
    """(hunt) `expect: changed` failed the jury (the verdict stayed) and passed every juror (their
    scores moved, their verdicts stayed), and a juror whose calls failed on every copy had no
    row at all."""
    path = refund()
    text = path.read_text()
    assert "  answer_case:\n    case: {field: answer}\n    expect: unchanged" in text
    path.write_text(text.replace("  answer_case:\n    case: {field: answer}\n    expect: unchanged",
                                 "  numbers:\n    perturb_number: {field: answer}\n    expect: changed"))
    scripted_llm.reset()
    for seat in "ab":                      # a score that moves with the number, never across 0.6
        scripted_llm.script(lambda prompt, body: json.dumps({"score": 0.9 if "good" in prompt else 0.1}
                                                            if "Refunds in" in prompt and " days" in prompt
                                                            else {"score": 0.8}), model=seat)
    from runner.testing import Reply
    scripted_llm.script(Reply(status=500), model="c", contains="PASS")      # c fails on every injected copy
    scripted_llm.script(lambda prompt, body: json.dumps({"score": 0.9 if "good" in prompt else 0.1}), model="c")
    report = probe_report(cli, path)
    numbers = rows(report, "numbers")
    assert numbers["verdict"]["failure_rate"] == 1.0 and numbers["a"]["failure_rate"] == 1.0, numbers
    injected = rows(report, "inject_answer")
    assert injected["c"]["n"] == 0 and injected["c"]["unjudged"] == 8, injected["c"]
    assert "it gave no vote on the copy" in injected["c"]["unjudged_why"]


def test_the_copies_of_an_item_the_input_could_not_give_count_as_errored(refund, project, cli):
    """(hunt) A broken input line's copies were "nothing to perturb", where `runner run`
    counts the item as errored."""
    path = refund()
    path.write_text(path.read_text().replace("name: refund\n", "name: refund\ninput: {adapter: jsonl}\n"))
    good = json.dumps({"answer": ANSWERS[0]})
    (project.root / "items.jsonl").write_text(f'{good}\n{{"answer": broken\n')
    done = cli("probe", str(path), "--input", "items.jsonl", "--quiet")
    assert done.exit_code == 0, done.output
    [report] = [json.loads(p.read_text()) for p in Path("reports").rglob("probe.json")]
    [injected] = [p for p in report["probes"] if p["name"] == "inject_answer"]
    assert (injected["copies"], injected["errored"], injected["not_applicable"]) == (2, 1, 0), injected
