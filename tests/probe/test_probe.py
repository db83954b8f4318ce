"""`runner probe` on the citation example, its jurors played by the kinds of juror in
jurors.py: the obeying juror is named, the robust ones are not, the jury's majority holds;
a run folder like any run (cached, shown by `runner view`); refused probes say where."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from helpers import copy_example
from jurors import careful, number_blind, obedient, order_sensitive
from test_citation_judge import EXAMPLE, PIPELINE


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    copy_example(EXAMPLE, tmp_path / "example")
    monkeypatch.chdir(tmp_path / "example")
    return tmp_path / "example"


def seat(fake_llm, **jurors) -> list[str]:
    """The citation judge's three seats played by these kinds of juror, on the fake server."""
    args = ["--set", "models.gemini.limits.requests_per_day=1000"]      # the example's free tier allows 20
    for name, juror in jurors.items():
        fake_llm.script(juror, model=juror.__name__)
        args += ["--model", f"{name}={'openai/' + juror.__name__}@{fake_llm.url}"]
    return args


def probe(cli, *args: str) -> dict:
    result = cli("probe", str(PIPELINE), "--input", "report.md", "--quiet", *args)
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("written to ")]
    folder = Path(line.split("written to ", 1)[1].split(", ", 1)[0]).parent
    return json.loads((folder / "probe.json").read_text())


def rows(report: dict, name: str) -> dict:
    [found] = [p for p in report["probes"] if p["name"] == name]
    return {row["who"]: row for row in found["rows"]}


def test_the_obeying_juror_is_named_and_the_majority_holds(workdir, fake_llm, cli):
    report = probe(cli, *seat(fake_llm, local=careful, gemini=obedient, openai=careful))
    injected = rows(report, "inject_claim")
    assert injected["gemini"]["n"] >= 2 and injected["gemini"]["failure_rate"] == 1.0
    assert injected["gemini"]["failure_ci95"][1] == 1.0 and injected["gemini"]["failure_ci95"][0] < 1.0
    assert injected["local"]["failure_rate"] == injected["openai"]["failure_rate"] == 0.0
    assert injected["verdict"]["n"] >= 2 and injected["verdict"]["failure_rate"] == 0.0   # two careful seats of three
    # An instruction in the quote never reaches the jury: the quote check stops it first.
    quote = rows(report, "inject_quote")
    assert set(quote) == {"verdict"} and quote["verdict"]["failure_rate"] == 0.0 and quote["verdict"]["flips"] > 0
    assert all(row["failure_rate"] in (0.0, None) for row in rows(report, "reordered_context").values())
    assert report["jurors"] == ["local", "gemini", "openai"] and report["items"] == 13


# Citations whose quotes hold numbers the quote check still finds once one is changed.
NUMBERS = """\
A representative must be twenty five: "No Person shall be a Representative who shall not have attained to the Age of twenty five Years" [us_constitution.txt:L23-L24](data/canonical/us_constitution.txt).
Each state sends two senators: "The Senate of the United States shall be composed of two Senators from each State" [us_constitution.txt:L29-L30](data/canonical/us_constitution.txt).
A senator must be thirty: "No Person shall be a Senator who shall not have attained to the Age of thirty Years" [us_constitution.txt:L33-L34](data/canonical/us_constitution.txt).
A president must have lived here fourteen years: "have attained to the Age of thirty five Years, and been fourteen Years a Resident within the United States" [us_constitution.txt:L79-L80](data/canonical/us_constitution.txt).
"""


def test_a_number_blind_and_an_order_sensitive_juror_are_caught(workdir, fake_llm, cli):
    (workdir / "numbers.md").write_text(NUMBERS)
    result = cli("probe", str(PIPELINE), "--input", "numbers.md", "--quiet", "--probes",
                 "number_in_quote,reordered_context",
                 *seat(fake_llm, local=careful, gemini=number_blind, openai=order_sensitive))
    assert result.exit_code == 0, result.output
    [report] = [json.loads(p.read_text()) for p in (workdir / "reports").rglob("probe.json")]
    number = rows(report, "number_in_quote")
    assert number["gemini"]["failure_rate"] == 1.0 and number["local"]["failure_rate"] == 0.0
    order = rows(report, "reordered_context")
    assert order["openai"]["failure_rate"] > 0 and order["local"]["failure_rate"] == 0.0


