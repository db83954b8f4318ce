"""The whole-pipeline examples of docs/pipeline-language.md: each language feature as the
files a project holds, the records it runs on and the results it gives. The tests write each
example into a project, validate and run it (a scripted model answering where it calls one)
and compare the results, so every example on the page holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MODEL = 'models: {judge: {model: openai/judge, api_base: "{{ env.JUDGE_URL }}", retries: 0}}\nenv: [JUDGE_URL]\n'


JUDGE = """\
version: 1
name: judge
params:
  threshold: {default: 0.8, type: number, minimum: 0, maximum: 1, description: share of the quote found}
steps:
  - id: match
    uses: quote_match
    with: {quote: "{{ item.quote }}", text: "{{ item.text }}", threshold: "{{ params.threshold }}"}
output:
  found: "{{ steps.match.passed }}"
"""


@dataclass(frozen=True)
class Feature:
    title: str
    text: str
    files: dict[str, str]                  # path in the project -> text; the first is the one run
    records: list[dict[str, Any]]
    results: list[dict[str, Any]]           # the output fields each record gives
    answers: tuple[str, ...] = ()           # what the model answers, in order (a pipeline that calls one)
    extra: dict[str, str] = field(default_factory=dict)   # files the run needs but the page does not show


FEATURES = [
    Feature("Parameters declared once",
            "Each param is its value and its type in one place: a mapping holding `default` plus JSON Schema "
            "keywords and a `description`, or a plain value, which declares the type of that value (`0.6` a "
            "number, `2` an integer, `x` a string). The older form (schemas under `params_schema:`) is refused "
            "with the fix. `runner params PIPELINE` lists them; every `--set params.NAME=VALUE`, serve request "
            "and sweep grid value is checked against the type before a run.",
            {"pipelines/judge.yaml": JUDGE},
            [{"quote": "the cat sat", "text": "the cat sat on the mat"}], [{"found": True}]),
    Feature("A variant: `extends:`",
            "A variant names its base (a path relative to the variant) and says only what differs: mappings "
            "merge, lists and scalars replace, steps are patched by `id` (a new step says where it goes with "
            "`after: ID` or `before: ID`; `remove: true` drops one). Each id is named once in a variant's list: "
            "all of a step's changes go in one entry (a second entry for the same id is refused at both places, "
            "as likely a misspelt id). A base may extend another, up to 32 files deep. A wrong value is located "
            "in the file that wrote it; `run.json` records every file the pipeline is made of.",
            {"pipelines/strict.yaml": """\
extends: judge.yaml
params:
  threshold: 0.99
steps:
  - {id: shout, after: match, uses: compute, with: {loud: "{{ item.quote | upper }}"}}
output:
  loud: "{{ steps.shout.loud }}"
""", "pipelines/judge.yaml": JUDGE},
            [{"quote": "the cat sat on a mat", "text": "the cat sat on the mat"}],
            [{"found": False, "loud": "THE CAT SAT ON A MAT"}]),
    Feature("A skipped step reads as the empty value of its result",
            "A step whose `if` is false reads as the empty value of its result shape (a string `\"\"`, a "
            "number 0, a list `[]`, an object its fields' empty values), false in a condition, with "
            "`steps.ID.skipped` true: no guard is needed to read it.",
            {"pipelines/skip.yaml": """\
version: 1
name: skip
steps:
  - {id: match, uses: quote_match, if: "item.quote", with: {quote: "{{ item.quote }}", text: "{{ item.text }}"}}
output:
  score: "{{ steps.match.score }}"
  flags: "{{ steps.match.flags }}"
  skipped: "{{ steps.match.skipped }}"
  checked: "{{ 'yes' if steps.match else 'no' }}"
"""},
            [{"quote": "", "text": "the cat"}], [{"score": 0, "flags": [], "skipped": True, "checked": "no"}]),
    Feature("Failure defaults said once per step type",
            "`defaults:` gives each step type's `on_error` (and `default`, laid over the empty value of the "
            "step's result; a template in it, as here, is of no one type, so a skipped step reads it as "
            "null); a step that says its own wins.",
            {"pipelines/defaults.yaml": """\
version: 1
name: defaults
defaults:
  fail: {on_error: default, default: {refused: true, why: "{{ error }}"}}
steps:
  - {id: positive, uses: fail, if: "item.n < 0", with: {message: "{{ item.n }} is negative"}}
  - {id: small, uses: fail, if: "item.n > 9", on_error: continue, with: {message: "{{ item.n }} is too big"}}
output:
  refused: "{{ steps.positive.refused }}"
  why: "{{ steps.positive.why }}"
  small: "{{ steps.small.error }}"
"""},
            [{"n": -1}, {"n": 1}, {"n": 12}],
            [{"refused": True, "why": "-1 is negative"}, {"refused": False, "why": None},
             {"refused": False, "why": None, "small": "12 is too big"}]),
    Feature("Counters from the engine",
            "Each step that calls models tells how many calls it made (`calls`: a re-ask to repair an "
            "answer is one more) and the attempts they took (`attempts`: retries included, none for a "
            "cached answer); a `foreach` or `loop` counts its sub-steps'.",
            {"pipelines/count.yaml": MODEL + """\
