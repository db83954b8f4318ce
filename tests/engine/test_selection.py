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


def test_a_selection_that_keeps_nothing_fails_and_an_empty_input_says_so(project, cli):
    """`--filter "item.d == '2'"` (a number compared with text) kept none of 2 items: the run
    said `0 of 2 item(s), partial; errors: 0` and exited 0, as a CI job's green."""
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"d": 1}, {"d": 2}])
    kept_none = cli("run", str(path), "--input", str(source), "--out", "none", "--filter", "item.d == '2'")
    assert kept_none.exit_code == 3 and ("run failed: the selection (--item, --filter, --limit) kept none of the "
                                         "input's 2 item(s), so nothing was judged (exit code 3)") in kept_none.stderr
    (project.root / "empty.json").write_text("[]")
    empty = cli("run", str(path), "--input", "empty.json", "--out", "empty")
    assert empty.exit_code == 0 and "warning: the input has no item: nothing was judged" in empty.stderr
    assert project.summary("empty")["run_warnings"] == ["the input has no item: nothing was judged"]


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
    models: {m: {model: scripted/m}}
    steps: [{id: s, uses: llm, with: {model: m, prompt: "Score {{ item.score }}"}}]
    output:
      index: "{{ item.id }}"
      verdict: "{{ steps.s.raw }}"
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    """


def test_failed_from_reruns_the_failed_item_whatever_its_output_index(project, scripted_llm, cli):
    """Issue 50, R1: records numbered in reverse by the output's `index`; the item at input
    position 2 (index 3) fails. --failed-from reruns that item, not input position 3."""
    verdicts = {"Score 0.9": "PASS", "Score 0.2": "FAIL", "Score 0.7": "PASS", "Score 0.8": "PASS"}
    scripted_llm.script(lambda prompt, body: verdicts[prompt])
    path = project.pipeline(REVERSED)
    source = write_json(project.root / "in.json", [{"id": 4, "score": 0.9}, {"id": 3, "score": 0.2},
                                                    {"id": 2, "score": 0.7}, {"id": 1, "score": 0.8}])
    assert cli("run", str(path), "--input", str(source), "--out", "all", "--quiet").exit_code == 0
    assert {r["index"]: r["verdict"] for r in project.results("all")} == {1: "PASS", 2: "PASS", 3: "FAIL", 4: "PASS"}
    verdicts["Score 0.2"] = "PASS"          # the model answers otherwise now: the call is sent again
    scripted_llm.reset()
    scripted_llm.script(lambda prompt, body: verdicts[prompt])
    again = cli("run", str(path), "--input", str(source), "--out", "again", "--failed-from", "all", "--quiet",
                "--no-cache")
    assert again.exit_code == 0, again.output
    assert [call.prompt for call in scripted_llm.calls()] == ["Score 0.2"]
    assert {r["index"]: r["verdict"] for r in project.results("again")} == dict.fromkeys((1, 2, 3, 4), "PASS")
    assert project.summary("again")["rerun_items"] == 1


def test_a_rerun_of_a_run_judged_otherwise_is_refused_naming_what_differs(project, scripted_llm, cli):
    """Other params (or prompts, schemas, steps) than the --failed-from run's: its results for the
    items not redone were judged otherwise, and a merged run would hold both (a tightened
    threshold kept a PASS the new one fails). How the items are reached (concurrency, a model's
    timeout) and the summary (the pass rule) change no result: those reruns keep the parent's."""
    scripted_llm.script(lambda prompt, body: "PASS" if "0.9" in prompt else "FAIL")
    path = project.pipeline(REVERSED.replace('prompt: "Score', 'prompt: "{{ params.style }} Score')
                            .replace("name: rev", "name: rev\n    params: {style: plain}"))
    source = write_json(project.root / "in.json", [{"id": 1, "score": 0.9}, {"id": 2, "score": 0.2}])
    cli("run", str(path), "--input", str(source), "--out", "all", "--quiet")
    for out in ("again", "all"):            # into its own folder too: refused before anything is written
        again = cli("run", str(path), "--input", str(source), "--out", out, "--failed-from", "all",
                    "--set", "params.style=terse")
        assert again.exit_code == 2 and again.stderr.strip() == (
            "--failed-from all: that run judged its items otherwise (params.style), so its results cannot stand "
            "beside this run's; run without --failed-from to judge every item this way (calls that did not "
            "change come from the LLM cache)")
    assert not (project.root / "again").exists() and indexes(project, "all") == [1, 2]
    assert not scripted_llm.calls(contains="terse")
    neutral = cli("run", str(path), "--input", str(source), "--out", "neutral", "--failed-from", "all", "--quiet",
                  "--set", "concurrency=2", "--set", "models.m.timeout=30")
    assert neutral.exit_code == 0 and project.summary("neutral")["rerun_items"] == 1, neutral.output
    project.pipeline(path.read_text().replace("rates:", "pass_when: \"result.verdict != 'X'\"\n  rates:"))
    same = cli("run", str(path), "--input", str(source), "--out", "same", "--failed-from", "all", "--quiet")
    assert same.exit_code == 0 and project.summary("same")["rerun_items"] == 0


INTERRUPTED = """
    version: 1
    name: t
    concurrency: 1
    models: {m: {model: scripted/m}}
    steps: [{id: a, uses: llm, with: {model: m, prompt: "Item {{ item.n }}"}}]
    output: {verdict: "{{ steps.a.raw }}"}
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    """


