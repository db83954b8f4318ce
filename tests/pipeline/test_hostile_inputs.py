"""Hostile input, round 3 (issue 31: H4, H5, H9, H11, H14, H17, H19): each test reproduces
an attack that worked on main and checks it no longer does."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path
from unittest.mock import ANY

import pytest

from helpers import run, write_json
from runner.errors import ConfigError
from runner.inputs import markdown_citations
from runner.pipeline.loader import load_pipeline
from runner.pipeline.validated import ValidatedPipelines
from runner.testing import Reply
from runner.yamlpos import load_located

# ---- H5: one line of thousands of citations parses in linear work -------------------------


def _characters_cleaned(monkeypatch: pytest.MonkeyPatch, text: str) -> int:
    cleaned = [0]
    clean = markdown_citations.claim_text

    def counting(span: str) -> str:
        cleaned[0] += len(span)
        return clean(span)

    monkeypatch.setattr(markdown_citations, "claim_text", counting)
    markdown_citations.extract_citations(text)
    return cleaned[0]


def test_citations_on_one_line_without_a_sentence_end_cost_linear_work(monkeypatch):
    # On main each claim cleaned the whole line before it: 40,000 citations took 82 s.
    line = "See [a.txt:L1](a.txt) "
    small = _characters_cleaned(monkeypatch, line * 2_000)
    large = _characters_cleaned(monkeypatch, line * 4_000)
    assert large < 2.2 * small
    found = markdown_citations.extract_citations(line * 200)
    assert len(found) == 200 and found[-1]["claim"].endswith("See") and found[-1]["start"] == 1
    assert len(found[-1]["claim"]) <= markdown_citations.MAX_CLAIM_CHARS


# ---- H14: every string-building filter, global, method and operator has a size guard ------

def _outputs(project, output: dict[str, str], records: list[dict]) -> list[dict]:
    """The results of `records` through one compute step and these output templates."""
    path = project.pipeline(json.dumps({"version": 1, "name": "t", "output": output,
                                        "steps": [{"id": "echo", "uses": "compute", "with": {"n": "{{ item.n }}"}}]}))
    return run(path, write_json(project.root / "in.json", records)).results


@pytest.mark.parametrize("expression, refusal", [
    ("item.claim | center(2500000000)", "filter 'center' would produce 2,500,000,000"),
    ("item.claim | indent(2500000000)", "filter 'indent' would produce"),
    ("'%2500000000d' | format(1)", "filter 'format' would produce"),
    ("'%*d' | format(2500000000, 1)", "filter 'format' would produce"),
    ("'%2500000000d' % 1", "'%' would produce"),
    ("'{:>2500000000}'.format(1)", "format() would produce"),
    ("('{0:>{1}' ~ '}').format(1, 2500000000)", "format() would produce"),
    ("item.claim.center(2500000000)", "center() would produce"),
    ("item.claim.ljust(2500000000)", "ljust() would produce"),
    ("'1'.zfill(2500000000)", "zfill() would produce"),
    ("lipsum(n=300000)", "lipsum() would produce 30,000,000 words"),
    ("(item.claim * 1000000) | wordwrap(1, wrapstring='<br>' * 100)", "filter 'wordwrap' would produce"),
    ("(item.claim * 1000000) | replace('', 'yyyyyyyyyy')", "filter 'replace' would produce"),
    ("([item.claim * 1000000] * 9) | join('x' * 5000000)", "filter 'join' would produce"),
    ("('x' * 9000000).join(['a', 'b', 'c'])", "join() would produce"),
    ("[1] | batch(2500000000, 0) | list", "filter 'batch' would produce"),
    ("[1] | slice(2500000000) | list", "filter 'slice' would produce"),
    ("{'a': [1, 2, 3]} | tojson(indent=2500000000)", "tojson's indent would produce"),
    ("(item.claim * 6000000) ~ (item.claim * 6000000)", "'~' would produce"),
    ("([[0] * 100000] * 1000) | sum(start=[])", "filter 'sum' would produce 100,000,000"),
    ("(item.claim * 1000000).translate({120: 'y' * 1000})", "translate() would produce"),
])
def test_string_building_filters_and_operators_refuse_a_huge_result(project, expression, refusal):
    first, second = _outputs(project, {"n": "{{ steps.echo.n }}", "big": f"{{{{ ({expression}) if item.n == 2 else 0 }}}}"},
                             [{"n": 1, "claim": "x"}, {"n": 2, "claim": "x"}])
    assert first == {"index": 1, "item_key": ANY, "n": 1, "big": 0}
    assert refusal in second.get("error", ""), second
    assert "output.big" in second["error"]


def _one_output(project, template: str) -> dict:
    return _outputs(project, {"r": template}, [{"n": 1}])[0]


def test_namespace_doubling_with_tilde_stops_at_the_limit(project):
    only = _one_output(project, "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                                "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}")
    assert "'~' would produce" in only["error"]


def test_modest_uses_of_the_guarded_filters_still_work(project):
    only = _one_output(project, "{{ ['a' | center(5), 'a\\nb' | indent(2, first=true), '%03d' | format(7), "
                                "'%s-%s' % (1, 2), '{:>4}'.format(item.n), 'x'.ljust(3, '.'), [1, 2, 3] | join(', '), "
                                "'a-b' | replace('-', '+'), [1, 2, 3] | batch(2) | list, {'a': 1} | tojson(indent=2), "
                                "'a' ~ item.n ~ 'b', lipsum(n=1, html=false, min=3, max=5) | wordcount > 2, "
                                "[[1], [2, 3]] | sum(start=[]), [1, 2] | sum, range(3) | join('-')] }}")
    assert only["r"] == ["  a  ", "  a\n  b", "007", "1-2", "   1", "x..", "1, 2, 3", "a+b", [[1, 2], [3]],
                         '{\n  "a": 1\n}', "a1b", True, [1, 2, 3], 3, "0-1-2"], only


# ---- H17: --filter sees a read-only item -------------------------------------------------

@pytest.mark.parametrize("expression", [
    "item.update({'claim': 'HACKED'}) or item.n == 1",
    "item.tags.append('HACKED') or item.n == 1",
    "item.setdefault('claim', 'HACKED') and item.pop('claim') and item.n == 1",
])
def test_a_filter_cannot_change_the_items_it_chooses_from(project, cli, expression):
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: echo, uses: compute, with: {claim: "{{ item.claim }}", tags: "{{ item.tags }}"}}]
        output: {claim: "{{ steps.echo.claim }}", tags: "{{ steps.echo.tags }}"}
        """)
    items = write_json(project.root / "in.json", [{"n": 1, "claim": "a", "tags": []}, {"n": 2, "claim": "b", "tags": []}])
    refused = cli("run", str(path), "--input", str(items), "--out", "out", "--filter", expression)
    assert refused.exit_code == 2 and "unsafe" in refused.stderr, refused.output
    assert not (project.root / "out" / "results.jsonl").exists()
    chosen = cli("run", str(path), "--input", str(items), "--out", "out", "--filter", "item.n == 2 and 'b' in item.claim")
    assert chosen.exit_code == 0 and project.results() == [{"index": 2, "item_key": ANY, "claim": "b", "tags": []}]


