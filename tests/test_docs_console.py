"""Every console example of README.md and docs/*.md, run and compared with what it shows
(the format is described at the top of tests/console_examples.py). An example that drifts
from what runner prints fails here.

A setup prepares what a block needs before its commands run; a block names it in its
`<!-- console: setup=NAME -->` comment. Each gets the example's Workspace: the copy's root,
the environment the block's bash starts from (add variables to it), the scripted model
server, the values that later commands get in place of those the docs show, and what to do
when the example ends."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from console_examples import (
    Command,
    Example,
    Shell,
    as_json,
    base_environment,
    copy_project,
    doc_files,
    examples,
    matches,
    normalise,
    same_json,
)
from fakellm import FakeLLM
from serve_fixtures import Process


@dataclass
class Workspace:
    root: Path
    env: dict[str, str]
    fake: FakeLLM
    carried: dict[str, str] = field(default_factory=dict)      # shown in the docs -> the real value
    cleanups: list[Callable[[], None]] = field(default_factory=list)


Setup = Callable[[Workspace], None]
CITATION_VERDICTS = {      # the `local` seat's answers to the citation example, by a phrase of the claim
    "no government would be necessary": "MISLEADING",
    "Each senator is powerful": "INSUFFICIENT",
}


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def no_model(space: Workspace) -> None:
    """The `local` seat's server is down: its URL refuses connections."""
    space.env["LOCAL_LLM_BASE_URL"] = f"http://localhost:{_closed_port()}/v1"


def citation_answer(verdict: str) -> str:
    return json.dumps({"verdict": verdict, "substantive_quote": verdict != "INSUFFICIENT",
                       "quote_in_context": verdict != "MISLEADING", "supports_claim": verdict == "VALID",
                       "reason": f"scripted {verdict.lower()} answer"})


def local_model(space: Workspace) -> None:
    """A model at LOCAL_LLM_BASE_URL answering the citation judge: VALID, but for the claims
    of CITATION_VERDICTS."""
    for phrase, verdict in CITATION_VERDICTS.items():
        space.fake.script(citation_answer(verdict), contains=phrase)
    space.fake.script(citation_answer("VALID"))
    space.env["LOCAL_LLM_BASE_URL"] = space.fake.url


def _shell(root: Path, env: dict[str, str], command: str) -> None:
    import subprocess
    subprocess.run(["bash", "-c", command], cwd=root, env=env, check=True, capture_output=True, text=True)


def claims_run(space: Workspace) -> None:
    """A run of a small `claims` judge over two claims (docs/run-folders.md: Reading a run's calls)."""
    root, env, fake = space.root, space.env, space.fake
    (root / "pipelines" / "claims.yaml").write_text("""
version: 1
name: claims
env: [FAKE_URL]
models:
  local: {model: openai/local-model, api_base: "{{ env.FAKE_URL }}"}
steps:
  - id: judge
    uses: llm
    with: {model: local, json: true, prompt: "Does the source support the claim?\\nClaim: {{ item.claim }}"}
output: {verdict: "{{ steps.judge.output.verdict }}"}
""", encoding="utf-8")
    (root / "claims.json").write_text(json.dumps([{"claim": "The House has 435 members."},
                                                  {"claim": "The Senate has two senators from each state."}]))
    fake.answer_json({"verdict": "SUPPORTED", "reason": "Article I, Section 3 says so."})
    _shell(root, {**env, "FAKE_URL": fake.url}, "runner run pipelines/claims.yaml --input claims.json --quiet")


