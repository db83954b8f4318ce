"""`runner view` over HTTP: runs page, run page, item page, reviews, confinement, escaping."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from helpers import VERDICTS, run, write_json
from runner.errors import RunnerError
from runner.view.app import create_app
from runner.view.run_list import list_runs, run_folder

TOKEN = "secret-token"


def client(reports: Path) -> TestClient:
    return TestClient(create_app(reports, token=TOKEN), base_url="http://127.0.0.1")


def listing(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")
            if ".runner-view" not in p.parts and p.name != "reviews.sqlite" and not p.name.startswith("reviews.sqlite")}


def test_pages_escape_values_and_browsing_changes_no_run(reports):
    before = listing(reports)
    web = client(reports)
    [entry] = list_runs(reports)
    home = web.get("/")
    assert home.status_code == 200 and entry.path in home.text
    page = web.get(f"/run/{entry.path}")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text
    item = web.get(f"/run/{entry.path}/item/1")
    assert item.status_code == 200 and "<script>alert(1)</script>" not in item.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in item.text
    assert web.get(f"/run/{entry.path}/item/99").status_code == 404
    assert listing(reports) == before


def test_a_results_line_nested_too_deeply_or_with_a_huge_number_is_its_items_error(reports):
    """A damaged results.jsonl: such a line was a 500 (RecursionError) when the page was built."""
    results = reports / "t" / "r1" / "results.jsonl"
    lines = results.read_text().splitlines()
    lines[1] = "[" * 5000 + "]" * 5000
    lines[2] = '{"index": 3, "n": ' + "9" * 5000 + "}"
    results.write_text("\n".join(lines) + "\n")
    web = client(reports)
    assert web.get("/run/t/r1").status_code == 200
    assert "results.jsonl:2: JSON nested too deeply" in web.get("/run/t/r1/item/2").text
    assert "results.jsonl:3: a number of more than 4300 digits" in web.get("/run/t/r1/item/3").text


@pytest.mark.parametrize("bad", ["%2e%2e/%2e%2e", "/etc", "..%2f..%2fetc", "t/%2e%2e/%2e%2e"])
def test_paths_outside_reports_are_not_found(reports, bad):
    answer = client(reports).get(f"/run/{bad}")
    assert answer.status_code == 404
    assert "root:" not in answer.text


@pytest.mark.parametrize("bad", ["..", "t/../..", "/etc", "t/./r1", ""])
def test_run_folder_refuses_dot_segments_and_absolute_paths(reports, bad):
    with pytest.raises(RunnerError):
        run_folder(reports, bad)


def _call_line(item: int, prompt: str, answer: str) -> str:
    return json.dumps({"item": item, "call": f"{item}.1", "step": "ask", "model": "m", "model_id": "openai/m1",
                       "messages": [{"role": "user", "content": prompt}], "answer": answer, "cached": False,
                       "attempts": 1, "latency_ms": 5, "error": None}) + "\n"


def test_an_items_page_shows_its_calls_from_calls_jsonl(reports):
    [entry] = list_runs(reports)
    (reports / entry.path / "calls.jsonl").write_text(
        _call_line(2, "Is <b>plain</b> right?", '{"verdict": "yes"}') + _call_line(3, "other item", "no"))
    page = client(reports).get(f"/run/{entry.path}/item/2")
    assert page.status_code == 200
    assert "Is &lt;b&gt;plain&lt;/b&gt; right?" in page.text and "{&#34;verdict&#34;: &#34;yes&#34;}" in page.text
    assert "call 2.1: item 2, step ask, model m (openai/m1)" in page.text and "other item" not in page.text


def test_a_calls_file_that_is_a_link_is_not_followed(reports, tmp_path):
    [entry] = list_runs(reports)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(_call_line(2, "from outside the run folder", "secret"))
    (reports / entry.path / "calls.jsonl").symlink_to(outside)
    page = client(reports).get(f"/run/{entry.path}/item/2")
    assert page.status_code == 200 and "from outside the run folder" not in page.text


def test_a_symlink_out_of_reports_is_not_served(reports, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    [entry] = list_runs(reports)
    for name in os.listdir(reports / entry.path):
        source = reports / entry.path / name
        if source.is_file():
            (outside / name).write_bytes(source.read_bytes())
    (reports / "escape").symlink_to(outside)
    assert client(reports).get("/run/escape").status_code == 404


def test_foreign_host_is_refused(reports):
    web = TestClient(create_app(reports, token=TOKEN), base_url="http://evil.example")
    assert web.get("/").status_code == 400


def test_review_needs_the_token_and_json_and_replaces_per_reviewer(reports):
    web = client(reports)
    [entry] = list_runs(reports)
    body = {"run": entry.path, "index": 2, "agrees": False, "correct": "no", "reviewer": "ann"}
    assert web.post("/api/review", json=body).status_code == 403
    assert web.post("/api/review", json=body, headers={"X-Runner-Token": "wrong"}).status_code == 403
    assert web.post("/api/review", content=json.dumps(body), headers={"X-Runner-Token": TOKEN,
                                                                      "Content-Type": "text/plain"}).status_code == 415
    saved = web.post("/api/review", json=body, headers={"X-Runner-Token": TOKEN})
    assert saved.status_code == 200 and saved.json()["saved"] is True
    again = web.post("/api/review", json={**body, "agrees": True, "correct": None},
                     headers={"X-Runner-Token": TOKEN})
    assert again.status_code == 200
    import sqlite3
    with sqlite3.connect(reports / "reviews.sqlite") as db:
        rows = db.execute("select reviewer, agrees from reviews").fetchall()
    assert rows == [("ann", 1)]


def review(web: TestClient, run_path: str, index: int, agrees: bool, reviewer: str = "ann",
           correct: str | None = None) -> dict:
    answer = web.post("/api/review", json={"run": run_path, "index": index, "agrees": agrees, "reviewer": reviewer,
                                           "correct": correct}, headers={"X-Runner-Token": TOKEN})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_review_follows_the_item_into_a_new_run(project, reports):
    web = client(reports)
    review(web, "t/r1", 2, False, reviewer="bob", correct="no")
    items = write_json(project.root / "moved.json", [{"n": 9, "claim": "new"}, {"n": 2, "claim": "plain"}])
    run(project.root / "pipelines" / "p.yaml", items, out=reports / "t" / "r2")
    page = web.get("/run/t/r2/item/2")
    assert page.status_code == 200 and "bob" in page.text
    assert "bob" not in web.get("/run/t/r2/item/1").text


def test_concurrent_reviewers_lose_nothing(reports):
    from concurrent.futures import ThreadPoolExecutor
    web = client(reports)
    names = [f"reviewer{n}" for n in range(24)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: review(web, "t/r1", 1 + len(name) % 3, True, reviewer=name), names))
    import sqlite3
    with sqlite3.connect(reports / "reviews.sqlite") as db:
        stored = {row[0] for row in db.execute("select reviewer from reviews")}
    assert stored == set(names)


def test_exported_labels_and_the_review_store_both_score_the_reviewed_items(reports, tmp_path):
    from typer.testing import CliRunner

    from runner.cli.app import app
    web = client(reports)
    review(web, "t/r1", 1, True)
    review(web, "t/r1", 2, False, correct="no")
    review(web, "t/r1", 3, True)
    labels = tmp_path / "labels.jsonl"
    exported = CliRunner().invoke(app, ["labels", "export", str(reports), "--pipeline", "t", "--out", str(labels)])
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert sorted(row["label"] for row in rows) == ["no", "no", "yes"]
    for source in (labels, reports / "reviews.sqlite"):
        scored = CliRunner().invoke(app, ["eval", str(reports / "t" / "r1"), "--labels", str(source),
                                          "--key", "item_key", "--truth", "label"])
        assert scored.exit_code == 0, scored.output
        report = json.loads((reports / "t" / "r1" / "eval.json").read_text())
        assert report["scored"] == 3 and report["metrics"]["accuracy"] == pytest.approx(2 / 3, abs=1e-3)


def shown_items(page: str) -> list[int]:
    import re
    return [int(n) for n in re.findall(r'<tr data-index="(\d+)"', page)]


def test_the_run_page_filters_searches_and_sorts(reports):
    web = client(reports)
    assert shown_items(web.get("/run/t/r1").text) == [1, 2, 3]
    assert shown_items(web.get("/run/t/r1?verdict=yes").text) == [2, 3]
    assert shown_items(web.get("/run/t/r1?verdict=no").text) == [1]
    assert shown_items(web.get("/run/t/r1?field=claim&value=plain").text) == [2]
    assert shown_items(web.get("/run/t/r1?q=other").text) == [3]
    assert shown_items(web.get("/run/t/r1?errors=1").text) == []
    assert shown_items(web.get("/run/t/r1?sort=index&desc=1").text) == [3, 2, 1]


def test_compare_shows_the_diff_and_refuses_other_inputs_unless_forced(project, reports):
    web = client(reports)
    pipeline = project.root / "pipelines" / "p.yaml"
    run(pipeline, project.root / "in.json", out=reports / "t" / "same")
    run(pipeline, write_json(project.root / "other.json", [{"n": 1, "claim": "x"}]), out=reports / "t" / "other")
    same = web.get("/compare?run=t/r1&run=t/same")
    assert same.status_code == 200 and "<script>alert(1)</script>" not in same.text
    assert "0 item(s) changed" in same.text and "compare anyway" not in same.text
    refused = web.get("/compare?run=t/r1&run=t/other")
    forced = web.get("/compare?run=t/r1&run=t/other&force=1")
    assert refused.status_code == 200 and forced.status_code == 200
    assert "compare anyway" in refused.text and "item(s) changed" not in refused.text
    assert "compare anyway" not in forced.text and "item(s) changed" in forced.text
    assert web.get("/compare?run=t/r1").status_code == 400


# ---- issue 50: a view that answers 4xx, never 500, and shows what the runs say ----------------

def lenient(reports: Path, allowed: list[str] | None = None) -> TestClient:
    """A client that sees a server error as the browser would (a 500), not as an exception."""
    return TestClient(create_app(reports, allowed, token=TOKEN), base_url="http://127.0.0.1",
                      raise_server_exceptions=False)


def test_every_results_line_is_listed_and_reviewable_when_two_share_an_index(project):
    """Issue 50, V1: records numbered by the output's `index`; the item without an id keeps its
    position, which another record's id also names. Both results are listed, open and reviewed."""
    path = project.pipeline("""
        version: 1
        name: ids
        steps: [{id: c, uses: compute, with: {claim: "{{ item.claim }}"}}]
        output:
          index: "{{ item.id }}"
          claim: "{{ steps.c.claim }}"
        summary: {count_by: claim}
        """)
    items = write_json(project.root / "in.json", [{"id": 4, "claim": "four"}, {"claim": "lost"},
                                                   {"id": 2, "claim": "two"}, {"id": 1, "claim": "one"}])
    reports = project.root / "reports"
    run(path, items, out=reports / "ids" / "r1")
    results = project.results("reports/ids/r1")
    assert sorted(r["index"] for r in results) == [1, 2, 2, 4]          # one index, twice
    web = client(reports)
    page = web.get("/run/ids/r1").text
    links = re.findall(r'<td class="num"><a href="(/run/ids/r1/item/[^"]+)">', page)
    assert len(links) == 4 and len(set(links)) == 4
    shown = {}
    for link in links:
        item = web.get(link.replace("&amp;", "&"))
        assert item.status_code == 200
        shown[link] = re.search(r'id="result">(.*?)</pre>', item.text, re.S).group(1)
    assert sorted("lost" in text or "two" in text for text in shown.values()) == [False, False, True, True]
    for result in results:
        line = 1 + results.index(result)
        saved = web.post("/api/review", json={"run": "ids/r1", "index": result["index"], "line": line,
                                              "agrees": True, "reviewer": "ann"}, headers={"X-Runner-Token": TOKEN})
        assert saved.status_code == 200, saved.text
        assert saved.json()["review"]["item_key"] == result["item_key"]
    import sqlite3
    with sqlite3.connect(reports / "reviews.sqlite") as db:
        assert db.execute("select count(distinct item_key) from reviews").fetchone() == (4,)


