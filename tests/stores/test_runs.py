"""Runs kept in their own folders, the `latest` pointer, memo stores across runs, runner diff."""

from __future__ import annotations

import json

from helpers import group_dir, write_json
from runner.runs.folders import LATEST, resolve_run, runs_in
from runner.stores.memo import MemoStore

THRESHOLD_PIPELINE = """
    version: 1
    name: th
    params: {threshold: 0.5}
    steps: [{id: s, uses: compute, with: {ok: "{{ item.score >= params.threshold }}"}}]
    output:
      verdict: "{{ 'PASS' if steps.s.ok else 'FAIL' }}"
      score: "{{ item.score }}"
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    """


def test_each_run_gets_its_folder_and_latest_points_at_the_last(project, cli):
    path = project.pipeline(THRESHOLD_PIPELINE)
    source = write_json(project.root / "scores.json", [{"score": s} for s in (0.2, 0.55, 0.7, 0.9)])
    first = cli("run", str(path), "--input", str(source), "--quiet")
    second = cli("run", str(path), "--input", str(source), "--quiet", "--set", "params.threshold=0.6")
    assert first.exit_code == second.exit_code == 0
    group = group_dir(project.root, "th", "scores.json")
    runs = runs_in(group)
    assert len(runs) == 2 and runs[0] != runs[1]
    assert (group / LATEST).read_text().strip() == runs[1].name
    assert resolve_run(group) == runs[1] and resolve_run(group / LATEST) == runs[1]
    assert f"written to {runs[1].relative_to(project.root)}" in second.stdout
    assert [json.loads(x)["verdict"] for x in (runs[0] / "results.jsonl").read_text().splitlines()] == \
        ["FAIL", "PASS", "PASS", "PASS"]

    shown = cli("diff")                                       # default: the last two runs
    assert shown.exit_code == 0, shown.stderr
    assert "counts by verdict: FAIL 1 -> 2, PASS 3 -> 2" in shown.stdout
    assert "pass_rate: 0.75 (3/4) -> 0.5 (2/4)" in shown.stdout
    assert "1 item(s) changed:\n  item 2: verdict: PASS -> FAIL\n" in shown.stdout
    as_json = json.loads(cli("diff", str(runs[0]), str(runs[1]), "--json", "--field", "score").stdout)
    assert as_json["changed"] == [{"index": 2, "changes": {"verdict": ["PASS", "FAIL"]}}]
    assert as_json["counts"] == {"before": {"FAIL": 1, "PASS": 3}, "after": {"FAIL": 2, "PASS": 2}}
    assert as_json["fields"] == ["verdict", "score", "error"]
    same = cli("diff", str(group))                           # a group: its last two
    assert same.stdout.splitlines()[2:] == shown.stdout.splitlines()[2:]
    previous = cli("diff", str(runs[1]))                      # one run: it and the run before
    assert "item 2: verdict: PASS -> FAIL" in previous.stdout


def test_diff_needs_two_runs(project, cli):
    path = project.pipeline(THRESHOLD_PIPELINE)
    source = write_json(project.root / "scores.json", [{"score": 0.9}])
    assert cli("diff").stderr.startswith("no runs under reports/")
    cli("run", str(path), "--input", str(source), "--quiet")
    lone = cli("diff")
    assert lone.exit_code == 2 and "1 finished run(s) here, need two" in lone.stderr


def test_explicit_out_writes_exactly_there(project, cli):
    path = project.pipeline(THRESHOLD_PIPELINE)
    source = write_json(project.root / "scores.json", [{"score": 0.9}])
    for _ in range(2):
        assert cli("run", str(path), "--input", str(source), "--out", "mine", "--quiet").exit_code == 0
    assert sorted(p.name for p in (project.root / "mine").iterdir() if not p.name.startswith(".")) == [
        "report.html", "report.md", "results.jsonl", "run.json", "summary.json"]
    assert not (project.root / "reports").exists()


def test_memo_store_is_shared_by_the_runs_of_a_group(project, cli):
    path = project.pipeline("""
        version: 1
        name: m
        memo: {key: "{{ item.k }}", store: memo_map.json}
        steps: [{id: s, uses: compute, with: {v: "{{ item.k | upper }}"}}]
        output: {v: "{{ steps.s.v }}"}
        """)
    source = write_json(project.root / "in.json", [{"k": "a"}, {"k": "b"}])
    cli("run", str(path), "--input", str(source), "--quiet")
    cli("run", str(path), "--input", str(source), "--quiet")
    group = group_dir(project.root, "m", "in.json")
    assert dict(MemoStore(group / "memo_map.json").items()) == {"a": {"v": "A"}, "b": {"v": "B"}}
    assert (group / "memo_map.sqlite").is_file()
    latest = json.loads((resolve_run(group) / "summary.json").read_text())
    assert latest["memo"]["reused"] == 2


def test_diff_of_an_out_folder_compares_with_the_run_that_started_before_it_not_the_name_before(project, cli):
    """`--out zzz_old` then `--out aaa_new`: diff took aaa_new as the earlier run (folder-name
    order), so a drop read as a rise, and diff of aaa_new found no run before it."""
    path = project.pipeline(THRESHOLD_PIPELINE)
    source = write_json(project.root / "scores.json", [{"score": s} for s in (0.2, 0.55, 0.7, 0.9)])
    runs = project.root / "runs"
    assert cli("run", str(path), "--input", str(source), "--quiet", "--out", str(runs / "zzz_old")).exit_code == 0
    manifest = runs / "zzz_old" / "run.json"     # started a day before (runs started in one second go by name)
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "started_at": "2026-01-01T00:00:00+00:00"}))
    assert cli("run", str(path), "--input", str(source), "--quiet", "--out", str(runs / "aaa_new"),
               "--set", "params.threshold=0.8").exit_code == 0
    shown = cli("diff", str(runs / "aaa_new"), "--max-drop", "0.1")
    assert shown.exit_code == 1 and "pass_rate: 0.75 (3/4) -> 0.25 (1/4)" in shown.output, shown.output
    typo = cli("diff", str(runs / "zzz_old"), str(runs / "aaa_new"), "--field", "scor")    # was watched, silently
    assert typo.exit_code == 2 and "--field scor: no result of either run has it; unknown field " \
        "'scor'. Did you mean 'score'?" in typo.stderr, typo.output
    for real in ("error", "verdict"):        # (review) a field every result holds, or none errored: no typo
        assert cli("diff", str(runs / "zzz_old"), str(runs / "aaa_new"), "--field", real).exit_code == 0
