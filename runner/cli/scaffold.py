"""`runner init NAME`: the files of a new judge in a project, ready to validate, render and run.

A pipeline (CSV input, one param declared once, one model seat, one `llm` step, a verdict
from the answer's score, a pass rate), its prompt, its answer schema, five example items and
their labels. Nothing is written when one of the files already exists."""

from __future__ import annotations

from pathlib import Path

from runner.errors import RunnerError
from runner.fileio import atomic_write
from runner.pipeline.files import PIPELINE_NAME

PIPELINE = """\
version: 1
name: __NAME__
description: >-
  Judge whether each answer answers its question correctly (made by `runner init`: edit the
  prompt, the answer schema and the params to your task).
input:
  adapter: csv                     # one item per row: id, question, answer
params:
  pass_score:
    default: 0.5
    type: number
    minimum: 0
    maximum: 1
    description: The judge's score from which an answer passes.
models:
  judge:                           # point it at your model: runner run ... --model judge=PROVIDER/MODEL[@URL]
    model: openai/gpt-4o-mini
    temperature: 0
steps:
  - id: judge
    uses: llm
    with:
      model: judge
      prompt: __NAME__.j2
      output_schema: __NAME__.schema.json
output:
  id: "{{ item.id }}"
  verdict: "{{ 'PASS' if steps.judge.output.score >= params.pass_score else 'FAIL' }}"
  score: "{{ steps.judge.output.score }}"
  reason: "{{ steps.judge.output.reason }}"
summary:
  count_by: verdict
  rates:
    pass_rate: "result.verdict == 'PASS'"
  report_columns: [id, verdict, score, reason, error]
  reason_field: reason
"""

PROMPT = """\
You judge whether an answer answers its question correctly and completely.

Question: {{ item.question }}
Answer: {{ item.answer }}

Give a score from 0 (wrong) to 1 (right and complete), and one sentence saying why.
Answer with JSON only: {"score": <number>, "reason": "<one sentence>"}
"""

SCHEMA = """\
{
  "type": "object",
  "additionalProperties": false,
  "required": ["score", "reason"],
  "properties": {
    "score": {"type": "number", "minimum": 0, "maximum": 1},
    "reason": {"type": "string"}
  }
}
"""

ITEMS = """\
id,question,answer
1,What is the capital of France?,Paris
2,How many legs does a spider have?,Six
3,Who wrote "Pride and Prejudice"?,Jane Austen
4,What is the boiling point of water at sea level in Celsius?,100 degrees
5,"Which planet is closest to the Sun, and how long is its year?","Venus, 225 days"
"""

LABELS = """\
id,label
1,PASS
2,FAIL
3,PASS
4,PASS
5,FAIL
"""


def scaffold_files(name: str) -> dict[str, str]:
    """Project-relative path -> text of each file `runner init NAME` writes."""
    if not PIPELINE_NAME.match(name):
        raise RunnerError(f"runner init {name}: a judge's name is lowercase letters, digits and _, starting with a "
                          f"letter (e.g. answer_judge)")
    texts = {f"pipelines/{name}.yaml": PIPELINE, f"prompts/{name}.j2": PROMPT,
             f"schemas/{name}.schema.json": SCHEMA, f"examples/{name}/items.csv": ITEMS,
             f"examples/{name}/labels.csv": LABELS}
    return {path: text.replace("__NAME__", name) for path, text in texts.items()}


def scaffold(root: Path, name: str) -> list[str]:
    """Write the judge's files under `root`; refuse (naming the file) when any exists, before writing any."""
    files = scaffold_files(name)
    for relative in files:
        if (root / relative).exists():
            raise RunnerError(f"{relative} already exists: runner init writes no file over another "
                              f"(choose another name, or move it)")
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(root / relative, text)
    return list(files)