@pytest.mark.parametrize("path", [
    "/run/t/r1?page=%C2%B2", "/run/t/r1?page=" + "9" * 5000, "/run/t/r1?q=a%00b", "/run/t/r1?q=%22%00%22",
    "/run/t/r1/item/" + "1" * 23, "/run/t/r1/item/" + "1" * 23 + "?line=" + "2" * 30, "/run/t/r1/item/1?line=x",
    "/run/t/r1?verdict=a%00b", "/run/t/r1?field=claim%00&value=x", "/run/t/r1?field=claim&value=%00",
    "/run/t/r1?sort=field:a%00", "/run/t/r1?sort=%00", "/compare?run=t/r1&run=t/%00", "/run/%00",
    "/run/t/r1?page=-3", "/run/t/r1?desc=%00&errors=%00"])
def test_odd_requests_are_answered_4xx_or_clamped_never_500(reports, path):
    """Issue 50, V2."""
    answer = lenient(reports).get(path)
    assert answer.status_code in (200, 400, 404), (answer.status_code, answer.text[:300])


def test_an_escaped_lone_surrogate_in_a_result_is_shown_replaced(reports):
    """Issue 50, V2: a results line holding `\\ud800` (valid JSON, not valid UTF-8 text)."""
    results = reports / "t" / "r1" / "results.jsonl"
    results.write_text(results.read_text() + '{"index": 4, "claim": "lone \\ud800 here", "verdict": "no"}\n')
    web = lenient(reports)
    assert web.get("/run/t/r1").status_code == 200
    item = web.get("/run/t/r1/item/4")
    assert item.status_code == 200 and "lone \ufffd here" in item.text
    assert web.get("/run/t/r1?q=lone").status_code == 200


