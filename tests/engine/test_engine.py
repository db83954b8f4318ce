"""The engine: if, on_error, decide/stop, compute, foreach, loop, explode, results order."""

from __future__ import annotations

import json
from unittest.mock import ANY

from helpers import run, write_json


def test_if_skips_and_decide_stops(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: gate
            uses: decide
            if: "item.n < 0"
            with: {rules: [{stop: true, verdict: NEGATIVE}]}
          - id: later
            uses: compute
            with: {double: "{{ item.n * 2 }}"}
        output:
          verdict: "{{ steps.gate.verdict if steps.gate else 'OK' }}"
          gate: "{{ steps.gate }}"
          skipped: "{{ steps.gate.skipped }}"
          double: "{{ steps.later.double | default(none) }}"
          ran_later: "{{ steps.later is not none }}"
        """)
    items = write_json(project.root / "in.json", [{"n": 2}, {"n": -1}])
    results = run(path, items).results
    # skipped: the empty value of its result (false in a condition); never reached after a stop: null
    assert results[0] == {"index": 1, "item_key": ANY, "verdict": "OK", "gate": {"verdict": None}, "skipped": True,
                          "double": 4, "ran_later": True}
    assert results[1] == {"index": 2, "item_key": ANY, "verdict": "NEGATIVE", "gate": {"verdict": "NEGATIVE"},
                          "skipped": False, "double": None, "ran_later": False}


def test_decide_first_match_wins(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: grade
            uses: decide
            with:
              rules:
                - {when: "item.score >= 80", rating: green}
                - {when: "item.score >= 50", rating: amber}
                - {rating: red}
        output: {rating: "{{ steps.grade.rating }}"}
        """)
    items = write_json(project.root / "in.json", [{"score": 80}, {"score": 79}, {"score": 50}, {"score": 49.9}])
    assert [r["rating"] for r in run(path, items).results] == ["green", "amber", "amber", "red"]


ON_ERROR = """
    version: 1
    name: t
    steps:
      - id: risky
        uses: compute
        on_error: {mode}
        {default}
        with: {{ratio: "{{{{ 10 / item.d }}}}"}}
      - id: after
        uses: compute
        with: {{ok: true}}
    output:
      risky: "{{{{ steps.risky }}}}"
      after: "{{{{ steps.after.ok | default(false) }}}}"
    """


def test_on_error_fail_ends_the_item_with_an_error(project):
    path = project.pipeline(ON_ERROR.format(mode="fail", default=""))
    items = write_json(project.root / "in.json", [{"d": 0}, {"d": 5}])
    bad, good = run(path, items).results
    assert bad["after"] is False and "risky" not in bad          # empty fields of a failed item are dropped
    assert bad["error"].startswith("step 'risky': pipelines/p.yaml:")
    assert "steps[0].with.ratio" in bad["error"] and "ZeroDivisionError" in bad["error"]
    assert good == {"index": 2, "item_key": ANY, "risky": {"ratio": 2.0}, "after": True}


def test_on_error_continue_yields_the_error_and_goes_on(project):
    path = project.pipeline(ON_ERROR.format(mode="continue", default=""))
    result = run(path, write_json(project.root / "in.json", [{"d": 0}])).results[0]
    assert result["after"] is True
    assert "ZeroDivisionError" in result["risky"]["error"]
    assert "error" not in result and len(result["warnings"]) == 1


def test_on_error_default_sees_the_error(project):
    path = project.pipeline(ON_ERROR.format(mode="default", default='default: {ratio: 0, note: "Judge error: {{ error }}"}'))
    result = run(path, write_json(project.root / "in.json", [{"d": 0}])).results[0]
    assert result["risky"]["ratio"] == 0
    assert result["risky"]["note"].startswith("Judge error: pipelines/p.yaml:")
    assert result["after"] is True


def test_compute_piecewise_formulas_and_values(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: adj
            uses: compute
            with:
              q: "{{ item.q }}"
              factor: "{{ [0.85, values.q + 0.15] | min if 0.6 <= values.q <= 0.8 else values.q }}"
              adjusted: "{{ (item.c * values.factor) | round(4) }}"
        output: {adjusted: "{{ steps.adj.adjusted }}"}
        """)
    items = write_json(project.root / "in.json", [{"q": 0.7, "c": 0.9}, {"q": 1.0, "c": 0.9}])
    assert [r["adjusted"] for r in run(path, items).results] == [0.765, 0.9]


def test_loop_sees_previous_iteration(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: grow
            uses: loop
            with:
              max: 5
              until: "steps.step.value >= 8"
              steps:
                - id: step
                  uses: compute
                  with:
                    value: "{{ (loop.previous.step.value * 2) if loop.previous else 1 }}"
                    index: "{{ loop.index }}"
        output:
          iterations: "{{ steps.grow.iterations }}"
          done: "{{ steps.grow.done }}"
          values: "{{ steps.grow.history | map(attribute='step') | map(attribute='value') | list }}"
        """)
    result = run(path, write_json(project.root / "in.json", [{}])).results[0]
    assert result == {"index": 1, "item_key": ANY, "iterations": 4, "done": True, "values": [1, 2, 4, 8]}