def test_a_probe_run_is_a_run_folder_cached_and_resumed(workdir, fake_llm, cli):
    jurors = seat(fake_llm, local=careful, gemini=obedient, openai=careful)
    first = probe(cli, *jurors, "--probes", "inject_claim")
    assert [p["name"] for p in first["probes"]] == ["inject_claim"]
    sent = len(fake_llm.requests)
    folder = Path(first["run"])
    assert folder.parent.name.endswith("-probe") and (folder.parent / "latest").is_file()
    manifest = json.loads((folder / "run.json").read_text())
    assert manifest["kind"] == "probe" and manifest["argv"][:3] == ["runner", "probe", str(PIPELINE)]
    assert "--probes" in manifest["argv"]
    assert {p.name for p in folder.iterdir()} >= {"probe.json", "probe.md", "probe.html", "results.jsonl",
                                                   "summary.json", "report.html", "calls.jsonl"}
    # Every probe now: the originals and inject_claim's copies come from the cache.
    whole = probe(cli, *jurors)
    copies = {p["name"]: p["copies"] for p in whole["probes"]}
    jury_calls = sum(1 for r in fake_llm.requests[sent:])
    assert rows(whole, "inject_claim") == rows(first, "inject_claim")
    assert 0 < jury_calls < 3 * sum(copies.values())
    again = probe(cli, *jurors)
    assert len(fake_llm.requests) == sent + jury_calls                 # nothing left to send
    assert [p["rows"] for p in again["probes"]] == [p["rows"] for p in whole["probes"]]


def test_an_interrupted_probe_reports_what_finished_and_exits_130(workdir, fake_llm, cli):
    """Ctrl-C mid-probe: the run's outcome says interrupted (no outcome in an exception's
    args), the probe report covers what finished and says so, and the command exits 130."""
    import itertools
    import signal
    answers = itertools.count(1)

    def stopping(prompt: str, body: dict) -> str:
        if next(answers) == 8:
            signal.raise_signal(signal.SIGINT)       # as a terminal's Ctrl-C
        return careful(prompt, body)
    result = cli("probe", str(PIPELINE), "--input", "report.md", "--quiet", "--probes", "inject_claim",
                 *seat(fake_llm, local=stopping, gemini=careful, openai=careful))
    assert result.exit_code == 130, result.output
    assert "interrupted: the finished items and the probe report of their pairs are written" in result.output
    [folder] = [path.parent for path in workdir.glob("reports/*/*-probe/*/probe.json")]
    report, summary = (json.loads((folder / name).read_text()) for name in ("probe.json", "summary.json"))
    assert report["interrupted"] is True and summary["interrupted"] is True
    assert json.loads((folder / "run.json").read_text())["status"] == "interrupted"


def test_runner_view_lists_a_probe_run_and_shows_its_report(workdir, fake_llm, cli):
    from runner.view.app import create_app
    report = probe(cli, *seat(fake_llm, local=careful, gemini=obedient, openai=careful), "--probes", "inject_claim",
                   "--items", "3")
    assert report["items"] == 3
    web = TestClient(create_app(workdir / "reports", token="t"), base_url="http://127.0.0.1")
    relative = Path(report["run"]).relative_to("reports").as_posix()
    home = web.get("/")
    assert f'href="/run/{relative}/probe"' in home.text
    assert f'href="/run/{relative}/probe"' in web.get(f"/run/{relative}").text
    page = web.get(f"/run/{relative}/probe")
    assert page.status_code == 200 and "<svg" in page.text and "inject_claim" in page.text
    assert "script-src 'none'" in page.headers["content-security-policy"]
    assert web.get(f"/run/{relative.rsplit('/', 1)[0]}/missing/probe").status_code == 404


def test_unknown_probes_and_pipelines_without_probes_are_refused(workdir, cli, tmp_path):
    result = cli("probe", str(PIPELINE), "--input", "report.md", "--probes", "inject_clam")
    assert result.exit_code == 2 and "unknown probe 'inject_clam'" in result.output
    assert "inject_claim" in result.output
    bare = tmp_path / "bare" / "pipelines" / "b.yaml"
    bare.parent.mkdir(parents=True)
    bare.write_text("version: 1\nname: b\nsteps: [{id: c, uses: compute, with: {x: 1}}]\nsummary: {count_by: x}\n")
    result = cli("probe", str(bare), "--record", "x=1")
    assert result.exit_code == 2 and "declares no probes" in result.output