def test_a_rerun_of_an_interrupted_run_judges_what_it_never_did_and_its_failures(project, scripted_llm, cli):
    """--failed-from a run Ctrl-C stopped over its whole input: the items it never judged are
    judged too (before, only its failures were, and --fail-under passed on the few it had)."""
    import signal

    from helpers import run
    interrupt = [True]

    def answer(prompt: str, body: dict) -> str:
        if prompt == "Item 4" and interrupt:
            interrupt.clear()
            signal.raise_signal(signal.SIGINT)
        return "FAIL" if prompt == "Item 2" else "PASS"
    scripted_llm.script(answer)
    path = project.pipeline(INTERRUPTED)
    source = write_json(project.root / "in.json", [{"n": n} for n in range(1, 9)])
    first = run(path, source, out="first")
    judged = indexes(project, "first")
    assert first.interrupted and 2 <= len(judged) < 8
    again = cli("run", str(path), "--input", str(source), "--out", "again", "--failed-from", "first",
                "--fail-under", "0.9")
    assert indexes(project, "again") == list(range(1, 9))
    summary = project.summary("again")
    assert (summary["partial"], summary.get("interrupted", False), summary["planned"]) == (False, False, 8)
    assert summary["rerun_items"] == 8 - len(judged) + 1          # the never judged, and item 2
    assert again.exit_code == 1 and again.stdout.startswith("8 item(s), ")     # 7 of 8 pass: under 0.9
    narrowed = cli("run", str(path), "--input", str(source), "--out", "narrowed", "--failed-from", "first",
                   "--filter", "item.n <= 6", "--quiet")
    assert narrowed.exit_code == 0, narrowed.output
    assert indexes(project, "narrowed") == list(range(1, 7))
    assert (project.summary("narrowed")["partial"], project.summary("narrowed")["planned"]) == (True, 6)


def test_a_rerun_of_an_interrupted_run_judges_the_unjudged_twin_of_a_judged_item(project, scripted_llm, cli):
    """(hunt) Items 1 and 5 are the same record: item 1 was judged before the stop, so item 5
    counted as judged too, the rerun left it out, and its run (4 of 5, `latest`) said complete."""
    import signal

    from helpers import run
    interrupt = [True]

    def answer(prompt: str, body: dict) -> str:
        if prompt == "Item 3" and interrupt:
            interrupt.clear()
            signal.raise_signal(signal.SIGINT)
        return "PASS"
    scripted_llm.script(answer)
    path = project.pipeline(INTERRUPTED)
    source = write_json(project.root / "in.json", [{"n": n} for n in (1, 2, 3, 4, 1)])
    assert run(path, source, out="first").interrupted and 5 not in indexes(project, "first")
    assert cli("run", str(path), "--input", str(source), "--out", "again", "--failed-from", "first",
               "--quiet").exit_code == 0
    assert indexes(project, "again") == [1, 2, 3, 4, 5] and project.summary("again")["total"] == 5


def test_a_rerun_keeps_the_parents_result_an_output_numbered_like_the_one_redone(project, scripted_llm, cli):
    """(hunt) An output `index` gave two items the number 2; the rerun of the failed one dropped
    the other's result (3 of 4 items, said complete)."""
    scripted_llm.script(lambda prompt, body: "FAIL" if "flaky" in prompt else "PASS")
    path = project.pipeline(INTERRUPTED.replace("    concurrency: 1\n", "").replace(
        'prompt: "Item {{ item.n }}"', 'prompt: "Item {{ item.t }}"').replace(
        'output: {verdict: "{{ steps.a.raw }}"}', 'output: {index: "{{ item.id }}", verdict: "{{ steps.a.raw }}"}'))
    source = write_json(project.root / "in.json", [{"id": 1, "t": "a"}, {"id": 2, "t": "flaky b"},
                                                   {"id": 2, "t": "c"}, {"id": 3, "t": "d"}])
    first = cli("run", str(path), "--input", str(source), "--out", "first", "--quiet")
    assert first.exit_code == 0, first.output
    scripted_llm.reset()
    scripted_llm.script(lambda prompt, body: "PASS")
    assert cli("run", str(path), "--input", str(source), "--out", "again", "--failed-from", "first",
               "--no-cache", "--quiet").exit_code == 0
    assert sorted((r["index"], r["verdict"]) for r in project.results("again")) == [
        (1, "PASS"), (2, "PASS"), (2, "PASS"), (3, "PASS")]


def test_a_change_run_json_shows_redacted_is_seen_by_its_keyed_digest(project, cli):
    """`params.keyword` reads as a secret's name, so run.json shows `<redacted>` for any value: a
    rerun with another keyword merged results judged two ways. run.json keeps a digest of each
    part of what judged the items, keyed by the cache folder's run-key (its owner's alone)."""
    path = project.pipeline("""
        version: 1
        name: kw
        params: {keyword: apple}
        steps: [{id: s, uses: compute, with: {ok: "{{ params.keyword in item.text }}"}}]
        output: {verdict: "{{ 'PASS' if steps.s.ok else 'FAIL' }}"}
        summary: {count_by: verdict, rates: {pass_rate: "result.verdict == 'PASS'"}}
        """)
    source = write_json(project.root / "in.json", [{"text": "an apple"}, {"text": "a banana"}])
    assert cli("run", str(path), "--input", str(source), "--out", "o", "--quiet").exit_code == 0
    written = (project.root / "o" / "run.json").read_text()
    assert '"keyword": "<redacted>"' in written and "apple" not in written
    again = cli("run", str(path), "--input", str(source), "--out", "o2", "--failed-from", "o",
                "--set", "params.keyword=banana")
    assert again.exit_code == 2 and "judged its items otherwise (params.keyword)" in again.stderr, again.output
    key = project.root / "cache" / "run-key"
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    same = cli("run", str(path), "--input", str(source), "--out", "o3", "--failed-from", "o", "--quiet")
    assert same.exit_code == 0 and project.summary("o3")["rerun_items"] == 1
