"""Record the labelled example's jury answers into labelled/cache, offline, in seconds.

Three jurors (the citation judge's seats `local`, `gemini` and `openai`) answer from the
script below, served by the fake OpenAI-compatible server in tests/fakellm.py. The run goes
through the normal engine and LLM service, so the cache keys are exactly the ones
`runner eval` and `runner sweep` compute; only the transport is re-pointed at the fake
server. Answers are recorded for context_lines 3 and 5 (the prompt shows that context).

    cd examples/citation_judge && python labelled/record_answers.py

The answers are scripted, not real models: they disagree where real jurors tend to
(the `local` seat is the weakest), so per-juror metrics have something to show.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent
REPO = EXAMPLE.parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fakellm import FakeLLM, Reply  # noqa: E402
from runner.api import ItemSource, run_pipeline  # noqa: E402
from runner.inputs.markdown_citations import extract_citations  # noqa: E402
from runner.llm.client.spec import ModelSpec  # noqa: E402
from runner.llm.client.transport import Completion  # noqa: E402
from runner.runs.request import RunOptions  # noqa: E402

PIPELINE = REPO / "pipelines" / "citation_judge.yaml"
SEATS = ("local", "gemini", "openai")
CONTEXT_LINES = (3, 5)
ENABLE_ALL = ["models.gemini.enabled=true", "models.openai.enabled=true"]
# Neither is part of any cache key. Every citation gets its jury, quote found or not, so a
# sweep may also try a quote_threshold below the default.
RECORDING = ["models.gemini.limits.requests_per_day=100000", "params.skip_jury_when_quote_not_found=false"]

V, M, U, N = "VALID", "MISLEADING", "UNSUPPORTED", "INSUFFICIENT"
# citation index -> verdicts of local, gemini, openai; or (text that must be in the prompt,
# verdicts when it is, verdicts when it is not) for quotes whose context decides them.
SCRIPT: dict[int, Any] = {
    1: (V, V, V), 2: (V, V, V), 3: (V, V, V), 4: (V, V, V), 5: (V, V, V), 6: (U, V, V), 7: (V, V, V),
    8: (V, M, V), 9: (V, V, V), 10: (V, V, V), 11: (M, V, V), 12: (V, V, V), 13: (U, V, V), 14: (V, V, V),
    15: (V, V, V), 16: (V, V, V), 17: (V, V, V), 18: (V, V, V), 19: (U, V, V), 20: (V, V, V),
    21: (U, U, U), 22: (V, U, U), 23: (V, V, U), 24: (U, U, U), 25: (M, U, M), 26: (M, U, M), 27: (M, U, M),
    28: (M, U, M), 29: (V, U, M), 30: (V, V, M), 31: (V, M, M), 32: (V, U, U), 33: (V, V, V), 34: (V, V, V),
    35: (V, V, V), 36: (V, M, M), 37: (V, M, M), 38: (V, V, M),
    39: ("Right of the People to alter or to abolish", (M, M, M), (V, V, M)),
    40: ("The Congress shall have Power", (V, M, M), (V, V, M)),
    41: (U, U, U), 42: (U, U, U), 43: (V, U, U), 44: (U, U, U), 45: (M, U, U), 46: (N, N, N), 47: (N, N, U),
}
REASONS = {V: "the quote is in the source and supports the claim",
           M: "the source's context changes the quote's meaning",
           U: "the source does not say what the claim says", N: "the quote is too short to support anything"}


def answer(verdict: str, seat: str) -> str:
    good = verdict == V
    return json.dumps({"verdict": verdict, "substantive_quote": verdict != N, "quote_in_context": verdict != M,
                       "supports_claim": good, "reason": f"{seat}: {REASONS[verdict]}"})


def script(fake: FakeLLM, report: Path, plan_of: Callable[[int], Any]) -> None:
    for citation in extract_citations(report.read_text(encoding="utf-8")):
        marker = f"CLAIM BEING MADE: {citation['claim']}\nQUOTE USED: {citation['quote']}"
        plan = plan_of(citation["index"])
        for number, seat in enumerate(SEATS):
            model = f"scripted-{seat}"
            if isinstance(plan[0], str) and plan[0] not in (V, M, U, N):
                needle, seen, unseen = plan
                fake.script(answer(seen[number], seat), model=model, contains=marker,
                            when=lambda body, n=needle: any(n in str(m.get("content")) for m in body["messages"]))
                fake.script(answer(unseen[number], seat), model=model, contains=marker)
            else:
                fake.script(Reply(answer(plan[number], seat)), model=model, contains=marker)


class FakeServerTransport:
    """Sends every call to the fake server, whatever the seat's real endpoint (which the
    cache key keeps), and names the answering model `scripted-<seat>`."""

    def __init__(self, url: str):
        import httpx
        self.url = url
        self.client = httpx.AsyncClient(timeout=30)

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        body = {**params, "model": f"scripted-{spec.name}", "messages": messages}
        response = (await self.client.post(f"{self.url}/chat/completions", json=body)).json()
        choice = response["choices"][0]
        return Completion(choice["message"]["content"], choice["finish_reason"], response["usage"], 0.0,
                          response["model"])

    async def aclose(self) -> None:
        await self.client.aclose()


async def never_refused(url: str, timeout: float = 3.0) -> bool:
    return False


@contextlib.contextmanager
def routed_to(url: str) -> Iterator[None]:
    """The LLM service's default transport answers from the fake server, and the pre-flight
    connection probe never reports the seats' real endpoints as refused."""
    replacements = {"RoutedTransport": lambda *_: FakeServerTransport(url),     # one transport per model kind
                    "LiteLLMTransport": lambda *_: FakeServerTransport(url),    # (whichever the service uses)
                    "tcp_refused": never_refused}
    modules = [importlib.import_module(name) for name in ("runner.llm.service", "runner.llm.client.sender")
               if importlib.util.find_spec(name) is not None]
    saved = [(m, name, getattr(m, name)) for m in modules for name in replacements if hasattr(m, name)]
    for module, name, _ in saved:
        setattr(module, name, replacements[name])
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def record(cache_dir: Path, work: Path = EXAMPLE, report: str = "labelled/report.md",
           plan_of: Callable[[int], Any] = SCRIPT.__getitem__) -> int:
    """Fill `cache_dir` with every juror answer to `report` (run from `work`); returns the
    number of calls the fake server saw."""
    fake = FakeLLM().start()
    cwd = Path.cwd()
    try:
        script(fake, work / report, plan_of)
        os.chdir(work)
        with tempfile.TemporaryDirectory() as out, routed_to(fake.url):
            for lines in CONTEXT_LINES:
                outcome = run_pipeline(PIPELINE, ItemSource(Path(report)),
                                       RunOptions(cache_dir=cache_dir, out_dir=Path(out)),
                                       [*ENABLE_ALL, *RECORDING, f"params.context_lines={lines}"])
                failed = [r["index"] for r in outcome.results
                          if any(v["error"] for v in (r.get("step_3_semantic") or {}).get("votes", []))]
                if failed:
                    raise SystemExit(f"juror calls failed for citations {failed}: "
                                     f"{outcome.results[failed[0] - 1]['step_3_semantic']['votes']}")
        return len(fake.requests)
    finally:
        os.chdir(cwd)
        fake.stop()


if __name__ == "__main__":
    target = HERE / "cache"
    shutil.rmtree(target, ignore_errors=True)
    calls = record(target)
    print(f"recorded {calls} juror answers into {os.path.relpath(target)}")