def test_loop_stops_at_max(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: l
            uses: loop
            with:
              max: 3
              until: "false"
              steps: [{id: s, uses: compute, with: {i: "{{ loop.index }}"}}]
        output: {l: "{{ steps.l.iterations }}", done: "{{ steps.l.done }}", last: "{{ steps.l.last.s.i }}"}
        """)
    assert run(path, write_json(project.root / "in.json", [{}])).results[0] == \
        {"index": 1, "item_key": ANY, "l": 3, "done": False, "last": 3}


def test_foreach_over_list_and_mapping(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: each
            uses: foreach
            with:
              items: "{{ item.xs }}"
              as: x
              steps: [{id: sq, uses: compute, with: {v: "{{ x * x }}", i: "{{ foreach.index }}"}}]
          - id: attrs
            uses: foreach
            with:
              items: "{{ item.attrs }}"
              as: attr
              steps: [{id: up, uses: compute, with: {v: "{{ attr.key | upper }}={{ attr.value }}"}}]
              output: "{{ steps.up.v }}"
        output:
          squares: "{{ steps.each | map(attribute='sq') | map(attribute='v') | list }}"
          attrs: "{{ steps.attrs }}"
        """)
    result = run(path, write_json(project.root / "in.json", [{"xs": [3, 1, 2], "attrs": {"a": 1, "b": 2}}])).results[0]
    assert result["squares"] == [9, 1, 4]
    assert result["attrs"] == ["A=1", "B=2"]


def test_explode_with_parent(project):
    path = project.pipeline("""
        version: 1
        name: t
        input: {adapter: json, explode: classifications, parent_as: batch}
        steps: [{id: s, uses: compute, with: {size: "{{ batch.size }}"}}]
        output:
          value: "{{ item.value }}"
          size: "{{ steps.s.size }}"
        """)
    data = [{"size": 3, "classifications": [{"value": "a"}, {"value": "b"}]},
            {"size": 5, "classifications": [{"value": "c"}]},
            {"size": 1}]
    results = run(path, write_json(project.root / "in.json", data)).results
    assert [(r["index"], r.get("value"), r.get("size")) for r in results[:3]] == [(1, "a", 3), (2, "b", 3), (3, "c", 5)]
    assert "field 'classifications' is missing or not a list" in results[3]["error"]


