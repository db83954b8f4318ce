"""Choosing items: --item, --filter, --failed-from."""

from __future__ import annotations

from helpers import write_json

PIPELINE = """
    version: 1
    name: sel
    steps: [{id: s, uses: compute, with: {r: "{{ 10 / item.d }}"}}]
    output:
      verdict: "{{ 'PASS' if steps.s.r >= 5 else 'FAIL' }}"
      d: "{{ item.d }}"
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    """


def indexes(project, out="out"):
    return [r["index"] for r in project.results(out)]


def test_item_filter_and_failed_from(project, cli):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"d": 1}, {"d": 5}, {"d": 0}, {"d": 2}, {"kind": "x"}])
    assert cli("run", str(path), "--input", str(source), "--out", "all", "--quiet").exit_code == 0
    verdicts = {r["index"]: r.get("verdict", "ERROR") for r in project.results("all")}
    assert verdicts == {1: "PASS", 2: "FAIL", 3: "ERROR", 4: "PASS", 5: "ERROR"}

    cli("run", str(path), "--input", str(source), "--out", "one", "--item", "4", "--quiet")
    assert indexes(project, "one") == [4]
    cli("run", str(path), "--input", str(source), "--out", "big", "--filter", "item.d >= 2", "--quiet")
    assert indexes(project, "big") == [2, 4]                  # item 5 has no d: not selected
    cli("run", str(path), "--input", str(source), "--out", "again", "--failed-from", "all", "--quiet")
    assert indexes(project, "again") == [1, 2, 3, 4, 5]       # merged into its parent (issue 32)
    assert project.summary("again")["rerun_items"] == 3         # 2, 3 and 5 ran again
    both = cli("run", str(path), "--input", str(source), "--out", "b", "--failed-from", "all",
               "--filter", "item.d is defined", "--quiet")
    assert both.exit_code == 0 and project.summary("b")["rerun_items"] == 2


def test_selection_mistakes_are_clear(project, cli):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"d": 1}, {"d": 2}])
    missing = cli("run", str(path), "--input", str(source), "--item", "7")
    assert missing.exit_code == 2 and missing.stderr.strip() == "--item 7: the input has 2 item(s)"
    broken = cli("run", str(path), "--input", str(source), "--filter", "item.nope > 1")
    assert broken.exit_code == 2 and broken.stderr.startswith("--filter 'item.nope > 1': ")
    nowhere = cli("run", str(path), "--input", str(source), "--failed-from", "gone")
    assert nowhere.exit_code == 2 and nowhere.stderr.strip() == "gone: no such run folder"


def test_a_rerun_into_its_own_parent_folder_is_refused_and_the_parent_kept(project, cli):
    """`--failed-from all --out all` would write the rerun's results over those it reads."""
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"d": 1}, {"d": 0}])
    cli("run", str(path), "--input", str(source), "--out", "all", "--quiet")
    again = cli("run", str(path), "--input", str(source), "--out", "all", "--failed-from", "all")
    assert again.exit_code == 2
    assert again.stderr.strip() == ("--out all: that is the --failed-from run, whose results the rerun reads "
                                    "while it writes its own; choose another --out (the rerun holds every item)")
    assert indexes(project, "all") == [1, 2]


REVERSED = """
    version: 1
    name: rev
    params: {threshold: 0.5}
    steps: [{id: s, uses: compute, with: {ok: "{{ item.score >= params.threshold }}"}}]
    output:
      index: "{{ item.id }}"
      verdict: "{{ 'PASS' if steps.s.ok else 'FAIL' }}"
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    """


def test_failed_from_reruns_the_failed_item_whatever_its_output_index(project, cli):
    """Issue 50, R1: records numbered in reverse by the output's `index`; the item at input
    position 2 (index 3) fails. --failed-from reruns that item, not input position 3."""
    path = project.pipeline(REVERSED)
    source = write_json(project.root / "in.json", [{"id": 4, "score": 0.9}, {"id": 3, "score": 0.2},
                                                    {"id": 2, "score": 0.7}, {"id": 1, "score": 0.8}])
    assert cli("run", str(path), "--input", str(source), "--out", "all", "--quiet").exit_code == 0
    assert {r["index"]: r["verdict"] for r in project.results("all")} == {1: "PASS", 2: "PASS", 3: "FAIL", 4: "PASS"}
    again = cli("run", str(path), "--input", str(source), "--out", "again", "--failed-from", "all", "--quiet",
                "--set", "params.threshold=0.1")
    assert again.exit_code == 0, again.output
    assert {r["index"]: r["verdict"] for r in project.results("again")} == dict.fromkeys((1, 2, 3, 4), "PASS")
    assert project.summary("again")["rerun_items"] == 1
