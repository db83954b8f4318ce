"""The items of the differential test (tests/test_differential.py): each shipped pipeline's
example with the scripted answers tests/pipelines/test_golden.py records, and an outsider's
judge (a CSV with a `with.types` map, a rule over a typed column, a 3-juror mean vote, a
decide step, one item whose calls fail), each written as a project of its own in tmp; and
that judge over a rougher file (`tickets_rough`: `;`-separated, a juror failing on one item
only, an item failing in a step that calls no model, a row the CSV reader refuses).

A case's models answer either in this process (the scripted model, runner/testing.py) or
over HTTP (the fake server, tests/fakellm.py: for worker processes and Ray, which do not see
the scripted model): the project's pipeline names `scripted/SEAT` or `openai/SEAT` at the
fake server's URL, in the file itself, so that every entry point (serve included, which
takes no `--set` of a model) runs the same file. A case's script answers by model and
prompt, the same rules for either transport."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from test_golden import citation_script, evidence_script, s_example, slide_script, verdict_script

from helpers import copy_example
from runner.inputs import iter_records
from runner.pipeline.loader import load_pipeline
from runner.testing import Reply, Script
from test_citation_judge import SEATS as CITATION_SEATS

REPO = Path(__file__).resolve().parent.parent

# ---- the outsider's judge ------------------------------------------------------------------

TICKETS = """
    version: 1
    name: tickets
    description: Which support tickets to escalate (a judge written outside runner).
    input:
      adapter: csv
      with: {types: {days: integer, urgent: boolean}}
    params:
      escalate_at: 0.5
    models:
    MODELS
    steps:
      - id: age
        uses: compute
        with:
          overdue: "{{ item.days > 30 }}"
          per_day: "{{ (1 / item.days) | round(3) }}"
      - id: jury
        uses: jury
        with:
          models: [j1, j2, j3]
          prompt: "Ticket {{ item.id }}: {{ item.text }} (open {{ item.days }} days, urgent: {{ item.urgent }}). Severity from 0 to 1?"
          output_schema: severity.schema.json
          vote: {field: score, method: mean}
      - id: unjudged
        uses: fail
        if: "steps.jury.valid_votes == 0"
        with: {message: "no juror answered ticket {{ item.id }}"}
      - id: decide
        uses: decide
        with:
          rules:
            - {when: "steps.age.overdue and item.urgent", verdict: ESCALATE}
            - {when: "steps.jury.score >= params.escalate_at", verdict: ESCALATE}
            - {verdict: KEEP}
    output:
      id: "{{ item.id }}"
      days: "{{ item.days }}"
      urgent: "{{ item.urgent }}"
      overdue: "{{ steps.age.overdue }}"
      severity: "{{ steps.jury.score }}"
      verdict: "{{ steps.decide.verdict }}"
    summary:
      count_by: verdict
      rates: {kept: "{{ result.verdict | default('') == 'KEEP' }}"}
    probes:
      text_case:
        description: The ticket's text with some words in another case.
        case: {field: text}
        expect: unchanged
    """
SEVERITY = {"type": "object", "required": ["score"],
            "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}}}
# id, text, days, urgent (as the CSV writes it), and each juror's score (None: that juror's or
# every call fails)
Row = tuple[str, str, int | str, str, tuple[float | None, ...] | None]
TICKET_ROWS: list[Row] = [
    ("T1", "Refund not received", 45, "true", (0.9, 0.8, 0.7)),      # overdue and urgent: escalated
    ("T2", "Password reset", 3, "false", (0.2, 0.3, 0.1)),           # mean 0.2: kept
    ("T3", "Checkout broken", 12, "yes", (0.9, 0.6, 0.6)),           # mean 0.7: escalated
    ("T4", "Invoice question", 31, "no", None),                      # every juror's call fails: an error
]
ROUGH_ROWS: list[Row] = [
    *TICKET_ROWS,
    ("T6", "Login loop, again", 40, "yes", (0.1, None, 0.9)),     # j2's call fails: the mean of two, escalated
    ("T7", "Zero day", 0, "no", (0.5, 0.5, 0.5)),                 # 1 / days fails in `compute`: an error, no call
    ("T8", "Bad row", "abc", "no", None),                         # not an integer: the reader's error
]


def ticket_csv(case: str) -> str:
    if case == "tickets_rough":
        return "id;text;days;urgent\n" + "".join(f"{i};{text};{days};{urgent}\n" for i, text, days, urgent, _ in ROUGH_ROWS)
    rows = TICKET_ROWS
    if case == "tickets_all_failing":          # two tickets, both failing
        rows = [*[row for row in TICKET_ROWS if row[4] is None], ("T5", "Login loop", 40, "yes", None)]
    return "id,text,days,urgent\n" + "".join(f"{i},{text},{days},{urgent}\n" for i, text, days, urgent, _ in rows)


def ticket_script(script: Script) -> None:
    for ticket, _, _, _, scores in ROUGH_ROWS:
        for juror, score in zip(("j1", "j2", "j3"), scores or (None, None, None), strict=True):
            if score is None:
                script.script(Reply(status=500), model=juror, contains=f"Ticket {ticket}:")
            else:
                script.answer_json({"score": score, "reason": f"{juror} on {ticket}"}, model=juror,
                                   contains=f"Ticket {ticket}:")
    script.script(Reply(status=500), contains="Ticket T")       # every other ticket: each call fails


# ---- the cases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    pipeline: str                                  # pipelines/<this>.yaml in the project
    input: str                                     # the example's input, relative to the project
    seats: dict[str, str]                          # the pipeline's model name -> the name the script answers as
    script: Callable[[Script], None]
    example: str | None = None                     # examples/<this>/ is the project's root (else: the input's folder)
    csv: bool = False                              # the input is CSV (a job uploads it as CSV too)
    probes: bool = False                           # the pipeline declares probes (runner probe runs it)
    rough: bool = False                            # a row its reader refuses: no record to send as JSON
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)     # more settings of a seat

    def records(self, root: Path) -> list[Any]:
        """The input as JSON records (what /judge and a JSON lines upload send): read by the
        pipeline's own input adapter with its options (a CSV's rows with their declared types)."""
        spec = load_pipeline(root / "pipelines" / f"{self.pipeline}.yaml").input
        records = iter_records(spec.adapter, root / self.input, spec.options)
        return [record.value for record in records]


def seat(model: str, url: str | None, **more: Any) -> dict[str, Any]:
    """A model of the pipeline as the case's transport answers it, without limits (a probe's
    copies would spend the citation judge's 20 requests a day of gemini before its originals)."""
    where = {"model": f"openai/{model}", "api_base": url, "batch_poll_seconds": 0.02} if url else {"model": f"scripted/{model}", "api_base": None}
    return {**where, "api_key": None, "enabled": True, "retries": 0, "backoff": 0.01, "limits": {}, **more}