def reviewed_run(space: Workspace) -> None:
    """A run of the citation example with a local model, and two reviews of it saved as
    `runner view` saves them (docs/view.md)."""
    local_model(space)
    work = space.root / "examples" / "citation_judge"
    _shell(work, space.env, "runner run ../../pipelines/citation_judge.yaml --input report.md --quiet")
    from runner.stores.reviews import Review, ReviewStore
    [group] = (work / "reports" / "citation_judge").iterdir()
    run = group / (group / "latest").read_text(encoding="utf-8").strip()
    results = [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    store = ReviewStore(work / "reports" / "reviews.sqlite")
    for result in results:
        agrees = result["index"] != 5
        store.put(Review("citation_judge", result["item_key"], "ana", agrees, judged=result["verdict"],
                          correct=None if agrees else "VALID", run=str(run), item_index=result["index"]))
    store.close()


def slide_server(space: Workspace) -> None:
    """`runner serve pipelines` of the copy on a free port, which the docs' 127.0.0.1:8000
    stands for, its slide judge's model answering red for the slide claiming growth of 50%
    and green for the others (docs/serve.md)."""
    space.fake.script(json.dumps({"rating": "red", "score": 20, "explanation": "Revenue grew 11.7% in Q2, not 50%.",
                                  "issues": [{"type": "derived", "detail": "8,080,000 / 7,234,567 is +11.7%"}]}),
                      contains="grew 50%")
    space.fake.script(json.dumps({"rating": "green", "score": 92, "explanation": "Every number matches the source.",
                                  "issues": []}))
    server = Process(space.root, env={**space.env, "JUDGE_BASE_URL": space.fake.url.rsplit("/v1", 1)[0]}).ready()
    space.cleanups.append(server.stop)
    space.carried["127.0.0.1:8000"] = server.url.removeprefix("http://")


def juror_kinds(space: Workspace) -> None:
    """The kinds of juror of tests/jurors.py as models of the fake server, which the docs'
    127.0.0.1:8080 stands for: `careful` and `obedient` (docs/robustness.md)."""
    from jurors import careful, obedient
    space.fake.script(careful, model="careful")
    space.fake.script(obedient, model="obedient")
    space.carried["127.0.0.1:8080"] = space.fake.url.removeprefix("http://").removesuffix("/v1")


def openai_grader(space: Workspace) -> None:
    """The label_model grader of examples/openai_evals/qa_eval.json as a model of the fake
    server, which the docs' 127.0.0.1:1234 stands for: correct, but for Dickens (docs/openai-evals.md)."""
    space.fake.answer_json({"label": "incorrect", "reason": "Emma is by Jane Austen."}, contains="Answer: Charles")
    space.fake.answer_json({"label": "correct", "reason": "It matches the reference."})
    space.carried["127.0.0.1:1234"] = space.fake.url.removeprefix("http://").removesuffix("/v1")


def answer_scores(space: Workspace) -> None:
    """The model of `runner init answer_judge`'s judge, which the docs' 127.0.0.1:1234 stands
    for: it scores four of the five example items and answers HTTP 400 for the fifth (the
    planet closest to the Sun) (docs/rates-and-gates.md)."""
    from runner.testing import Reply
    for words, score in {"capital of France": 1, "spider": 0, "Pride": 1, "boiling": 0.9}.items():
        space.fake.script(json.dumps({"score": score, "reason": "checked"}), contains=words)
    space.fake.script(Reply(status=400, raw_body='{"error": {"message": "context length exceeded"}}'),
                      contains="closest")
    space.carried["127.0.0.1:1234"] = space.fake.url.removeprefix("http://").removesuffix("/v1")


def attribution_model(space: Workspace) -> None:
    """A model at LOCAL_LLM_BASE_URL that finds every claim supported, whatever it is shown
    (docs/align.md: the judge align cannot help)."""
    space.fake.answer_json({"verdict": "supported", "quote": "", "reason": "scripted: always supported"})
    space.env["LOCAL_LLM_BASE_URL"] = space.fake.url


SETUPS: dict[str, Setup] = {"no_model": no_model, "local_model": local_model, "claims_run": claims_run,
                            "reviewed_run": reviewed_run, "slide_server": slide_server, "juror_kinds": juror_kinds,
                            "openai_grader": openai_grader, "answer_scores": answer_scores,
                            "attribution_model": attribution_model}
EXAMPLES = [example for path in doc_files() for example in examples(path)]


def test_the_docs_have_console_examples_and_every_setup_they_name_exists():
    assert len(EXAMPLES) >= 5
    named = {name for example in EXAMPLES for name in example.setups}
    assert named <= set(SETUPS), named - set(SETUPS)


# README.md's examples run in the README's test command; the docs/ pages' examples (a CLI
# process each, over a copy of the project) under `-m slow`, as CI runs them: together they
# were a fifth of the default run's time.
@pytest.mark.parametrize("example", [pytest.param(example, marks=pytest.mark.slow)
                                     if example.slow or example.file != "README.md" else example
                                     for example in EXAMPLES], ids=lambda example: example.name)
def test_console_example(example: Example, tmp_path: Path, fake_llm: FakeLLM) -> None:
    space = Workspace(copy_project(tmp_path / "project"), base_environment(tmp_path / "home"), fake_llm)
    try:
        for name in example.setups:
            SETUPS[name](space)
        shell = Shell(space.root / example.cwd, {**space.env, **example.env})
        space.cleanups.append(shell.close)
        for command in example.commands:
            _check(example, command, shell, space.carried)
    finally:
        for cleanup in reversed(space.cleanups):
            cleanup()


def _check(example: Example, command: Command, shell: Shell, carried: dict[str, str]) -> None:
    """Runs the command (with the values carried so far) until it prints what the docs show,
    or fails saying what it printed instead."""
    text = command.text
    for shown, real in carried.items():
        text = text.replace(shown, real)
    deadline = time.monotonic() + example.retry
    while True:
        output = shell.run(text)
        if example.json:
            seen: dict[str, str] = {}
            if same_json(as_json("\n".join(command.expected), shown=True), as_json(output), seen):
                carried.update(seen)
                return
        elif matches(normalise("\n".join(command.expected)), normalise(output)):
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    raise AssertionError(f"{example.file}:{command.line}: `$ {command.text}` printed\n{output}\n\n"
                         "but the docs show\n" + "\n".join(command.expected))