# ---- H19: a validated marker holds a keyed hash of what was checked ----------------------

def _forged_marker(project, content: bytes) -> tuple[Path, ValidatedPipelines]:
    project.prompt("ask.j2", "Question {{ steps.nothing }}\n")          # invalid: no step 'nothing'
    path = project.pipeline("""
        version: 1
        name: v
        models: {m: {model: openai/m, api_base: "http://127.0.0.1:9/v1"}}
        steps: [{id: ask, uses: llm, with: {model: m, prompt: ask.j2}}]
        output: {answer: "{{ steps.ask.raw }}"}
        """)
    memo = ValidatedPipelines(project.root / "cache")
    data = load_located(path.read_text(encoding="utf-8"), "pipelines/p.yaml").data
    marker = memo.folder / memo.fingerprint(data, path, project.root)
    marker.parent.mkdir(parents=True)
    marker.write_bytes(content)
    return path, memo


@pytest.mark.parametrize("content", [b"", b"0" * 64])
def test_a_forged_validated_marker_does_not_skip_the_checks(project, content):
    path, memo = _forged_marker(project, content)
    with pytest.raises(ConfigError) as raised:
        load_pipeline(path, validated=memo)
    assert "nothing" in str(raised.value)


def test_the_marker_key_is_private_and_one_open_to_others_is_not_trusted(project):
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    path = project.pipeline("""
        version: 1
        name: v
        steps: [{id: echo, uses: compute, with: {q: "{{ item.q }}"}}]
        output: {q: "{{ steps.echo.q }}"}
        """)
    memo = ValidatedPipelines(project.root / "cache")
    load_pipeline(path, validated=memo)
    [marker] = memo.folder.iterdir()
    assert stat.S_IMODE(memo.key_file.stat().st_mode) == 0o600 and len(marker.read_bytes()) == 64
    assert memo.known(marker.name)
    os.chmod(memo.key_file, 0o644)            # anyone could have replaced it: its markers mean nothing
    assert not memo.known(marker.name)