def test_a_bad_item_never_stops_the_others(project):
    path = project.pipeline("""
        version: 1
        name: t
        input: {adapter: jsonl}
        steps: [{id: s, uses: compute, with: {v: "{{ item.v * 2 }}"}}]
        output: {v: "{{ steps.s.v }}"}
        summary: {count_by: v}
        """)
    source = project.file("in.jsonl", '{"v": 1}\n{not json\n{"v": 3}\n{"w": 1}\n')
    outcome = run(path, source)
    results = outcome.results
    assert [r.get("v") for r in results] == [2, None, 6, None]
    assert "in.jsonl:2:2: not valid JSON" in results[1]["error"]
    assert "has no attribute 'v'" in results[3]["error"]
    assert outcome.summary["errors"] == 2 and outcome.summary["total"] == 4
    lines = (project.root / "out" / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [1, 2, 3, 4]


def test_summary_rates_fields_and_assessment(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: s, uses: compute, with: {v: "{{ item.v }}"}}]
        output: {verdict: "{{ steps.s.v }}", ok: "{{ steps.s.v == 'yes' }}"}
        summary:
          count_by: verdict
          rates: {ok_rate: "result.ok"}
          fields: {n_yes: "{{ counts.get('yes', 0) }}"}
          assessment:
            - {when: "total == 0", text: "nothing"}
            - {when: "ok_rate > 0.5", text: "mostly yes ({{ n_yes }}/{{ total }})"}
            - {text: "mostly no"}
        """)
    summary = run(path, write_json(project.root / "in.json", [{"v": "yes"}, {"v": "yes"}, {"v": "no"}])).summary
    assert summary["counts"] == {"yes": 2, "no": 1}
    assert summary["ok_rate"] == 0.6667 and summary["ok_rate_count"] == 2
    assert summary["assessment"] == "mostly yes (2/3)"
    report = (project.root / "out" / "report.md").read_text()
    assert "**Assessment:** mostly yes (2/3)" in report and "| 3 | no | no |" in report     # booleans read yes/no


def test_foreach_keeps_input_order_when_elements_finish_out_of_order(project, scripted_llm):
    from runner.testing import Reply
    for n in range(5):
        scripted_llm.script(Reply(f"answer {n}", delay=0.05 * (5 - n)), contains=f"element {n}")
    scripted_llm.gather = 5                 # the first answers wait for all five: reached however loaded the machine
    path = project.pipeline("""
        version: 1
        name: t
        models: {m: {model: scripted/m, limits: {concurrency: 5}}}
        steps:
          - id: each
            uses: foreach
            with:
              items: "{{ range(5) | list }}"
              as: n
              concurrency: 5
              steps: [{id: ask, uses: llm, with: {model: m, prompt: "element {{ n }}"}}]
              output: "{{ steps.ask.raw }}"
        output: {answers: "{{ steps.each }}"}
        """)
    result = run(path, write_json(project.root / "in.json", [{}])).results[0]
    assert result["answers"] == [f"answer {n}" for n in range(5)]
    finished = [r.prompt for r in sorted(scripted_llm.requests, key=lambda r: r.finished)]
    assert finished[0] == "element 4" and scripted_llm.peak_in_flight == 5


def test_memo_key_failure_is_an_item_error(project):
    path = project.pipeline("""
        version: 1
        name: t
        memo: {key: "{{ item.text | sha256 }}"}
        steps: [{id: s, uses: compute, with: {n: "{{ item.text | length }}"}}]
        output: {n: "{{ steps.s.n }}"}
        """)
    results = run(path, write_json(project.root / "in.json", [{"text": "abc"}, {"other": 1}])).results
    assert results[0] == {"index": 1, "item_key": ANY, "n": 3}
    assert results[1]["index"] == 2 and "memo.key" in results[1]["error"]
    again = run(path, write_json(project.root / "in.json", [{"text": "abc"}])).results
    assert again == [{"index": 1, "item_key": ANY, "n": 3, "memo_hit": True}]
    from runner.stores.memo import MemoStore
    store = MemoStore(project.root / "out" / "memo.json")
    assert [result for _, result in store.items()] == [{"n": 3}]


def test_html_report_escapes_and_matches_the_markdown(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: s, uses: compute, with: {v: "{{ item.v }}"}}]
        output: {v: "{{ steps.s.v }}"}
        summary: {count_by: v, assessment: [{text: "done <ok>"}]}
        """)
    run(path, write_json(project.root / "in.json", [{"v": "<b>bold</b> | pipe"}, {"v": "plain"}]))
    page = (project.root / "out" / "report.html").read_text()
    assert "&lt;b&gt;bold&lt;/b&gt; | pipe" in page and "<b>bold</b>" not in page
    assert "<strong>Assessment:</strong> done &lt;ok&gt;" in page
    markdown = (project.root / "out" / "report.md").read_text()
    # report.md carries no raw HTML either (issue 31 H16)
    assert "| 1 | &lt;b&gt;bold&lt;/b&gt; \\| pipe |" in markdown and "**Assessment:** done &lt;ok&gt;" in markdown


def test_a_missing_result_field_names_the_step_and_its_fields(project):
    path = project.pipeline("""
        version: 1
        name: t
        params: {key: verdict}
        steps:
          - {id: jury, uses: compute, with: {score: 3, reason: ok}}
        output:
          v: "{{ steps.jury[params.key] }}"
          w: "{{ item.x }}"
        """)
    (result,) = run(path, records=["y=1"]).results
    assert result["error"] == ("pipelines/p.yaml:7:6: output.v: undefined: step 'jury' has no field 'verdict' "
                               "(its fields: reason, score)")
    (other,) = run(project.pipeline(
        "version: 1\nname: t\nsteps: [{id: a, uses: compute, with: {v: 1}}]\noutput: {w: '{{ item.x }}'}\n",
        "q.yaml"), records=["y=1"]).results
    assert other["error"].endswith("undefined: 'dict object' has no attribute 'x' (its keys: y)")


