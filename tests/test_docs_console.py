"""Every console example of README.md and docs/*.md, run and compared with what it shows
(the format is described at the top of tests/console_examples.py). An example that drifts
from what runner prints fails here.

A setup prepares what a block needs before its commands run; a block names it in its
`<!-- console: setup=NAME -->` comment. Each gets the copy's root, the environment the
block's bash starts from (add variables to it) and the scripted model server."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console_examples import (
    Example,
    base_environment,
    copy_project,
    doc_files,
    examples,
    matches,
    normalise,
    run_example,
)
from fakellm import FakeLLM

Setup = Callable[[Path, dict[str, str], FakeLLM], None]
CITATION_VERDICTS = {      # the `local` seat's answers to the citation example, by a phrase of the claim
    "no government would be necessary": "MISLEADING",
    "Each senator is powerful": "INSUFFICIENT",
}


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def no_model(root: Path, env: dict[str, str], fake: FakeLLM) -> None:
    """The `local` seat's server is down: its URL refuses connections."""
    env["LOCAL_LLM_BASE_URL"] = f"http://localhost:{_closed_port()}/v1"


def citation_answer(verdict: str) -> str:
    return json.dumps({"verdict": verdict, "substantive_quote": verdict != "INSUFFICIENT",
                       "quote_in_context": verdict != "MISLEADING", "supports_claim": verdict == "VALID",
                       "reason": f"scripted {verdict.lower()} answer"})


def local_model(root: Path, env: dict[str, str], fake: FakeLLM) -> None:
    """A model at LOCAL_LLM_BASE_URL answering the citation judge: VALID, but for the claims
    of CITATION_VERDICTS."""
    for phrase, verdict in CITATION_VERDICTS.items():
        fake.script(citation_answer(verdict), contains=phrase)
    fake.script(citation_answer("VALID"))
    env["LOCAL_LLM_BASE_URL"] = fake.url


def _shell(root: Path, env: dict[str, str], command: str) -> None:
    import subprocess
    subprocess.run(["bash", "-c", command], cwd=root, env=env, check=True, capture_output=True, text=True)


def claims_run(root: Path, env: dict[str, str], fake: FakeLLM) -> None:
    """A run of a small `claims` judge over two claims (README: Reading a run's calls)."""
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


def reviewed_run(root: Path, env: dict[str, str], fake: FakeLLM) -> None:
    """A run of the citation example with a local model, and two reviews of it saved as
    `runner view` saves them (README: Reviewing in the browser)."""
    local_model(root, env, fake)
    work = root / "examples" / "citation_judge"
    _shell(work, env, "runner run ../../pipelines/citation_judge.yaml --input report.md --quiet")
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


SETUPS: dict[str, Setup] = {"no_model": no_model, "local_model": local_model, "claims_run": claims_run,
                            "reviewed_run": reviewed_run}
EXAMPLES = [example for path in doc_files() for example in examples(path)]


def test_the_docs_have_console_examples_and_every_setup_they_name_exists():
    assert len(EXAMPLES) >= 5
    named = {name for example in EXAMPLES for name in example.setups}
    assert named <= set(SETUPS), named - set(SETUPS)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.name)
def test_console_example(example: Example, tmp_path: Path, fake_llm: FakeLLM) -> None:
    root = copy_project(tmp_path / "project")
    env = base_environment(tmp_path / "home")
    for name in example.setups:
        SETUPS[name](root, env, fake_llm)
    printed = run_example(example, root, env)
    for command, output in zip(example.commands, printed, strict=True):
        shown, got = normalise("\n".join(command.expected)), normalise(output)
        assert matches(shown, got), _difference(example, command.text, shown, got)


def _difference(example: Example, command: str, shown: list[str], got: list[str]) -> Any:
    return (f"{example.name}: `$ {command}` printed\n" + "\n".join(got) + "\n\nbut the docs show\n"
            + "\n".join(shown))