# ---- H11: render and sweep send no search request without --allow-calls -------------------

def _search_project(project, fake_llm, monkeypatch) -> tuple[Path, Path]:
    monkeypatch.setenv("SEARCH_URL", fake_llm.url.rsplit("/v1", 1)[0])
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-secret-key-1234")
    fake_llm.script('{"results": [{"title": "t", "url": "u", "content": "c", "score": 0.5}]}')
    path = project.pipeline("""
        version: 1
        name: s
        env: [SEARCH_URL, TAVILY_API_KEY]
        params: {depth: basic}
        steps:
          - id: found
            uses: search
            with: {query: "{{ item.q }}", provider: tavily, api_base: "{{ env.SEARCH_URL }}",
                   api_key: "{{ env.TAVILY_API_KEY }}", search_depth: "{{ params.depth }}", retries: 0}
        output:
          id: "{{ item.id }}"
          verdict: "{{ 'FOUND' if steps.found.results else 'NONE' }}"
        summary: {count_by: verdict}
        """)
    items = write_json(project.root / "in.json", [{"id": n, "q": f"query {n}"} for n in range(1, 4)])
    (project.root / "labels.jsonl").write_text("".join(f'{{"id": {n}, "label": "FOUND"}}\n' for n in range(1, 4)))
    return path, items


def test_render_sends_no_search_request(project, cli, fake_llm, monkeypatch):
    path, items = _search_project(project, fake_llm, monkeypatch)
    result = cli("render", str(path), "--input", str(items))
    assert result.exit_code == 0, result.output
    assert fake_llm.requests == []
    assert "needs a model answer that is not cached: search tavily 'query 1'" in result.output
    assert cli("run", str(path), "--input", str(items), "--item", "1", "--out", "out").exit_code == 0
    assert len(fake_llm.requests) == 1 and project.results() == [{"index": 1, "item_key": ANY, "id": 1, "verdict": "FOUND"}]
    cached = cli("render", str(path), "--input", str(items), "--item", "1")      # a cached search is shown
    assert cached.exit_code == 0 and "not cached" not in cached.output and len(fake_llm.requests) == 1


def test_sweep_sends_no_search_request_without_allow_calls(project, cli, fake_llm, monkeypatch):
    path, items = _search_project(project, fake_llm, monkeypatch)
    args = ["sweep", str(path), "--input", str(items), "--labels", "labels.jsonl", "--key", "id", "--truth", "label",
            "--grid", "params.depth=basic,advanced", "--out", "sweep"]
    result = cli(*args)
    assert result.exit_code == 3, result.output           # nothing scored: the sweep did not do its job
    assert "| basic | - | - | - | - | 3 item(s) need requests the cache does not hold: run with --allow-calls |" \
        in result.output                                  # not "needs 0 call(s)": a search request is no LLM call
    assert fake_llm.requests == []
    assert cli(*args, "--allow-calls").exit_code == 0
    assert len(fake_llm.requests) == 6 and all(r.path.endswith("/search") for r in fake_llm.requests)