def test_a_non_loopback_bind_takes_only_the_machines_names_and_allow_host(reports):
    """Issue 50, V3: served on 0.0.0.0, a request naming another host (a DNS-rebinding page)
    is refused, reads and reviews alike; the machine's names and --allow-host are taken."""
    import socket

    from runner.view.app import allowed_hosts
    hosts = allowed_hosts("0.0.0.0", ["judge.example"])
    assert "*" not in hosts and {"localhost", "127.0.0.1", socket.gethostname(), "judge.example"} <= set(hosts)
    app = create_app(reports, hosts, token=TOKEN)
    review = {"run": "t/r1", "index": 1, "agrees": True, "reviewer": "evil"}
    evil = TestClient(app, base_url="http://evil.example:8765")
    assert evil.get("/").status_code == 400 and evil.get("/run/t/r1").status_code == 400
    assert evil.post("/api/review", json=review, headers={"X-Runner-Token": TOKEN}).status_code == 400
    for name in (socket.gethostname(), "judge.example", "127.0.0.1"):
        assert TestClient(app, base_url=f"http://{name}:8765").get("/").status_code == 200
    assert not (reports / "reviews.sqlite").exists()


def badges(page: str) -> dict[int, str]:
    return {int(n): kind for n, kind in re.findall(r'<tr data-index="(\d+)"[^>]*>.*?<span class="badge (\w+)"',
                                                    page, re.S)}