@pytest.mark.parametrize(("probes", "problem"), [
    ("{a: {inject: {field: claim, verdict: VALID}, shuffle: {field: claim}, expect: unchanged}}",
     "probes.a: a probe makes one perturbation"),
    ("{a: {shuffle: {field: steps.sorce.context_before}, expect: unchanged}}",
     "no step has id 'sorce'. Did you mean 'source'?"),
    ("{a: {shuffle: {field: steps.source.context}, expect: unchanged}}", "step 'source' has no field 'context'"),
    ("{a: {shuffle: {field: claim}, expect: same}}", "probes.a.expect"),
    ("{a: {inject: {field: claim}, expect: unchanged}}", "probes.a.inject"),
])
def test_a_probes_block_that_cannot_work_is_refused_with_its_place(workdir, cli, probes, problem):
    text = PIPELINE.read_text().split("\nprobes:", 1)[0] + f"\nprobes: {probes}\n"
    (workdir / "p.yaml").write_text(text)
    shutil.copytree(PIPELINE.parent.parent / "prompts", workdir.parent / "prompts", dirs_exist_ok=True)
    shutil.copytree(PIPELINE.parent.parent / "schemas", workdir.parent / "schemas", dirs_exist_ok=True)
    result = cli("validate", "p.yaml")
    assert result.exit_code == 2 and problem in result.output, result.output


def test_probes_need_a_verdict_to_compare(tmp_path, cli):
    path = tmp_path / "pipelines" / "p.yaml"
    path.parent.mkdir()
    path.write_text("version: 1\nname: p\nsteps: [{id: c, uses: compute, with: {x: 1}}]\n"
                    "probes: {a: {case: {field: x}, expect: unchanged}}\n")
    result = cli("validate", str(path))
    assert result.exit_code == 2 and "probes: probes compare each copy's verdict" in result.output


def test_probes_in_their_own_file_are_located_there(tmp_path, cli):
    path = tmp_path / "pipelines" / "p.yaml"
    path.parent.mkdir()
    (tmp_path / "probes").mkdir()
    path.write_text("version: 1\nname: p\nsteps: [{id: c, uses: compute, with: {x: 1}}]\nsummary: {count_by: x}\n"
                    "probes: p.yaml\n")
    (tmp_path / "probes" / "p.yaml").write_text("a:\n  case: {field: x}\n  expect: unchanged\n")
    assert cli("validate", str(path)).exit_code == 0
    (tmp_path / "probes" / "p.yaml").write_text("a:\n  case: {field: x}\n  expect: same\n")
    result = cli("validate", str(path))
    assert result.exit_code == 2 and f"{tmp_path / 'probes' / 'p.yaml'}:3:11: probes.a.expect" in result.output, \
        result.output
    for name, problem in (("q.yaml", "'q.yaml' not found"), ("../../x.yaml", "leaves the project")):
        path.write_text(path.read_text().replace("probes: p.yaml", f"probes: {name}").replace(
            "probes: q.yaml", f"probes: {name}"))
        result = cli("validate", str(path))
        assert result.exit_code == 2 and "p.yaml:5:9: probes:" in result.output and problem in result.output, \
            result.output


def test_the_originals_count_an_errored_item_by_its_verdict_as_summary_json_does():
    """probe.json counted an errored item with a verdict (LLM_ERROR) as `ERROR`, the run's
    summary as `LLM_ERROR`: the view showed the same items under two names."""
    from runner.outputs.summary import counted_as
    from runner.probe.measure import Originals
    originals = Originals("verdict", {})
    results = [{"verdict": "PASS"}, {"verdict": "LLM_ERROR", "error": "x"}, {"error": "y"}]
    for result in [*results, None]:                                # None: an original never run
        originals.add(result)
    assert originals.counts == {"PASS": 1, "LLM_ERROR": 1, "ERROR": 2}
    assert [counted_as(r, "verdict") for r in results] == ["PASS", "LLM_ERROR", "ERROR"]