# ---- H4: credentials in a URL never reach what runner writes or prints ------------------

PASSWORD = "pw-SECRET-4711"
FAKE_MLFLOW = '''
_uri = None


def set_tracking_uri(uri):
    global _uri
    _uri = uri


def _refused():
    # What MLflow's own errors look like: the whole URI, and the password on its own.
    return Exception(f"API request to {_uri}/api/2.0/mlflow/experiments/get-by-name failed "
                     f"(auth admin/''' + PASSWORD + ''' refused)")


def set_experiment(name):
    raise _refused()


def log_feedback(**kwargs):
    raise _refused()
'''


@pytest.fixture
def leaky_mlflow(project, monkeypatch):
    (project.root / "fake_site" / "mlflow").mkdir(parents=True)
    (project.root / "fake_site" / "mlflow" / "__init__.py").write_text(FAKE_MLFLOW)
    (project.root / "fake_site" / "mlflow" / "entities.py").write_text("class AssessmentSource:\n"
                                                                       "    def __init__(self, **kw): pass\n")
    monkeypatch.syspath_prepend(str(project.root / "fake_site"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://admin:{PASSWORD}@127.0.0.1:9")
    yield
    for name in ("mlflow", "mlflow.entities"):
        sys.modules.pop(name, None)


def test_a_tracking_uri_password_never_reaches_the_run_folder_or_stderr(project, cli, leaky_mlflow):
    project.pipeline(json.dumps({"version": 1, "name": "traced", "tracing": {"backend": "mlflow"},
                                 "steps": [{"id": "echo", "uses": "compute", "with": {"n": "{{ item.n }}"}}],
                                 "output": {"n": "{{ steps.echo.n }}"}}))
    write_json(project.root / "in.json", [{"n": 1}])
    done = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", "out")
    assert done.exit_code == 0 and project.results() == [{"index": 1, "item_key": ANY, "n": 1}]
    [warning] = project.summary()["run_warnings"]
    assert "tracing (mlflow) is off" in warning and "http://***@127.0.0.1:9/api" in warning, warning
    for name in ("summary.json", "report.md", "report.html", "results.jsonl"):
        assert PASSWORD not in (project.root / "out" / name).read_text(encoding="utf-8"), name
    assert PASSWORD not in done.output


def test_feedback_never_prints_the_tracking_uri_password(project, cli, leaky_mlflow):
    from test_tracing import feedback_run
    feedback_run(project.root / "out")
    done = cli("feedback", "--store", "out", "--trace-id", "tr-1", "--down")
    assert done.exit_code == 0 and "not logged to MLflow at http://127.0.0.1:9" in done.stderr
    assert PASSWORD not in done.stderr and "***" in done.stderr


def test_an_api_base_password_never_reaches_an_item_error_or_the_cli(project, cli, monkeypatch):
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    text = """
        version: 1
        name: creds
        env: [BASE]
        models: {m: {model: openai/m, api_base: "API_BASE", retries: 0}}
        steps: [{id: ask, uses: llm, with: {model: m, prompt: ask.j2}}]
        output: {answer: "{{ steps.ask.raw }}"}
        """
    write_json(project.root / "in.json", [{"q": "x"}])
    project.pipeline(text.replace("API_BASE", f"http://admin:{PASSWORD}@127.0.0.1:9/v1"))
    refused = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", "out")
    assert refused.exit_code == 2 and "models.m.api_base" in refused.stderr and PASSWORD not in refused.stderr
    monkeypatch.setenv("BASE", f"http://admin:{PASSWORD}@127.0.0.1:9/v1")
    project.pipeline(text.replace("API_BASE", "{{ env.BASE }}"))
    done = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", "out")
    [only] = project.results()
    assert "error" in only and PASSWORD not in only["error"]
    assert "http://***@127.0.0.1:9/v1" in only["error"] and project.summary()["hints"]
    rendered = cli("render", "pipelines/p.yaml", "--input", "in.json")
    assert "endpoint: http://***@127.0.0.1:9/v1" in rendered.output and PASSWORD not in rendered.output
    for path in (project.root / "out").rglob("*"):
        if path.is_file():
            assert PASSWORD not in path.read_text(encoding="utf-8", errors="replace"), path
    assert PASSWORD not in done.output


def test_redact_hides_url_user_information_and_remembered_passwords(monkeypatch):
    from runner.redact import redact, remember_url
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert redact("see https://bob:s3cr%40t@host:1/x and ftp://TOKEN123@h/") == "see https://***@host:1/x and ftp://***@h/"
    assert redact("mail bob@example.org, http://host/a@b") == "mail bob@example.org, http://host/a@b"
    remember_url("http://u:only-here-99@127.0.0.1/")
    assert redact("password only-here-99 rejected") == "password *** rejected"


def test_a_secret_remembered_later_is_hidden_in_a_text_redacted_before(monkeypatch):
    """Redaction remembers the texts it redacted (a call's endpoint, each call): a secret
    learnt afterwards still comes out of the same text, and out of one hidden by value."""
    from runner.redact import hide_secrets, redact, remember_url
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    environment = frozenset({"env-secret-123"})
    text = "endpoint http://127.0.0.1:9/v1 said later-secret-77 and env-secret-123"
    assert redact(text, environment) == "endpoint http://127.0.0.1:9/v1 said later-secret-77 and ***"
    assert hide_secrets(text, environment) == "endpoint http://127.0.0.1:9/v1 said later-secret-77 and ***"
    remember_url("http://u:later-secret-77@127.0.0.1/")
    assert redact(text, environment) == "endpoint http://127.0.0.1:9/v1 said *** and ***"
    assert hide_secrets(text, environment) == "endpoint http://127.0.0.1:9/v1 said *** and ***"
    assert redact(text, environment, ["http://127.0.0.1:9/v1"]) == "endpoint *** said *** and ***"


# ---- H9: structured output falls back only on a refusal of the format, per schema shape ----

ANSWER = json.dumps({"verdict": "yes", "reason": "r"})


def _formats(server) -> list[str | None]:
    return [(r.body.get("response_format") or {}).get("type") for r in server.requests]


@pytest.fixture
def llm_env(scripted_llm):
    return scripted_llm


def _state(project) -> dict:
    path = project.root / "cache" / "structured_output.json"
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.mark.parametrize("status, body", [
    (400, '{"error": "Missing information: the messages must not be empty"}'),
    (400, '{"error": "invalid value for max_tokens (the format of an integer)"}'),
    (500, '{"error": "invalid chat template formatting, try again"}'),
])
def test_an_error_that_does_not_refuse_the_format_never_downgrades(project, llm_env, status, body):
    from test_llm import llm_pipeline
    llm_env.script(Reply(status=status, raw_body=body), Reply(ANSWER))
    outcome = run(llm_pipeline(project, retries=1), write_json(project.root / "in.json", [{"q": "1"}]))
    assert set(_formats(llm_env)) == {"json_schema"}
    assert _state(project) == {}
    if status == 500:                                   # transient: retried with the same format
        assert outcome.results[0]["verdict"] == "yes" and len(llm_env.requests) == 2


def test_a_schema_the_server_cannot_convert_downgrades_only_that_schema(project, llm_env):
    from test_llm import SCHEMA, llm_pipeline
    hard = {**SCHEMA, "properties": {**SCHEMA["properties"], "n": {"type": "integer", "multipleOf": 3}}}
    llm_env.script(Reply(status=400, raw_body='{"error": "json_schema conversion failed: unsupported multipleOf"}'),
                   when=lambda body: (body.get("response_format") or {}).get("type") == "json_schema"
                   and "multipleOf" in json.dumps(body["response_format"]))
    llm_env.script(ANSWER)
    path = llm_pipeline(project)
    project.schema("answer.schema.json", hard)
    assert run(path, write_json(project.root / "in.json", [{"q": "1"}])).results[0]["verdict"] == "yes"
    assert _formats(llm_env) == ["json_schema", "json_object"]
    [entry] = _state(project).values()
    assert entry["mode"] == "json_object" and entry["until"] > time.time() + 86400
    llm_env.reset()
    llm_env.script(ANSWER)
    project.schema("answer.schema.json", SCHEMA)        # another schema on the same endpoint
    assert run(path, write_json(project.root / "in.json", [{"q": "2"}])).results[0]["verdict"] == "yes"
    assert _formats(llm_env) == ["json_schema"]


def test_a_learned_format_expires(project, llm_env):
    from test_llm import SCHEMA, llm_pipeline

    from runner.llm.client.structured import FILE, schema_shape
    llm_env.script(ANSWER)
    path = llm_pipeline(project)
    key = f"scripted (provider default) scripted/m1 {schema_shape(SCHEMA)}"
    (project.root / "cache").mkdir()
    (project.root / "cache" / FILE).write_text(json.dumps({key: {"mode": "none", "until": time.time() - 1}}))
    run(path, write_json(project.root / "in.json", [{"q": "1"}]))
    assert _formats(llm_env) == ["json_schema"]


def test_concurrent_learners_keep_each_others_formats(tmp_path):
    from runner.llm.client.spec import build_spec
    from runner.llm.client.structured import FILE, FormatChoices
    from runner.llm.client.transport import TransportError
    refusal = TransportError("http", "HTTP 400", 400)
    refusal.body = '{"error": "response_format json_schema is not supported"}'
    first, second = FormatChoices(tmp_path), FormatChoices(tmp_path)
    spec_a = build_spec("a", {"model": "openai/a", "api_base": "http://127.0.0.1:1/v1"})
    spec_b = build_spec("b", {"model": "openai/b", "api_base": "http://127.0.0.1:2/v1"})
    assert first.first(spec_a, {"type": "object"}) == second.first(spec_b, {"type": "object"}) == "json_schema"
    assert first.fall_back(spec_a, "json_schema", refusal, {"type": "object"}) == "json_object"
    assert second.fall_back(spec_b, "json_schema", refusal, {"type": "object"}) == "json_object"
    third = FormatChoices(tmp_path)
    assert third.first(spec_a, {"type": "object"}) == third.first(spec_b, {"type": "object"}) == "json_object"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != FILE + ".lock") == [FILE]


def test_a_deeply_nested_state_file_is_ignored_with_one_warning(project, llm_env, capfd):
    from test_llm import llm_pipeline
    llm_env.script(ANSWER)
    path = llm_pipeline(project)
    (project.root / "cache").mkdir()
    (project.root / "cache" / "structured_output.json").write_text("[" * 200_000 + "]" * 200_000)
    outcome = run(path, write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}]))
    assert [r.get("verdict") for r in outcome.results] == ["yes", "yes"], outcome.results
    assert capfd.readouterr().err.count("ignoring") == 1


def test_an_api_base_password_never_reaches_the_structured_output_state_or_stderr(project, fake_llm, monkeypatch,
                                                                                  capfd):
    from test_llm import server_pipeline as llm_pipeline
    monkeypatch.setenv("FAKE_URL", fake_llm.url.replace("http://", f"http://admin:{PASSWORD}@"))
    fake_llm.personality = "llama-cpp-python"
    fake_llm.script(ANSWER)
    outcome = run(llm_pipeline(project), write_json(project.root / "in.json", [{"q": "1"}]))
    assert outcome.results[0]["verdict"] == "yes" and _formats(fake_llm) == ["json_schema", "json_object"]
    state = (project.root / "cache" / "structured_output.json").read_text()
    assert "127.0.0.1" in state and PASSWORD not in state
    err = capfd.readouterr().err
    assert "rejects response_format json_schema" in err and PASSWORD not in err