def test_item_key_follows_content_not_position_or_run(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: c
            uses: compute
            with: {n: "{{ item.n }}"}
        output:
          n: "{{ steps.c.n }}"
        """)
    # read before the second run: results are a view over the run folder's results.jsonl
    first = list(run(path, write_json(project.root / "a.json", [{"n": 1}, {"n": 2}, {"n": 3}])).results)
    again = run(path, write_json(project.root / "b.json", [{"n": 3}, {"n": 1}, {"n": 4}])).results
    key = {r["n"]: r["item_key"] for r in first}
    moved = {r["n"]: r["item_key"] for r in again}
    assert moved[1] == key[1] and moved[3] == key[3]
    assert moved[4] not in key.values()
    assert len(set(key.values())) == 3
    assert all(isinstance(k, str) and len(k) == 16 for k in key.values())


def test_the_report_passes_items_by_the_rule_the_summary_read_once(project):
    """The summary's counts and the report's rows come from one pass: an item passes as the
    summary's reading of the pass-rule rate said; an item the rate's expression is undefined on
    is left out of the rate (and counted so) and fails the report's rule."""
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: s, uses: compute, with: {n: "{{ item.n | default(none) }}"}}]
        output: {n: "{{ steps.s.n }}"}
        summary:
          rates: {high: "result.n > 1"}
        """)
    outcome = run(path, write_json(project.root / "in.json", [{"n": 2}, {"n": 0}, {}, {"n": 3}, {"n": 1}]))
    assert outcome.summary["high"] == 0.5 and "summary_errors" not in outcome.summary
    high = outcome.summary["rates"]["high"]
    assert (high["numerator"], high["denominator"], high["left_out_by"]) == (2, 4, {"undefined": 1})
    assert "summary.rates.high" in high["undefined_because"]
    from runner.outputs.report_view import build_view
    expected = build_view(outcome.summary, outcome.results,
                          passed=lambda r: isinstance(r["n"], int) and r["n"] > 1)
    assert [(item.index, item.status) for item in expected.items] == \
        [(1, "pass"), (2, "fail"), (3, "fail"), (4, "pass"), (5, "fail")]
    page = (project.root / "out" / "report.html").read_text()
    from runner.outputs.report_html import render_html
    assert page == render_html(expected)


def test_ctrl_c_returns_the_outcome_marked_interrupted_with_what_finished_written(project, scripted_llm):
    """Ctrl-C in a Python caller's run: the outputs of what finished are written and the run
    returns its outcome saying so (no outcome in an exception's args); a caller that needs
    the whole run stops as Ctrl-C would."""
    import signal

    import pytest

    def answer(prompt: str, body: dict) -> str:
        if prompt == "Item 3":
            signal.raise_signal(signal.SIGINT)      # as a terminal's Ctrl-C: asyncio.run cancels the run
        return "done"
    scripted_llm.script(answer)
    path = project.pipeline("""
        version: 1
        name: t
        concurrency: 1
        models: {m: {model: scripted/m}}
        steps: [{id: a, uses: llm, with: {model: m, prompt: "Item {{ item.n }}"}}]
        output: {answer: "{{ steps.a.raw }}"}
        """)
    outcome = run(path, write_json(project.root / "in.json", [{"n": n} for n in range(1, 7)]))
    assert (outcome.interrupted, outcome.terminated) == (True, False)
    written = project.results("out")
    assert outcome.summary["interrupted"] is True and outcome.summary["total"] == len(written) and 2 <= len(written) < 6
    assert json.loads((project.root / "out" / "run.json").read_text())["status"] == "interrupted"
    with pytest.raises(KeyboardInterrupt):
        outcome.stop_if_interrupted()


def test_a_call_the_stop_cancels_in_flight_has_its_line_in_calls_jsonl(project, scripted_llm):
    """Ctrl-C while a call waited for its answer: the summary counted it as sent, and calls.jsonl
    had no line of it."""
    import signal

    from runner.testing import Reply
    scripted_llm.script(Reply("slow", delay=5.0), contains="Item 1")      # in flight when item 2 stops the run
    scripted_llm.script(lambda prompt, body: signal.raise_signal(signal.SIGINT) or "done", contains="Item 2")
    scripted_llm.script(Reply("never"), contains="Item 3")          # waits for a place: never sent, no line
    path = project.pipeline("""
        version: 1
        name: t
        concurrency: 3
        models: {m: {model: scripted/m, limits: {concurrency: 2}}}
        steps: [{id: a, uses: llm, with: {model: m, prompt: "Item {{ item.n }}"}}]
        output: {answer: "{{ steps.a.raw }}"}
        """)
    outcome = run(path, write_json(project.root / "in.json", [{"n": n} for n in range(1, 4)]))
    assert outcome.interrupted
    lines = [json.loads(line) for line in (project.root / "out" / "calls.jsonl").read_text().splitlines()]
    cancelled = [line for line in lines if (line["error"] or "").startswith("cancelled: ")]
    assert [line["item"] for line in cancelled] == [1], lines
    assert len(lines) == outcome.summary["models"]["m"]["calls"]        # every call counted has its line
