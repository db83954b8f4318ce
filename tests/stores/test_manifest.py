"""Trust in a run (issue 32): run.json, groups by input identity, partial runs, exit codes, extents."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

from test_runs import THRESHOLD_PIPELINE as THRESHOLD

from helpers import group_dir, write_json
from runner.engine.progress import CallCounts, PlainLines
from runner.runs.folders import LATEST, LATEST_PARTIAL, resolve_run, runs_in

JUDGE = """
    version: 1
    name: judge
    env: [FAKE_URL, FAKE_KEY]
    params: {threshold: 0.5}
    models:
      m: {model: openai/m, api_base: "{{ env.FAKE_URL }}", api_key: "{{ env.FAKE_KEY }}", retries: 0}
    steps:
      - {id: ask, uses: llm, with: {model: m, prompt: ask.j2, output_schema: answer.schema.json}}
    output: {verdict: "{{ steps.ask.output.verdict }}"}
    summary: {count_by: verdict, rates: {pass_rate: "result.verdict == 'PASS'"}}
    """


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))


def judge_project(project, fake_llm, monkeypatch):
    secret = "sk-test-" + "s3cr3t" * 4
    monkeypatch.setenv("FAKE_URL", fake_llm.url.replace("http://", "http://user:hunter22@"))
    monkeypatch.setenv("FAKE_KEY", secret)
    project.prompt("ask.j2", "{% include 'rules.j2' %}\nJudge {{ item.claim }}\n")
    project.prompt("rules.j2", "Answer in JSON.\n")
    project.schema("answer.schema.json", {"type": "object", "required": ["verdict"],
                                          "properties": {"verdict": {"type": "string"}}})
    fake_llm.answer_json({"verdict": "PASS"})
    return project.pipeline(JUDGE), secret


def test_run_json_records_how_the_run_was_made(project, fake_llm, monkeypatch, cli):
    path, secret = judge_project(project, fake_llm, monkeypatch)
    source = write_json(project.root / "data" / "claims.json", [{"claim": "a"}, {"claim": "b"}, {"claim": "c"}])
    seen_at_start: list[dict] = []

    class Peek:                     # run.json exists (status running) before the first item runs
        def start(self, total, counts):
            seen_at_start.extend(manifest(p) for p in (project.root / "reports").glob("judge/*/2*"))

        def advance(self):
            pass

        def stop(self):
            pass

    from runner.api import ItemSource, run_pipeline
    from runner.runs.request import RunOptions, Selection
    outcome = run_pipeline(path, ItemSource(Path("data/claims.json"), limit=2, selection=Selection(filter="true")),
                           RunOptions(cache_dir=project.root / "cache"), ["params.threshold=0.9"], Peek())
    assert [m["status"] for m in seen_at_start] == ["running"] and seen_at_start[0]["ended_at"] is None
    made = manifest(outcome.out_dir)
    text = (outcome.out_dir / "run.json").read_text()
    assert secret not in text and "hunter22" not in text
    assert made["status"] == "finished" and made["interrupted"] is False and made["ended_at"]
    assert made["runner_version"] and made["cwd"] == str(project.root)
    assert made["pipeline"]["sets"] == ["params.threshold=0.9"]
    assert made["pipeline"]["resolved"]["params"] == {"threshold": 0.9}
    assert made["pipeline"]["resolved"]["models"]["m"]["api_key"] == "{{ env.FAKE_KEY }}"   # the template, not the key
    sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert made["pipeline"]["files"] == {"prompts/ask.j2": sha(project.root / "prompts/ask.j2"),
                                         "prompts/rules.j2": sha(project.root / "prompts/rules.j2"),
                                         "schemas/answer.schema.json": sha(project.root / "schemas/answer.schema.json")}
    assert len(made["pipeline"]["sha256"]) == 64
    assert made["models"]["m"]["api_base"] == fake_llm.url.rstrip("/") and made["models"]["m"]["enabled"] is True
    assert made["input"] == {"path": "data/claims.json", "in_project": "data/claims.json", "items": 3,
                             "sha256": sha(source), "bytes": source.stat().st_size}
    assert made["selection"] == {"item": None, "filter": "true", "failed_from": None, "limit": 2}
    assert made["partial"] is True and made["counts"] == {"input_items": 3, "selected": 2, "planned": 2,
                                                          "done": 2, "errors": 0}
    assert made["argv"][:3] == ["runner", "run", str(path)]
    assert ["--filter", "true"] == made["argv"][made["argv"].index("--filter"):][:2]


def test_a_command_rebuilt_from_run_json_gives_the_same_results(project, fake_llm, monkeypatch, cli):
    path, _ = judge_project(project, fake_llm, monkeypatch)
    fake_llm.reset()
    fake_llm.answer_json({"verdict": "FAIL"}, contains="Judge b")
    fake_llm.answer_json({"verdict": "PASS"})
    write_json(project.root / "claims.json", [{"claim": c} for c in "abcd"])
    first = cli("run", "pipelines/p.yaml", "--input", "claims.json", "--set", "params.threshold=0.7",
                "--filter", "item.claim != 'd'", "--concurrency", "2", "--quiet", "--format", "csv")
    assert first.exit_code == 0, first.stderr
    made = manifest(resolve_run(group_dir(project.root, "judge", "claims.json") / LATEST_PARTIAL))
    os.chdir(made["cwd"])
    again = cli(*made["argv"][1:])
    assert again.exit_code == 0, again.stderr
    runs = runs_in(group_dir(project.root, "judge", "claims.json"), complete_only=False)
    assert len(runs) == 2
    strip = lambda run: [{k: v for k, v in r.items() if k != "duration_ms"}  # noqa: E731
                         for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())]
    assert strip(runs[0]) == strip(runs[1]) and [r["verdict"] for r in strip(runs[1])] == ["PASS", "FAIL", "PASS"]
    assert manifest(runs[1])["argv"] == made["argv"]
    assert (runs[1] / "results.csv").is_file()


def test_diff_shows_how_runs_differ_first_and_refuses_other_inputs(project, cli):
    path = project.pipeline(THRESHOLD)
    source = write_json(project.root / "scores.json", [{"score": s} for s in (0.2, 0.55, 0.7)])
    cli("run", str(path), "--input", str(source), "--quiet")
    cli("run", str(path), "--input", str(source), "--quiet", "--set", "params.threshold=0.6")
    shown = cli("diff")
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[2:5] == ["made differently:", '  --set: [] -> ["params.threshold=0.6"]',
                          "  params.threshold: 0.5 -> 0.6"]
    assert lines.index("  params.threshold: 0.5 -> 0.6") < lines.index("counts by verdict: FAIL 1 -> 2, PASS 2 -> 1")
    group = group_dir(project.root, "th", "scores.json")
    first, second = runs_in(group)
    write_json(source, [{"score": s} for s in (0.9, 0.1, 0.7)])            # the same file, new content
    cli("run", str(path), "--input", str(source), "--quiet")
    refused = cli("diff")
    assert refused.exit_code == 2 and refused.stderr.startswith("not comparing runs over different inputs: ")
    assert "Pass --force" in refused.stderr and refused.stdout == ""
    forced = cli("diff", "--force")
    assert forced.exit_code == 0 and "  input sha256: " in forced.stdout
    same = cli("diff", str(first), str(first))
    assert "made the same way" in same.stdout


def test_eval_warns_when_the_run_is_not_of_the_labels_input(project, cli):
    path = project.pipeline(THRESHOLD)
    write_json(project.root / "labelled" / "scores.json", [{"score": s} for s in (0.2, 0.9, 0.7, 0.1)])
    (project.root / "labelled" / "labels.jsonl").write_text(
        "".join(json.dumps({"index": i, "verdict": v}) + "\n" for i, v in enumerate("FPPF", 1)).replace(
            '"F"', '"FAIL"').replace('"P"', '"PASS"'))
    write_json(project.root / "scores.json", [{"score": 0.9}, {"score": 0.2}])
    cli("run", str(path), "--input", "scores.json", "--quiet")
    cli("run", str(path), "--input", "labelled/scores.json", "--quiet")
    labels = ["--labels", "labelled/labels.jsonl", "--key", "index", "--truth", "verdict"]
    wrong = cli("eval", str(group_dir(project.root, "th", "scores.json")), *labels)
    assert wrong.exit_code == 0
    assert "warning: the run read scores.json, but the labels labelled/labels.jsonl sit beside scores.json: " \
           "is this a run of the labels' input? (2 of 4 label(s) scored)" in wrong.stderr
    right = cli("eval", str(group_dir(project.root, "th", "labelled/scores.json")), *labels)
    assert right.exit_code == 0 and "warning" not in right.stderr and "accuracy 1.0" in right.stdout


def test_runs_group_by_input_identity_not_stem(project, cli):
    path = project.pipeline(THRESHOLD)
    write_json(project.root / "scores.json", [{"score": 0.9}])
    write_json(project.root / "labelled" / "scores.json", [{"score": 0.1}, {"score": 0.9}])
    cli("run", str(path), "--input", "scores.json", "--quiet")
    cli("run", str(path), "--input", "labelled/scores.json", "--quiet")
    top, labelled = group_dir(project.root, "th", "scores.json"), group_dir(project.root, "th", "labelled/scores.json")
    assert top != labelled and top.name.startswith("scores-") and labelled.name.startswith("scores-")
    assert len(runs_in(top)) == len(runs_in(labelled)) == 1
    os.chdir(project.root / "labelled")                       # the same input from another folder: same group
    assert cli("run", "../pipelines/p.yaml", "--input", "scores.json", "--quiet").exit_code == 0
    assert len(runs_in(project.root / "labelled" / "reports" / "th" / labelled.name)) == 1


def test_partial_runs_are_marked_and_never_latest(project, cli):
    path = project.pipeline(THRESHOLD)
    source = write_json(project.root / "scores.json", [{"score": s} for s in (0.2, 0.55, 0.7)])
    cli("run", str(path), "--input", str(source), "--quiet")
    cli("run", str(path), "--input", str(source), "--quiet", "--set", "params.threshold=0.6")
    one = cli("run", str(path), "--input", str(source), "--quiet", "--item", "2", "--set", "params.threshold=0.1")
    assert one.stdout.startswith("1 of 3 item(s), partial (PASS: 1); errors: 0; ")
    group = group_dir(project.root, "th", "scores.json")
    complete, partial = runs_in(group), runs_in(group, complete_only=False)
    assert len(complete) == 2 and len(partial) == 3
    assert (group / LATEST).read_text().strip() == complete[-1].name
    assert (group / LATEST_PARTIAL).read_text().strip() == partial[-1].name
    summary = json.loads((partial[-1] / "summary.json").read_text())
    assert (summary["partial"], summary["planned"], summary["input_items"], summary["total"]) == (True, 1, 3, 1)
    assert manifest(partial[-1])["partial"] is True
    assert "pass_rate: 0.6667 (2/3) -> 0.3333 (1/3)" in cli("diff").stdout    # the two complete runs, not the partial one
    asked = cli("diff", str(group / LATEST_PARTIAL))           # asked for: on its items only
    assert "compared on the 1 item(s) both runs have, rates not compared" in asked.stdout
    assert "counts by verdict: FAIL 1 -> 0, PASS 0 -> 1" in asked.stdout and "pass_rate" not in asked.stdout


SCORED = """
    version: 1
    name: th
    models: {m: {model: scripted/m}}
    steps: [{id: s, uses: llm, with: {model: m, prompt: "Score {{ item.score }}"}}]
    output:
      verdict: "{{ steps.s.raw }}"
      score: "{{ item.score }}"
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    """


def test_failed_from_is_merged_into_its_parent_and_never_shrinks(project, scripted_llm, cli):
    verdicts = {"Score 0.2": "FAIL", "Score 0.55": "FAIL", "Score 0.7": "PASS", "Score 0.9": "PASS"}
    scripted_llm.script(lambda prompt, body: verdicts[prompt])
    path = project.pipeline(SCORED)
    source = write_json(project.root / "scores.json", [{"score": s} for s in (0.2, 0.55, 0.7, 0.9)])
    cli("run", str(path), "--input", str(source), "--quiet")
    group = group_dir(project.root, "th", "scores.json")
    verdicts["Score 0.55"] = "PASS"         # the model answers otherwise now (the call sent again: --no-cache)
    rerun = cli("run", str(path), "--input", str(source), "--quiet", "--failed-from", str(group), "--no-cache")
    assert rerun.exit_code == 0, rerun.stderr
    parent, merged = runs_in(group)
    assert f"4 item(s), 2 rerun and the others from {parent.relative_to(project.root)}" in rerun.stdout
    summary = json.loads((merged / "summary.json").read_text())
    assert (summary["total"], summary["planned"], summary["pass_rate"], summary["partial"]) == (4, 4, 0.75, False)
    assert summary["rerun_of"] == str(parent.relative_to(project.root)) and summary["rerun_items"] == 2
    assert (group / LATEST).read_text().strip() == merged.name
    diffed = cli("diff")
    assert "pass_rate: 0.5 (2/4) -> 0.75 (3/4)" in diffed.stdout and "item 2: verdict: FAIL -> PASS" in diffed.stdout
    again = cli("run", str(path), "--input", str(source), "--quiet", "--failed-from", str(group))
    assert json.loads((runs_in(group)[-1] / "summary.json").read_text())["total"] == 4
    assert "1 rerun" in again.stdout                            # item 1 still fails: the whole input, not 2 of 2
    write_json(source, [{"score": 0.1}])
    other = cli("run", str(path), "--input", str(source), "--quiet", "--failed-from", str(group))
    assert other.exit_code == 2 and "that run read another input" in other.stderr


def test_a_run_whose_params_hold_infinity_can_be_rerun_and_diffed(project, cli):
    """run.json keeps such a param as Python writes it (Infinity): read as data a person wrote,
    it refused every --failed-from and diff of that run."""
    path = project.pipeline(THRESHOLD.replace("params: {threshold: 0.5}", "params: {threshold: 0.5, cap: .inf}"))
    source = write_json(project.root / "scores.json", [{"score": 0.2}, {"score": 0.9}])
    assert cli("run", str(path), "--input", str(source), "--out", "o1", "--quiet").exit_code == 0
    again = cli("run", str(path), "--input", str(source), "--out", "o2", "--failed-from", "o1", "--quiet")
    assert again.exit_code == 0, again.output
    assert cli("diff", "o1", "o2").exit_code == 0


ERRORS = """
    version: 1
    name: err
    steps: [{id: s, uses: compute, with: {v: "{{ 10 / item.d }}"}}]
    output: {v: "{{ steps.s.v }}"}
    """


def test_too_many_errors_exit_3_with_grouped_lines(project, cli):
    path = project.pipeline(ERRORS)
    every = write_json(project.root / "zero.json", [{"d": 0}, {"d": 0}, {"e": 1}])
    failed = cli("run", str(path), "--input", str(every), "--out", "o")
    assert failed.exit_code == 3
    lines = failed.stderr.splitlines()
    assert lines[0].startswith("2/3 items: step 's': ") and "division by zero" in lines[0]
    assert lines[1].startswith("1/3 items: ") and "'d'" in lines[1]
    assert lines[-1] == "run failed: every item errored (3 of 3; exit code 3)"
    groups = json.loads((project.root / "o" / "summary.json").read_text())["error_groups"]
    assert [g["count"] for g in groups] == [2, 1]
    some = write_json(project.root / "some.json", [{"d": 0}, {"d": 1}, {"d": 2}])
    assert cli("run", str(path), "--input", str(some), "--out", "o").exit_code == 0
    assert cli("run", str(path), "--input", str(some), "--out", "o", "--max-errors", "0.5").exit_code == 0
    over = cli("run", str(path), "--input", str(some), "--out", "o", "--max-errors", "0")
    assert over.exit_code == 3 and "more than 0 item(s) errored (--max-errors 0)" in over.stderr
    assert cli("run", str(path), "--input", str(some), "--out", "o", "--max-errors", "20%").exit_code == 3
    bad = cli("run", str(path), "--input", str(some), "--out", "o", "--max-errors", "lots")
    assert bad.exit_code == 2 and bad.stderr.startswith("--max-errors lots: give a count")


def test_an_unreachable_model_is_one_grouped_line_and_exit_3(project, cli):
    path = project.pipeline("""
        version: 1
        name: dead
        models: {local: {model: openai/m, api_base: "http://127.0.0.1:9/v1", retries: 0}}
        steps: [{id: ask, uses: llm, on_error: continue, with: {model: local, prompt: "Is {{ item.n }} odd?"}}]
        output: {answer: "{{ steps.ask.raw | default('') }}"}
        """)
    source = write_json(project.root / "in.json", [{"n": n} for n in range(4)])
    result = cli("run", str(path), "--input", str(source), "--out", "o", "--quiet")
    assert result.exit_code == 3
    grouped = [line for line in result.stderr.splitlines() if line.startswith("4/4 items: ")]
    assert len(grouped) == 1 and "127.0.0.1:9" in grouped[0], result.stderr


def test_fail_under_without_a_rate_is_refused_before_the_run(project, cli):
    path = project.pipeline(ERRORS)
    source = write_json(project.root / "in.json", [{"d": 1}])
    result = cli("run", str(path), "--input", str(source), "--fail-under", "0.8")
    assert result.exit_code == 2 and "has no summary.rates to check" in result.stderr and "nothing run" in result.stderr
    assert not (project.root / "reports").exists()


def test_eta_counts_uncached_work_only():
    now = [0.0]
    calls = CallCounts()
    lines = PlainLines(io.StringIO(), clock=lambda: now[0])
    lines.start(300, lambda: calls)
    lines.done, calls.cached, now[0] = 159, 318, 1.0        # a resume: 159 items from the cache in a second
    assert lines.line().endswith("ETA ?")
    lines.done, calls.sent, now[0] = 169, 20, 11.0          # then 10 items, 2 calls each, in 10 s
    # 131 items left at 2 calls each, 20 calls sent in 11 s: 131 * 2 * 11 / 20 = 144 s
    assert lines.line().endswith("ETA 2:24"), lines.line()


def test_secrets_never_reach_run_json():
    from runner.runs.manifest import redact, redact_assignment, strip_credentials
    assert strip_credentials("https://u:pw@host.example:8443/v1?api-key=abc&version=2") == \
        "https://host.example:8443/v1?api-key=%3Credacted%3E&version=2"
    assert redact_assignment("models.m.api_key=sk-live-123456789") == "models.m.api_key=<redacted>"
    assert redact_assignment("params.threshold=0.9") == "params.threshold=0.9"
    assert redact({"models": {"m": {"api_key": "sk-1234567890", "headers": {"Authorization": "Bearer x"},
                                    "api_base": "http://a:b@h/v1", "token": "{{ env.T }}"}}}) == \
        {"models": {"m": {"api_key": "<redacted>", "headers": {"Authorization": "<redacted>"},
                          "api_base": "http://h/v1", "token": "{{ env.T }}"}}}
