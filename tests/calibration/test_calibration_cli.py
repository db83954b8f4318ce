"""`runner eval` and `runner sweep` on a small jury pipeline against the fake server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import run, write_json
from runner.errors import RunnerError
from runner.testing import Reply

REPO = Path(__file__).resolve().parents[2]

SCHEMA = {"type": "object", "required": ["verdict", "reason"],
          "properties": {"verdict": {"type": "string"}, "reason": {"type": "string"}}}
# item id -> (score, answers of jurors a, b, c, the human label)
ITEMS = {1: (0.9, "VVV", "VALID"), 2: (0.9, "VVM", "VALID"), 3: (0.9, "MMM", "MISLEADING"),
         4: (0.3, "VVV", "LOW"), 5: (0.9, "UUV", "UNSUPPORTED"), 6: (0.9, "VVU", "MISLEADING")}
NAMES = {"V": "VALID", "M": "MISLEADING", "U": "UNSUPPORTED"}


@pytest.fixture
def setup(project, scripted_llm):
    project.schema("v.schema.json", SCHEMA)
    project.prompt("judge.j2", "Judge claim {{ item.id }} in {{ params.style }} style\n")
    models = "\n".join(f'  {s}: {{model: scripted/judge-{s}, retries: 0}}'
                       for s in "abc")
    pipeline = project.pipeline(f"""
version: 1
name: cal
params: {{cutoff: 0.5, style: plain}}
models:
{models}
steps:
  - id: jury
    uses: jury
    with: {{models: [a, b, c], prompt: judge.j2, output_schema: v.schema.json,
            vote: {{field: verdict, method: majority, on_tie: HUNG_JURY, on_all_failed: LLM_ERROR}}}}
  - id: verdict
    uses: decide
    with:
      rules:
        - {{when: "item.score < params.cutoff", verdict: LOW}}
        - {{verdict: "{{{{ steps.jury.verdict }}}}"}}
output:
  id: "{{{{ item.id }}}}"
  verdict: "{{{{ steps.verdict.verdict }}}}"
  jury: "{{{{ steps.jury }}}}"