def test_verdict_badges_are_coloured_by_the_pipelines_pass_rule_as_report_html(project):
    """Issue 50, V4: A passes (the first rate) and is green, B does not and is amber (a verdict
    with no word of failure in it), as report.html colours them; a verdict that fails the rule
    and says so (INVALID) is red."""
    path = project.pipeline(VERDICTS)              # A passes: its first rate
    reports = project.root / "reports"
    source = write_json(project.root / "in.json", [{"v": "A"}, {"v": "B"}, {"v": "A"}, {"v": "INVALID"}])
    run(path, source, out=reports / "c" / "r1")
    web = client(reports)
    assert badges(web.get("/run/c/r1").text) == {1: "pass", 2: "warn", 3: "pass", 4: "fail"}
    assert 'class="badge pass" id="verdict"' in web.get("/run/c/r1/item/1").text
    report = (reports / "c" / "r1" / "report.html").read_text()
    for verdict, status in (("A", "pass"), ("B", "warn"), ("INVALID", "fail")):
        assert f'<span class="badge {status}">{verdict}</span>' in report


@pytest.mark.parametrize("fields, summary, shown, hidden", [
    ('rationale: "rationale of {{ item.v }}", why: "why of {{ item.v }}"', "", "rationale of", "why of"),
    ('rationale: "rationale of {{ item.v }}", why: "why of {{ item.v }}"', "summary: {reason_field: why}\n",
     "why of", "rationale of"),
    ('rationale: "first of {{ item.v }}", reason: "second of {{ item.v }}"', "", "first of", "second of")],
    ids=["a rationale", "reason_field", "the first of two"])
