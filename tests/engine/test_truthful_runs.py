"""What a run says is true of that run: a jury whose jurors answered never says they failed,
a hint about failed calls names only what failed, a run no model answered exits 3, and
`--concurrency N` reaches N requests in flight."""

from __future__ import annotations

import json

import pytest

from fakellm import Reply
from helpers import write_json

FAST = "backoff: 0.01, retries: 0, limits: {concurrency: 64}"


@pytest.fixture
def env(fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    return fake_llm


def jury_judge(project, schema, vote):
    project.schema("answer.schema.json", schema)
    project.prompt("judge.j2", "Judge summary {{ item.n }}\n")
    return project.pipeline(f"""
        version: 1
        name: juryt
        env: [FAKE_URL]
        models:
          judge_a: {{model: openai/judge-a, api_base: "{{{{ env.FAKE_URL }}}}", {FAST}}}
          judge_b: {{model: openai/judge-b, api_base: "{{{{ env.FAKE_URL }}}}", {FAST}}}
          judge_c: {{model: openai/judge-c, api_base: "{{{{ env.FAKE_URL }}}}", {FAST}}}
        steps:
          - id: jury
            uses: jury
            with: {{models: [judge_a, judge_b, judge_c], prompt: judge.j2, output_schema: answer.schema.json,
                    vote: {vote}}}
        output:
          verdict: "{{{{ steps.jury.faithful }}}}"
        summary:
          count_by: verdict
        """)


def test_a_vote_that_cannot_be_taken_from_valid_answers_errors_the_item_with_the_reason(project, env, cli):
    """Finding 1 at run time (an answer schema that leaves the type open, so the check before
    the run cannot see it): all three jurors answered `true`; the item errors saying why."""
    path = jury_judge(project, {"type": "object", "required": ["faithful"], "properties": {"faithful": {}}},
                      "{field: faithful, method: mean}")
    env.answer_json({"faithful": True})
    write_json(project.root / "in.json", [{"n": 1}, {"n": 2}])
    result = cli("run", str(path), "--input", "in.json", "--out", "out", "--quiet")
    results = project.results()
    reason = "vote method mean needs numbers; jurors answered booleans for 'faithful'"
    assert all(reason in r["error"] for r in results), results
    assert not any("jurors failed" in json.dumps(r) for r in results)
    assert project.summary()["errors"] == 2
    assert "2/2 items: " in result.output and reason in result.output


def three_jurors_failing_c_on(project, env, failing):
    path = jury_judge(project, {"type": "object", "required": ["faithful"],
                                "properties": {"faithful": {"type": "string"}}},
                      "{field: faithful, method: majority, quorum: 1}")
    for n in failing:
        env.script(Reply(status=500), model="judge-c", contains=f"summary {n}\n")
    env.answer_json({"faithful": "YES"})
    write_json(project.root / "in.json", [{"n": n} for n in range(1, 21)])
    return path


def test_a_hint_about_failed_calls_names_only_what_failed_in_this_run(project, env, cli):
    """Finding 2: on a rerun 57 answers come from the cache and judge_c's 3 calls fail again;
    the hint names judge_c alone, with its 3 calls, on stderr, in report.html and in eval."""
    path = three_jurors_failing_c_on(project, env, failing=(18, 19, 20))
    first = cli("run", str(path), "--input", "in.json", "--quiet")
    assert first.exit_code == 0, first.output
    second = cli("run", str(path), "--input", "in.json", "--quiet")
    assert second.exit_code == 0, second.output
    assert "LLM calls: 3 sent, 57 cached, 3 failed" in second.output
    hints = [line for line in second.output.splitlines() if "every call" in line]
    assert len(hints) == 1 and "judge_c" in hints[0], second.output
    assert hints[0].startswith("every call sent to judge_c at ")          # not every call of its 20
    assert "failed (3 call(s); the cache answered 17 other(s))" in hints[0]
    assert "judge_a" not in hints[0] and "judge_b" not in hints[0]
    [group] = (project.root / "reports" / "juryt").iterdir()
    run = group / (group / "latest").read_text().strip()
    report = (run / "report.html").read_text()
    assert "judge_c" in report and "judge_a, judge_b" not in report
    write_json(project.root / "labels.json", [{"index": n, "label": "YES"} for n in range(1, 21)])
    scored = cli("eval", str(run), "--labels", "labels.json", "--key", "index", "--truth", "label")
    assert scored.exit_code == 0, scored.output
    assert [line for line in scored.output.splitlines() if "every call" in line] == [f"when {run} ran: {hints[0]}"]


def test_an_eval_reprints_a_runs_hint_only_while_its_calls_say_so(project, env, cli):
    """A hint in summary.json that the run's calls.jsonl does not bear out (written by an
    earlier runner, or edited) is not repeated by eval."""
    path = three_jurors_failing_c_on(project, env, failing=(18, 19, 20))
    assert cli("run", str(path), "--input", "in.json", "--out", "out", "--quiet").exit_code == 0
    summary = project.summary()
    summary["hints"] = ["every call to judge_a, judge_b, judge_c at http://127.0.0.1:1/v1 failed (3 call(s)); "
                        "the last: boom"]
    (project.root / "out" / "summary.json").write_text(json.dumps(summary))
    write_json(project.root / "labels.json", [{"index": n, "label": "YES"} for n in range(1, 21)])
    scored = cli("eval", "out", "--labels", "labels.json", "--key", "index", "--truth", "label")
    assert scored.exit_code == 0, scored.output
    assert "every call" not in scored.output


def decide_then_llm(project):
    project.prompt("q.j2", "Question {{ item.q }}\n")
    return project.pipeline("""
        version: 1
        name: nomodel
        models:
          local: {model: openai/local-model, api_base: "http://127.0.0.1:9/v1", backoff: 0.01, retries: 0}
        steps:
          - id: gate
            uses: decide
            with: {rules: [{when: "item.q == 'skip'", verdict: SKIPPED, stop: true}, {verdict: ASKED}]}
          - {id: ask, uses: llm, with: {model: local, prompt: q.j2}, on_error: continue}
        output:
          verdict: "{{ steps.gate.verdict }}"
        summary: {count_by: verdict}
        """)


def test_a_run_no_model_answered_exits_3_even_when_some_items_needed_none(project, cli):
    """Finding 4: with no model reachable, the items that needed no model do not make the
    run look fine to CI (it exited 0)."""
    path = decide_then_llm(project)
    write_json(project.root / "in.json", [{"q": "skip"}, {"q": "a"}, {"q": "b"}])
    result = cli("run", str(path), "--input", "in.json", "--quiet")
    assert result.exit_code == 3, result.output
    assert "no model answered any call" in result.output


def test_a_run_answered_from_the_cache_alone_is_not_a_run_no_model_answered(project, env, cli):
    path = three_jurors_failing_c_on(project, env, failing=())
    assert cli("run", str(path), "--input", "in.json", "--quiet").exit_code == 0
    again = cli("run", str(path), "--input", "in.json", "--quiet")
    assert again.exit_code == 0 and "LLM calls: 0 sent, 60 cached" in again.output


def one_call_per_item(project, pinned=""):
    project.prompt("q.j2", "Question {{ item.q }}\n")
    return project.pipeline(f"""
        version: 1
        name: wide
        env: [FAKE_URL]
        {pinned}
        models:
          m: {{model: openai/m, api_base: "{{{{ env.FAKE_URL }}}}", backoff: 0.01, retries: 0}}
        steps:
          - {{id: ask, uses: llm, with: {{model: m, prompt: q.j2}}}}
        output: {{answer: "{{{{ steps.ask.output }}}}"}}
        """)


def test_concurrency_n_reaches_n_requests_in_flight(project, env, cli):
    """Finding 10: `--concurrency 32` capped requests at 32 while items stayed at 8, so 8
    requests were ever in flight; the scripted server counts the peak."""
    path = one_call_per_item(project)
    env.script(Reply("ok", delay=0.3))
    env.gather = 32                           # held until 32 were in flight: the cap is reached, never passed
    write_json(project.root / "in.json", [{"q": n} for n in range(64)])
    result = cli("run", str(path), "--input", "in.json", "--quiet", "--concurrency", "32")
    assert result.exit_code == 0, result.output
    assert env.peak_in_flight == 32
    assert "pins" not in result.output                                 # nothing pinned: nothing to say


def test_a_pipeline_that_pins_its_items_in_flight_says_so_once(project, env, cli):
    path = one_call_per_item(project, pinned="concurrency: 4")
    env.script(Reply("ok", delay=0.2))
    env.gather = 4
    write_json(project.root / "in.json", [{"q": n} for n in range(16)])
    result = cli("run", str(path), "--input", "in.json", "--quiet", "--concurrency", "16")
    assert result.exit_code == 0, result.output
    assert env.peak_in_flight == 4
    [said] = [line for line in result.output.splitlines() if "pins" in line]
    assert "concurrency: 4" in said and "--concurrency 16" in said and "--set concurrency=16" in said


def test_a_model_template_that_fails_at_run_time_names_its_place_once(project, cli):
    """Finding 5's doubled location (`pipelines/x.yaml:13:5: models.judge_a: pipelines/x.yaml:13:5: ...`)."""
    project.prompt("q.j2", "Question {{ item.q }}\n")
    path = project.pipeline("""
        version: 1
        name: placed
        models:
          m: {model: openai/m, api_base: "{{ run.input.nowhere }}", retries: 0}
        steps:
          - {id: ask, uses: llm, with: {model: m, prompt: q.j2}}
        output: {answer: "{{ steps.ask.output }}"}
        """)
    write_json(project.root / "in.json", [{"q": 1}])
    result = cli("run", str(path), "--input", "in.json", "--quiet")
    [line] = [line for line in result.output.splitlines() if "nowhere" in line]
    assert line.count("pipelines/p.yaml:") == 1, line


def test_an_error_that_is_true_says_its_error_message(project, cli):
    """The slides judge's results say `error: true` beside `error_message` (its seed's format):
    the run, its summary's error groups and a job's message said "True"."""
    path = project.pipeline("""
        version: 1
        name: flagged
        steps: [{id: c, uses: compute, with: {n: "{{ item.n }}"}}]
        output:
          error: "{{ item.n > 1 }}"
          error_message: "{{ 'no data for slide ' ~ item.n if item.n > 1 else none }}"
        """)
    done = cli("run", str(path), "--input", str(write_json(project.root / "in.json", [{"n": 1}, {"n": 2}])),
               "--out", "out")
    assert "1/2 items: no data for slide 2" in done.stderr, done.output
    assert project.summary("out")["error_groups"] == [{"count": 1, "error": "no data for slide 2"}]


def test_a_summary_field_that_cannot_be_computed_is_said_on_stderr(project, cli):
    """It was left out of summary.json with only summary_errors saying why: nothing on the
    terminal, exit 0."""
    path = project.pipeline("""
        version: 1
        name: sf
        steps: [{id: c, uses: compute, with: {x: "{{ item.n }}"}}]
        output: {n: "{{ steps.c.x }}"}
        summary:
          fields: {passes: "{{ results | selectattr('nope') | list | length }}"}
        """)
    done = cli("run", str(path), "--record", "n=1", "--out", "o")
    assert done.exit_code == 0 and "passes" not in project.summary("o")
    assert "summary: pipelines/p.yaml:6:20: summary.fields.passes: undefined: 'dict object' has no attribute " \
           "'nope'" in done.stderr, done.stderr