CASES = [
    Case("citation_judge", "citation_judge", "report.md", dict(CITATION_SEATS), citation_script,
         example="citation_judge", probes=True),
    Case("citation_judge_strict", "citation_judge_strict", "report.md", dict(CITATION_SEATS), citation_script,
         example="citation_judge"),
    Case("deep_judgment", "deep_judgment", "deep_judgment/input.json", {"parser": "parser"}, s_example, probes=True),
    Case("evidence_judge", "evidence_judge", "evidence_judge/input.json", {"judge": "judge"}, evidence_script),
    Case("slide_judge", "slide_judge", "input.json", {"judge": "judge"}, slide_script, example="slide_judge"),
    Case("verdict_analyzer", "verdict_analyzer", "verdict_analyzer/input.jsonl", {"analyst": "analyst"},
         verdict_script, probes=True),
    Case("tickets", "tickets", "tickets.csv", {"j1": "j1", "j2": "j2", "j3": "j3"}, ticket_script, csv=True,
         probes=True),
    Case("tickets_all_failing", "tickets", "tickets.csv", {"j1": "j1", "j2": "j2", "j3": "j3"}, ticket_script,
         csv=True, probes=True),
    Case("tickets_rough", "tickets", "tickets.csv", {"j1": "j1", "j2": "j2", "j3": "j3"}, ticket_script,
         csv=True, probes=True, rough=True),
]
BY_NAME = {case.name: case for case in CASES}


def write_project(case: Case, root: Path, url: str | None) -> Path:
    """The case's project in `root` (made here), its models answering at `url` (the fake
    server) or in this process (None); returns the pipeline's path."""
    if case.example:
        copy_example(REPO / "examples" / case.example, root, dirs_exist_ok=True)
    else:
        root.mkdir(parents=True, exist_ok=True)
    for folder in ("pipelines", "prompts", "schemas", "probes"):
        (root / folder).mkdir(exist_ok=True)
    models = {name: seat(model, url, **case.extra.get(name, {})) for name, model in case.seats.items()}
    if case.pipeline == "tickets":
        text = textwrap.dedent(TICKETS).lstrip("\n")
        if case.name == "tickets_rough":
            text = text.replace("with: {types:", "with: {delimiter: \";\", types:")
        block = yaml.safe_dump(models, sort_keys=False, default_flow_style=True, width=400)
        (root / "pipelines" / "tickets.yaml").write_text(
            text.replace("MODELS\n", textwrap.indent(block, "  ")), encoding="utf-8")
        (root / "schemas" / "severity.schema.json").write_text(json.dumps(SEVERITY), encoding="utf-8")
        (root / "tickets.csv").write_text(ticket_csv(case.name), encoding="utf-8")
        return root / "pipelines" / "tickets.yaml"
    for folder in ("prompts", "schemas", "probes"):
        copy_example(REPO / folder, root / folder, dirs_exist_ok=True)
    for source in (REPO / "pipelines").glob("*.yaml"):
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
        if "models" in data:        # every seat of a shipped pipeline answered by the case's transport
            data["models"] = {name: {**spec, **models.get(name, seat("unused", url))}
                              for name, spec in data["models"].items()}
        (root / "pipelines" / source.name).write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True),
                                                      encoding="utf-8")
    if not case.example:
        target = root / case.input
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "examples" / case.input, target)
    return root / "pipelines" / f"{case.pipeline}.yaml"