summary: {{count_by: verdict}}
""")
    for n, (_, answers, _) in ITEMS.items():
        for seat, letter in zip("abc", answers):
            scripted_llm.answer_json({"verdict": NAMES[letter], "reason": "r"}, model=f"judge-{seat}",
                                 contains=f"claim {n} ")
    items = write_json(project.root / "items.json", [{"id": n, "score": s} for n, (s, _, _) in ITEMS.items()])
    (project.root / "labels.jsonl").write_text(
        "".join(json.dumps({"id": n, "label": label}) + "\n" for n, (_, _, label) in ITEMS.items()), encoding="utf-8")
    run(pipeline, items, out="runs/first")
    assert len(scripted_llm.requests) == 18
    scripted_llm.requests.clear()
    return pipeline, items, scripted_llm


def label_args(*extra):
    return ["--labels", "labels.jsonl", "--key", "id", "--truth", "label", *extra]


def test_eval_a_run_folder_with_juror_metrics(setup, cli, project):
    _, _, fake = setup
    result = cli("eval", "runs/first", *label_args("--positive", "VALID"))
    assert result.exit_code == 0, result.output
    report = json.loads((project.root / "runs/first/eval.json").read_text())
    assert report["predicted"] == "verdict" and report["scored"] == 6      # count_by is the default
    m = report["metrics"]
    assert m["accuracy"] == 0.8333 and m["confusion"]["labels"] == ["LOW", "MISLEADING", "UNSUPPORTED", "VALID"]
    assert m["baseline"]["predicts"] in ("VALID", "MISLEADING") and m["baseline"]["accuracy"] == 0.3333
    assert report["binary"]["accuracy"] == 0.8333
    jurors = report["jurors"]
    assert jurors["fields"] == ["jury.votes"] and jurors["labels_in_scope"] == ["MISLEADING", "UNSUPPORTED", "VALID"]
    # on items 1, 2, 3, 5, 6 (4 is labelled LOW, which no juror can answer): a and b miss 6, c misses 2, 5 and 6
    assert {k: (v["n"], v["accuracy"]) for k, v in jurors["models"].items()} == {
        "a": (5, 0.8), "b": (5, 0.8), "c": (5, 0.4)}
    assert jurors["models"]["c"]["calls"] == 6
    assert "juror c: accuracy 0.4" in result.output and "join problems: none" in result.output
    text = (project.root / "runs/first/eval.md").read_text()
    assert "| always " in text and "## Jurors" in text
    cli("eval", "runs/first", *label_args())
    page = (project.root / "runs/first/report.html").read_text()
    assert page.count('<section id="eval">') == 1 and page.index('<section id="eval">') < page.index("</body>")
    assert fake.requests == []


def test_eval_exit_codes(setup, cli, project):
    assert cli("eval", "runs/first", *label_args("--fail-under-kappa", "0.5")).exit_code == 0
    failed = cli("eval", "runs/first", *label_args("--fail-under-kappa", "0.95"))
    assert failed.exit_code == 1 and "below --fail-under-kappa 0.95" in failed.stderr
    missing = cli("eval", "runs/first", "--labels", "nope.jsonl", "--key", "id", "--truth", "label")
    assert missing.exit_code == 2 and "nope.jsonl: labels file not found" in missing.stderr
    not_a_run = cli("eval", "prompts", *label_args())
    assert not_a_run.exit_code == 2 and "not a run folder" in not_a_run.stderr
    needs_input = cli("eval", "pipelines/p.yaml", *label_args())
    assert needs_input.exit_code == 2 and "give --input" in needs_input.stderr


def test_eval_reports_join_problems(setup, cli, project):
    (project.root / "labels.jsonl").write_text(
        '{"id": 1, "label": "VALID"}\n{"id": 1, "label": "MISLEADING"}\n{"id": 42, "label": "VALID"}\n')
    result = cli("eval", "runs/first", *label_args())
    assert result.exit_code == 0
    assert "join problems: unmatched labels 1, unlabelled results 5, duplicate labels 1" in result.output
    problems = json.loads((project.root / "runs/first/eval.json").read_text())["problems"]
    assert problems["unmatched_labels"] == ["42"] and problems["duplicate_labels"] == {"1": [1, 2]}


def test_eval_follows_a_latest_pointer(setup, cli, project):
    (project.root / "runs/latest").write_text("first\n")
    assert cli("eval", "runs", *label_args()).exit_code == 0
    os.symlink(project.root / "runs/first", project.root / "linked")
    assert cli("eval", "linked", *label_args()).exit_code == 0
    assert (project.root / "runs/first/eval.json").is_file()


def test_eval_a_pipeline_runs_it_from_the_cache_first(setup, cli, project):
    pipeline, items, fake = setup
    result = cli("eval", str(pipeline), "--input", str(items), "--out", "runs/again", *label_args())
    assert result.exit_code == 0, result.output
    assert fake.requests == [] and (project.root / "runs/again/eval.json").is_file()


def test_sweep_of_non_prompt_params_sends_nothing(setup, cli, project):
    pipeline, items, fake = setup
    result = cli("sweep", str(pipeline), "--input", str(items), *label_args(),
                 "--grid", "params.cutoff=0.2,0.5,0.8", "--out", "sweep")
    assert result.exit_code == 0, result.output
    assert fake.requests == []                                    # the fake server saw no request at all
    report = json.loads((project.root / "sweep/sweep.json").read_text())
    assert [(s["set"]["params.cutoff"], s["status"], s["accuracy"]) for s in report["settings"]] == [
        ("0.2", "cached", 0.6667), ("0.5", "cached", 0.8333), ("0.8", "cached", 0.8333)]
    assert report["best"]["set_line"] == "--set params.cutoff=0.5"
    assert "Best: --set params.cutoff=0.5" in result.output
    page = (project.root / "sweep/sweep.html").read_text()
    assert page.count("<svg") == 1 and "<polyline" in page


def test_sweep_lists_settings_that_need_calls_and_runs_them_only_when_allowed(setup, cli, project):
    pipeline, items, fake = setup
    args = ["sweep", str(pipeline), "--input", str(items), *label_args(),
            "--grid", "params.style=plain,fancy", "--grid", "params.cutoff=0.5", "--out", "sweep"]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert fake.requests == []
    assert "needs 18 call(s): run with --allow-calls" in result.output
    report = json.loads((project.root / "sweep/sweep.json").read_text())
    assert [(s["status"], s["calls_needed"]) for s in report["settings"]] == [("cached", 0), ("needs_calls", 18)]
    allowed = cli(*args, "--allow-calls")
    assert allowed.exit_code == 0
    assert "1 setting(s) need up to 18 new LLM call(s)" in allowed.stderr
    assert len(fake.requests) == 18 and all("fancy style" in r.prompt for r in fake.requests)
    report = json.loads((project.root / "sweep/sweep.json").read_text())
    assert [s["status"] for s in report["settings"]] == ["cached", "ran"]
    nothing = cli("sweep", str(pipeline), "--input", str(items), *label_args(), "--grid", "params.style=gaudy",
                  "--out", "sweep2")
    assert nothing.exit_code == 3 and "Best:" not in nothing.output
    assert nothing.stderr.strip() == ("sweep failed: no setting was scored, each needs requests the cache does "
                                      "not hold: run with --allow-calls to send them (exit code 3)")
    assert (project.root / "sweep2/sweep.json").is_file()          # what it found is written all the same


def test_sweep_usage_errors(setup, cli):
    pipeline, items, _ = setup
    bad_key = cli("sweep", str(pipeline), "--input", str(items), *label_args(), "--grid", "params.cutof=0.1")
    assert bad_key.exit_code == 2 and "Did you mean 'cutoff'?" in bad_key.stderr
    bad_grid = cli("sweep", str(pipeline), "--input", str(items), *label_args(), "--grid", "params.cutoff")
    assert bad_grid.exit_code == 2 and "expected KEY=V1,V2" in bad_grid.stderr
    bad_metric = cli("sweep", str(pipeline), "--input", str(items), *label_args(), "--grid", "params.cutoff=1",
                     "--metric", "speed")
    assert bad_metric.exit_code == 2 and "--metric speed" in bad_metric.stderr


@pytest.mark.slow
def test_sweep_in_worker_processes_matches_the_serial_sweep(setup, project):
    from runner.api import ItemSource
    from runner.calibration.evaluate import EvalSpec
    from runner.calibration.sweep import SweepRequest, parse_grid, run_sweep
    pipeline, items, fake = setup

    def sweep(workers):
        return run_sweep(SweepRequest(pipeline, ItemSource(items), EvalSpec(project.root / "labels.jsonl", "id", "label"),
                                      parse_grid(["params.cutoff=0.2,0.5,0.8", "params.style=plain,fancy"]),
                                      project.root / "cache", workers=workers))

    serial, parallel = sweep(1), sweep(2)
    assert parallel == serial
    assert [s["status"] for s in serial["settings"]] == ["cached", "needs_calls"] * 3
    assert fake.requests == []
    bad = SweepRequest(pipeline, ItemSource(items), EvalSpec(project.root / "labels.jsonl", "id", "label"),
                       parse_grid(["params.cutof=0.2,0.3"]), project.root / "cache", workers=2)
    with pytest.raises(RunnerError, match="Did you mean .cutoff."):
        run_sweep(bad)


def test_sweep_of_a_numeric_judge_ranks_by_mae(project, cli):
    project.pipeline("""
        version: 1
        name: num
        params: {bonus: 0}
        steps:
          - id: score
            uses: compute
            with: {value: "{{ item.x + params.bonus }}"}
        output:
          id: "{{ item.id }}"
          score: "{{ steps.score.value }}"
        """)
    write_json(project.root / "items.json", [{"id": 1, "x": 1}, {"id": 2, "x": 2}, {"id": 3, "x": 4}])
    (project.root / "labels.csv").write_text("id,truth\n1,2\n2,3\n3,4\n", encoding="utf-8")
    result = cli("sweep", "pipelines/p.yaml", "--input", "items.json", "--labels", "labels.csv", "--key", "id",
                 "--truth", "truth", "--predicted", "score", "--grid", "params.bonus=0,1,2", "--out", "sweep")
    assert result.exit_code == 0, result.output
    report = json.loads((project.root / "sweep/sweep.json").read_text())
    # errors per bonus: 0 -> (1, 1, 0), 1 -> (0, 0, 1), 2 -> (1, 1, 2): MAE 2/3, 1/3, 4/3
    assert report["metric"] == "mae" and [s["metric"] for s in report["settings"]] == [0.6667, 0.3333, 1.3333]
    assert report["best"]["set_line"] == "--set params.bonus=1"


def test_eval_says_so_when_no_juror_answered(setup, cli, project, scripted_llm):
    """The run eval makes fails as `runner run` of it would (issue 61: it exited 0): exit 3, its
    scores written all the same."""
    scripted_llm.reset()
    scripted_llm.script(Reply(status=500))
    pipeline, items, _ = setup
    result = cli("eval", str(pipeline), "--input", str(items), "--out", "runs/down", "--set", "params.style=fancy",
                 *label_args())
    assert result.exit_code == 3, result.output
    assert "run failed: no model answered any call (18 call(s) failed; exit code 3)" in result.stderr
    report = json.loads((project.root / "runs/down/eval.json").read_text())
    assert report["jurors"]["models"] == {} and report["metrics"]["accuracy"] == 0.1667   # only LOW is right
    assert "No per-juror scores: no juror answered (jury.votes" in (project.root / "runs/down/eval.md").read_text()


def test_eval_of_a_run_folder_says_its_failed_calls_hint_as_that_runs(setup, cli, project, scripted_llm):
    """`runner eval RUN` printed the run's `every call to ... failed` as if eval had sent them
    (it sends nothing)."""
    scripted_llm.reset()
    scripted_llm.script(Reply(status=500))
    pipeline, items, _ = setup
    assert cli("run", str(pipeline), "--input", str(items), "--out", "runs/down", "--set", "params.style=fancy",
               "--quiet").exit_code == 3
    result = cli("eval", "runs/down", *label_args())
    hints = [line for line in result.stderr.splitlines() if "every call to" in line]
    assert hints and all(line.startswith("when runs/down ran: every call to") for line in hints), result.stderr