def test_the_run_page_shows_the_reason_the_report_shows(project, fields, summary, shown, hidden):
    """The list read only a field named `reason` where report.md and report.html read the
    pipeline's `summary.reason_field`, else the first field named like a reason in the results'
    own order: one result, two reasons."""
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: s, uses: compute, with: {v: "{{ item.v }}"}}]
        output: {verdict: "{{ steps.s.v }}", FIELDS}
        """.replace("FIELDS", fields) + summary)
    reports = project.root / "reports"
    run(path, write_json(project.root / "in.json", [{"v": "A"}, {"v": "B"}]), out=reports / "c" / "r1")
    page = client(reports).get("/run/c/r1").text
    assert f"{shown} A" in page and f"{shown} B" in page and f"{hidden} A" not in page
    assert f"{shown} A" in (reports / "c" / "r1" / "report.md").read_text()


def test_review_controls_are_text_and_svg_never_emoji_only(reports):
    """Issue 50, V4: without an emoji font a 👍 is a box."""
    web = client(reports)
    review(web, "t/r1", 1, True)
    review(web, "t/r1", 2, False, reviewer="bob", correct="no")
    for page in (web.get("/run/t/r1/item/1").text, web.get("/run/t/r1/item/2").text, web.get("/run/t/r1").text):
        assert not re.search("[\U0001F300-\U0001FAFF]", page)
    item = web.get("/run/t/r1/item/1").text
    assert re.search(r'<button class="up"[^>]*><svg[^>]*aria-hidden="true".*?</svg> right</button>', item, re.S)
    assert re.search(r'<button class="down"[^>]*><svg[^>]*aria-hidden="true".*?</svg> wrong</button>', item, re.S)


def test_a_run_whose_process_is_gone_is_listed_as_interrupted(reports):
    """Issue 50, V4: a run killed with SIGKILL leaves run.json `running`, results.jsonl and no
    summary.json. The runs page lists it as interrupted and opens it; one still running (its
    folder's lock held) is listed as running."""
    import shutil

    from runner.runs.lock import OutputFolder
    for name in ("killed", "live"):
        folder = reports / "t" / name
        shutil.copytree(reports / "t" / "r1", folder)
        for finished in ("summary.json", "report.md", "report.html"):
            (folder / finished).unlink()
        manifest = json.loads((folder / "run.json").read_text())
        manifest.update(status="running", ended_at=None)
        (folder / "run.json").write_text(json.dumps(manifest))
    killed = reports / "t" / "killed" / "results.jsonl"           # in finishing order, as a killed run leaves it
    killed.write_text("".join(reversed(killed.read_text().splitlines(keepends=True))))
    holder = OutputFolder(reports / "t" / "live").claim()
    try:
        web = client(reports)
        states = dict(re.findall(r'<tr data-run="([^"]+)" data-state="(\w+)">', web.get("/").text))
        assert states == {"t/r1": "finished", "t/killed": "interrupted", "t/live": "running"}
        page = web.get("/run/t/killed")
        assert page.status_code == 200 and "interrupted" in page.text and shown_items(page.text) == [1, 2, 3]
        assert web.get("/run/t/killed/item/2").status_code == 200
    finally:
        holder.release()


def test_compare_says_what_differs_as_runner_diff_does(project, reports, cli):
    """Issue 50, V4: a pipeline whose step changed: compare says which sections changed, in
    runner diff's words, not only `pipeline hash a -> b`."""
    path = project.root / "pipelines" / "p.yaml"
    path.write_text(path.read_text().replace("item.n > 1", "item.n > 2"))
    run(path, project.root / "in.json", out=reports / "t" / "r2")
    said = cli("diff", str(reports / "t" / "r1"), str(reports / "t" / "r2")).stdout.splitlines()
    overview = [line.strip() for line in said[2:said.index("1 item(s) changed:")]]     # after before: and after:
    assert any("steps changed" in line for line in overview) and any("counts by" in line for line in overview)
    page = html.unescape(client(reports).get("/compare?run=t/r1&run=t/r2").text)
    for line in overview:
        assert line in page


def test_a_review_that_contradicts_itself_is_refused(project):
    """Issue 62, finding 3: a thumbs-up labelled with another verdict, a thumbs-down labelled
    with the judged one, a label the pipeline never gives: 400 with the reason, nothing saved
    (so `runner labels export` can never see agrees and another label)."""
    path = project.pipeline("""
        version: 1
        name: yn
        steps: [{id: c, uses: compute, with: {n: "{{ item.n }}"}}]
        output: {verdict: "{{ 'yes' if steps.c.n > 1 else 'no' }}"}
        summary: {count_by: verdict}
        """)
    reports = project.root / "reports"
    run(path, write_json(project.root / "in.json", [{"n": 1}, {"n": 2}]), out=reports / "yn" / "r1")
    web = client(reports)
    for agrees, correct, reason in (
            (True, "no", "a thumbs-up says the verdict yes is right, and label 'no' says it is wrong"),
            (False, "yes", "a thumbs-down says the verdict yes is wrong, and label 'yes' is that verdict"),
            (False, "maybe", "label 'maybe' is not a verdict yn gives (its verdicts: yes, no)")):
        refused = web.post("/api/review", json={"run": "yn/r1", "index": 2, "agrees": agrees, "correct": correct},
                           headers={"X-Runner-Token": TOKEN})
        assert refused.status_code == 400 and reason in refused.json()["error"], refused.text
    assert review(web, "yn/r1", 2, False, correct="no")["review"]["correct"] == "no"
    assert review(web, "yn/r1", 2, True, correct="yes")["review"]["agrees"] is True


def test_61_one_pass_rule_for_summary_report_export_and_view_badges(project, cli):
    """Issue 61: one pass rule object (runner/engine/rates.py: PassRule). An item the rule is
    undefined on (n is null) is left out of the rate, fails report.html's rule, is a junit
    failure, and view's badge says fail as report.html does (view used to call it a pass)."""
    import runner.engine.selection as selection
    assert not any(hasattr(selection, name) for name in ("pass_rule", "item_rule", "summary_rule"))
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: s, uses: compute, with: {n: "{{ item.n | default(none) }}"}}]
        output: {n: "{{ steps.s.n }}"}
        summary:
          rates: {high: "result.n > 1"}
        """)
    reports = project.root / "reports"
    write_json(project.root / "in.json", [{"n": 2}, {}, {"n": 0}])
    cli("run", str(path), "--input", "in.json", "--out", str(reports / "c" / "r1"), "--format", "junit", "--quiet")
    summary = json.loads((reports / "c" / "r1" / "summary.json").read_text())
    assert summary["rates"]["high"]["left_out_by"] == {"undefined": 1}
    web = client(reports)
    report = (reports / "c" / "r1" / "report.html").read_text()
    assert badges(web.get("/run/c/r1").text) == {1: "pass", 2: "fail", 3: "fail"}
    assert re.findall(r'<span class="badge (\w+)">', report) == ["pass", "fail", "fail"]
    junit = (reports / "c" / "r1" / "junit.xml").read_text()
    assert junit.count("<failure") == 2


def test_61_a_review_of_a_traced_item_is_one_record_whoever_gives_it(reports, cli, monkeypatch):
    """Issue 61: one review record, made, kept and logged one way (runner/tracing/feedback.py:
    record_review; tests/test_architecture.py checks no other module makes one). The view's review of an item traced to MLflow, with no tracking server set,
    is kept and says why MLflow was not told in the words `runner feedback` warns with; the same
    review by `runner feedback` is the same row of the same store."""
    from dataclasses import replace

    from runner.stores.reviews import ReviewStore
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    results = reports / "t" / "r1" / "results.jsonl"
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    lines[1]["mlflow_trace_id"] = "tr-2"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    answer = review(client(reports), "t/r1", 2, False, correct="no")
    warning = "not logged to MLflow: set MLFLOW_TRACKING_URI to the server that holds trace tr-2"
    assert answer["mlflow"] is False and answer["warning"] == warning
    done = cli("feedback", "--store", str(reports), "--trace-id", "tr-2", "--down", "--label", "no", "--user", "ann",
               "--reports", str(reports))
    assert done.exit_code == 0 and done.stderr == f"warning: {warning}\n", done.output
    store = ReviewStore(reports / "reviews.sqlite", create=False)
    [row] = store.of_pipeline("t")
    store.close()
    assert replace(row, reviewed_at="").as_dict() == {**answer["review"], "reviewed_at": ""}
    assert (row.judged, row.correct, row.trace_id, row.run, row.item_index) == ("yes", "no", "tr-2", "t/r1", 2)


def test_hostile_reviews_and_a_results_line_of_another_index_type_answer_what_is_wrong(project, scripted_llm):
    """Each was a 500: a lone surrogate in a review (stored, or a run's name), an item whose
    results line names its index as text while its calls name the number; and a review of a run
    that does not exist was answered with an HTML page."""
    path = project.pipeline("""
        version: 1
        name: asked
        models: {m: {model: scripted/m}}
        steps: [{id: a, uses: llm, with: {model: m, prompt: "Item {{ item.n }}"}}]
        output: {verdict: "{{ steps.a.raw }}"}
        """)
    reports = project.root / "reports"
    run(path, write_json(project.root / "in.json", [{"n": 1}, {"n": 2}]), out=reports / "asked" / "r1")
    results = reports / "asked" / "r1" / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text(lines[0] + "\n" + lines[1].replace('"index": 2', '"index": "2"') + "\n")
    web = client(reports)
    assert web.get("/run/asked/r1/item/2").status_code == 200
    headers = {"X-Runner-Token": TOKEN, "Content-Type": "application/json"}
    lone = web.post("/api/review", headers=headers,
                    content='{"run": "asked/r1", "index": 1, "agrees": true, "reviewer": "\\ud800"}')
    assert lone.status_code == 200 and lone.json()["review"]["reviewer"] == "\ufffd", lone.text
    for body in ('{"run": "\\ud800", "index": 1, "agrees": true}', '{"run": "nope/r9", "index": 1, "agrees": true}'):
        missing = web.post("/api/review", headers=headers, content=body)
        assert missing.status_code == 404 and "error" in missing.json(), missing.text
    twice = web.post("/api/review", headers=headers, content='{"run": "asked/r1", "run": "x", "index": 1}')
    assert twice.status_code == 400 and "given twice" in twice.json()["error"]


def test_a_run_of_runner_aligns_folder_is_listed_with_its_align_link(project):
    """`runner align` keeps its runs at reports/PIPELINE/align/runs/RUN: one level deeper than the
    list looked, so its align.html link could only be typed."""
    path = project.pipeline(VERDICTS)
    reports = project.root / "reports"
    source = write_json(project.root / "in.json", [{"v": "A"}, {"v": "B"}])
    run(path, source, out=reports / "c" / "align" / "runs" / "aligned-test")
    (reports / "c" / "align" / "align.html").write_text("<html><body>align report</body></html>")
    web = client(reports)
    assert "c/align/runs/aligned-test" in web.get("/").text
    assert "align report" in web.get("/run/c/align/runs/aligned-test/align").text