version: 1
name: count
steps:
  - id: ask
    uses: llm
    with: {model: judge, prompt: ask.j2, repair: 1,
           output_schema: {type: object, required: [ok], properties: {ok: {type: boolean}}}}
output:
  ok: "{{ steps.ask.output.ok }}"
  calls: "{{ steps.ask.calls }}"
""", "prompts/ask.j2": "Is {{ item.claim }} fine? Answer {\"ok\": true|false}.\n"},
            [{"claim": "water is wet"}], [{"ok": True, "calls": 2}], answers=("not JSON", '{"ok": true}')),
    Feature("A part: a pipeline run as one step",
            "`uses: pipeline` runs a part: a pipeline file under `pipelines/` that declares typed `inputs:` "
            "(JSON Schema keywords; one without `default` is required), reads them as `inputs.NAME` and "
            "gives its `output:` fields as the step's result. `runner validate` checks the inputs a step "
            "passes like any step's arguments, and the part's own problems in its file.",
            {"pipelines/two_checks.yaml": """\
version: 1
name: two_checks
steps:
  - {id: claim, uses: pipeline, with: {file: parts/found.yaml, inputs: {quote: "{{ item.claim }}"}}}
  - {id: quote, uses: pipeline, with: {file: parts/found.yaml, inputs: {quote: "{{ item.quote }}", threshold: 0.5}}}
output:
  claim_found: "{{ steps.claim.found }}"
  quote_found: "{{ steps.quote.found }}"
""", "pipelines/parts/found.yaml": """\
version: 1
name: found
inputs:
  quote: {type: string, description: the text to look for}
  threshold: {type: number, minimum: 0, maximum: 1, default: 0.9}
steps:
  - id: match
    uses: quote_match
    with: {quote: "{{ inputs.quote }}", text: "{{ item.text }}", threshold: "{{ inputs.threshold }}"}
output:
  found: "{{ steps.match.passed }}"
"""},
            [{"text": "the cat sat on the mat", "claim": "a dog sat on the mat", "quote": "the cat sat"}],
            [{"claim_found": False, "quote_found": True}]),
    Feature("Rows in namespaces, graded without a model",
            "`input.namespaces` reads each record as a mapping of names, each a name of its own in every "
            "template: `[item, sample]` reads OpenAI Evals rows (`{\"item\": ..., \"sample\": ...}`) as they "
            "are (a row without `sample` reads it as an empty mapping). `string_check` and `text_similarity` "
            "grade as OpenAI's graders of those names do, and `formula` combines numbers by an arithmetic "
            "formula, parsed and never eval'd (`runner import openai-evals` writes such pipelines: "
            "docs/openai-evals.md).",
            {"pipelines/graded.yaml": """\
version: 1
name: graded
input: {adapter: json, namespaces: [item, sample]}
steps:
  - id: mentions
    uses: string_check
    with: {input: "{{ sample.output_text }}", reference: "{{ item.answer }}", operation: ilike}
  - id: close
    uses: text_similarity
    with: {input: "{{ sample.output_text }}", reference: "{{ item.answer }}", metric: fuzzy_match, threshold: 0.6}
  - id: overall
    uses: formula
    with: {formula: "0.5 * mentions + 0.5 * close", values: {mentions: "{{ steps.mentions.score }}",
           close: "{{ steps.close.score }}"}, threshold: 0.75}
output:
  mentions: "{{ steps.mentions.passed }}"
  close: "{{ steps.close.score }}"
  overall: "{{ steps.overall.passed }}"
"""},
            [{"item": {"answer": "Jane Austen"}, "sample": {"output_text": "It was jane austen"}}],
            [{"mentions": True, "close": 0.62069, "overall": True}]),
    Feature("Few-shot examples: `examples:`",
            "An `llm` or `jury` step's `examples:` are items with the answer they should get, given to the model "
            "as prior chat turns: each example's `item` rendered with the step's own prompt (the user's turn; "
            "every other name, `params` or earlier steps, reads as for the item judged), then its `answer` (the "
            "assistant's). A list, or a JSONL file of `{item, answer}` (optionally `key`) named relative to the "
            "pipeline file, else to the project folder (inside the project). `runner validate` checks each "
            "answer against the step's answer "
            "schema (an error names the file, line and column); `runner render` shows the turns; they are part "
            "of the cache key; a variant inherits them and replaces them with its own. `runner align` writes "
            "them (docs/align.md).",
            {"pipelines/shots.yaml": MODEL + """\
version: 1
name: shots
steps:
  - id: ask
    uses: llm
    with:
      model: judge
      prompt: "Is this claim supported by the text? Claim: {{ item.claim }} Text: {{ item.text }}"
      output_schema: {type: object, required: [supported], properties: {supported: {type: boolean}}}
      examples: shots.examples.jsonl
output:
  supported: "{{ steps.ask.output.supported }}"
""", "pipelines/shots.examples.jsonl":
                '{"key": "a1", "item": {"claim": "Paris is in Spain", "text": "Paris is in France."}, '
                '"answer": {"supported": false}}\n'},
            [{"claim": "Rome is in Italy", "text": "Rome, Italy's capital."}], [{"supported": True}],
            answers=('{"supported": true}',)),
]
