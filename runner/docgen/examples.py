"""One example per filter, test, global and name in scope: the page shows them, and a test
evaluates each checked one in the real sandbox, so an example that stops being true fails.

And the page's whole-pipeline examples, read from features.yaml beside this module: each
language feature as the files a project holds, the records it runs on and the results it gives.
The tests write each into a project, validate and run it (a scripted model answering where it
calls one) and compare the results, so every example on the page holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Example:
    expression: str                  # a Jinja expression, shown as {{ expression }}
    result: Any = None               # what it yields (checked by tests/test_docgen.py)
    checked: bool = True             # False: the result varies (time, randomness): shown as "e.g."
    note: str = ""                   # what it does, when the function has no docstring


FILTERS: dict[str, Example] = {
    # runner's own
    "normalize": Example("'  Straße  IS ' | normalize", "strasse is"),
    "normalize_html": Example("'<p> A </p>  <!-- x --> <b>B</b>' | normalize_html", "<p> a </p><b>b</b>"),
    "sha256": Example("'abc' | sha256 | truncate(8, true, '')", "ba7816bf"),
    "regex_findall": Example(r"'Email 3 and email 12' | regex_findall('email\\s+(\\d+)', true)", ["3", "12"]),
    "regex_search": Example(r"'Q3 revenue: 8.1M' | regex_search('(\\d+\\.\\d+)M')", "8.1"),
    "clamp": Example("1.7 | clamp", 1.0),
    "tojson": Example("{'a': 'é'} | tojson", '{"a": "é"}'),
    "fields_schema": Example("{'ok': 'bool'} | fields_schema(false)",
                             {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}),
    "dict_from": Example("[{'k': 'a', 'v': 1}, {'k': 'b', 'v': 2}] | dict_from('k', 'v')", {"a": 1, "b": 2}),
    "pick": Example("{'a': 1, 'b': 2, 'c': 3} | pick(['a', 'c'])", {"a": 1, "c": 3}),
    "pluck_values": Example("{'x': {'score': 1}, 'y': 2} | pluck_values('score')", {"x": 1, "y": 2}),
    "mean": Example("[{'x': 1}, {'x': 2}, {'y': 9}] | mean('x')", 1.5),
    "sentences": Example("'The U.S. economy grew 2.5% in Q3. Prices rose.' | sentences",
                         ["The U.S. economy grew 2.5% in Q3.", "Prices rose."]),
    # Jinja's
    "abs": Example("-3 | abs", 3),
    "attr": Example("'text' | attr('upper') is callable", True),
    "batch": Example("[1, 2, 3] | batch(2) | list", [[1, 2], [3]]),
    "capitalize": Example("'hello World' | capitalize", "Hello world"),
    "center": Example("'ab' | center(6)", "  ab  "),
    "count": Example("[1, 2, 3] | count", 3),
    "d": Example("none | d('x', true)", "x"),
    "default": Example("item.missing | default('n/a')", "n/a"),
    "dictsort": Example("{'b': 1, 'a': 2} | dictsort", [("a", 2), ("b", 1)]),
    "e": Example("'<b>' | e", "&lt;b&gt;"),
    "escape": Example("'a & b' | escape", "a &amp; b"),
    "filesizeformat": Example("1500000 | filesizeformat", "1.5 MB"),
    "first": Example("[4, 5] | first", 4),
    "float": Example("'2.5' | float", 2.5),
    "forceescape": Example("'<i>' | forceescape", "&lt;i&gt;"),
    "format": Example("'%.2f' | format(0.456)", "0.46"),
    "groupby": Example("[{'k': 'a'}, {'k': 'b'}, {'k': 'a'}] | groupby('k') | map('first') | list", ["a", "b"]),
    "indent": Example("'a\\nb' | indent(2)", "a\n  b"),
    "int": Example("'42' | int", 42),
    "items": Example("{'a': 1} | items | list", [("a", 1)]),
    "join": Example("['a', 'b'] | join(', ')", "a, b"),
    "last": Example("[4, 5] | last", 5),
    "length": Example("'abc' | length", 3),
    "list": Example("'ab' | list", ["a", "b"]),
    "lower": Example("'ABC' | lower", "abc"),
    "map": Example("[{'n': 1}, {'n': 2}] | map(attribute='n') | list", [1, 2]),
    "max": Example("[3, 9, 4] | max", 9),
    "min": Example("[3, 9, 4] | min", 3),
    "pprint": Example("{'a': 1} | pprint", "{'a': 1}"),
    "random": Example("[1, 2, 3] | random", 2, checked=False),
    "reject": Example("[1, 2, 3, 4] | reject('even') | list", [1, 3]),
    "rejectattr": Example("[{'ok': true}, {'ok': false}] | rejectattr('ok') | list", [{"ok": False}]),
    "replace": Example("'a-b-c' | replace('-', ' ')", "a b c"),
    "reverse": Example("[1, 2, 3] | reverse | list", [3, 2, 1]),
    "round": Example("2.456 | round(1)", 2.5),
    "safe": Example("'<b>' | safe", "<b>"),
    "select": Example("[1, 5, 9] | select('>', 4) | list", [5, 9]),
    "selectattr": Example("[{'ok': true}, {'ok': false}] | selectattr('ok') | list", [{"ok": True}]),
    "slice": Example("[1, 2, 3] | slice(2) | list", [[1, 2], [3]]),
    "sort": Example("[3, 1, 2] | sort", [1, 2, 3]),
    "string": Example("12 | string", "12"),
    "striptags": Example("'<p>Hi <b>there</b></p>' | striptags", "Hi there"),
    "sum": Example("[1, 2, 3] | sum", 6),
    "title": Example("'the federalist papers' | title", "The Federalist Papers"),
    "trim": Example("'  a  ' | trim", "a"),
    "truncate": Example("'a long sentence here' | truncate(9, true, '...', 0)", "a long..."),
    "unique": Example("[1, 2, 1] | unique | list", [1, 2]),
    "upper": Example("'abc' | upper", "ABC"),
    "urlencode": Example("'a b&c' | urlencode", "a%20b%26c"),
    "urlize": Example("'see https://example.com' | urlize",
                      'see <a href="https://example.com" rel="noopener">https://example.com</a>'),
    "wordcount": Example("'three short words' | wordcount", 3),
    "wordwrap": Example("'aaa bbb' | wordwrap(3)", "aaa\nbbb"),
    "xmlattr": Example("{'id': 'x'} | xmlattr", ' id="x"'),
}

TESTS: dict[str, Example] = {
    "odd": Example("3 is odd", True),
    "even": Example("4 is even", True),
    "divisibleby": Example("9 is divisibleby(3)", True),
    "defined": Example("item.quote is defined", True),
    "undefined": Example("item.missing is undefined", True),
    "filter": Example("'sentences' is filter", True),
    "test": Example("'even' is test", True),
    "none": Example("none is none", True),
    "boolean": Example("true is boolean", True),
    "false": Example("false is false", True),
    "true": Example("true is true", True),
    "integer": Example("3 is integer", True),
    "float": Example("3.0 is float", True),
    "lower": Example("'abc' is lower", True),
    "upper": Example("'ABC' is upper", True),
    "string": Example("'a' is string", True),
    "mapping": Example("{} is mapping", True),
    "number": Example("1.5 is number", True),
    "sequence": Example("[1] is sequence", True),
    "iterable": Example("'ab' is iterable", True),
    "callable": Example("now is callable", True),
    "sameas": Example("none is sameas none", True),
    "escaped": Example("'<b>' | e is escaped", True),
    "in": Example("'b' is in ['a', 'b']", True),
    "==": Example("[1, 2, 1] | select('==', 1) | list", [1, 1]),
    "!=": Example("[1, 2, 1] | select('!=', 1) | list", [2]),
    ">": Example("[1, 5] | select('>', 2) | list", [5]),
    ">=": Example("[1, 5] | select('>=', 5) | list", [5]),
    "<": Example("[1, 5] | select('<', 2) | list", [1]),
    "<=": Example("[1, 5] | select('<=', 1) | list", [1]),
}

GLOBALS: dict[str, Example] = {
    "range": Example("range(3) | list", [0, 1, 2], note="The numbers from 0 (or start) up to stop, as Python's "
                                                         "range (at most 100,000 in the sandbox)."),
    "dict": Example("dict(a=1)", {"a": 1}, note="A mapping from keyword arguments."),
    "lipsum": Example("lipsum(1, false, 3, 5)", "Lorem ipsum dolor.", checked=False),
    "cycler": Example("cycler('odd', 'even').next()", "odd"),
    "joiner": Example("joiner(', ')()", ""),
    "namespace": Example("namespace(total=1).total", 1),
    "quote_match": Example("quote_match('made to counteract', 'Ambition must be made to counteract ambition').passed",
                           True, note="The quote matcher of the quote_match step on a text: passed, score, "
                                      "status, flags, reason."),
    "now": Example("now()", "2026-11-24T06:00:00+00:00", checked=False),
    "uuid": Example("uuid()", "3f2b8c0e5d6a4f1b9c7e2a1d0b4c6e8f", checked=False,
                    note="A random 32-character hex id (uuid4)."),
}

# The names templates see, where, and an example. tests/test_docgen.py checks that every
# name the loader and the steps declare is here.
NAMESPACES: dict[str, tuple[str, str, str]] = {
    "item": ("steps, output, memo", "the input record this item came from",
             "{{ item.quote | default(item.claim) }}"),
    "params": ("everywhere", "the pipeline's `params:` after every `--set params.NAME=VALUE`",
               "{{ params.quote_threshold }}"),
    "steps": ("steps, output, memo", "the results of earlier steps by id (a skipped step: the empty value of its "
              "result; null when the item stopped before it)",
              "{{ steps.match.passed }}"),
    "env": ("everywhere", "the environment variables the pipeline lists under `env:`, no others",
            "{{ env.LOCAL_LLM_BASE_URL | default('http://localhost:1234/v1') }}"),
    "run": ("everywhere", "the run: pipeline name, input path, start time", "{{ run.pipeline }}"),
    "values": ("a compute step's own `with:`", "the names the same compute step defined above this one",
               "{{ values.size * 2 }}"),
    "foreach": ("a foreach step's sub-steps", "the element's position: index (0-based) and length",
                "{{ foreach.index + 1 }} of {{ foreach.length }}"),
    "loop": ("a loop step's sub-steps", "index (1-based), previous (the last iteration's results), history, max",
             "{{ loop.previous.ask.output.reason if loop.previous else '' }}"),
    "excerpts": ("an excerpts step's sub-steps (its re-ask)", "attempt (2 at the first re-ask), rejected (the last "
                 "try's failed candidates: text, reason, similarity_score)",
                 "{% for failed in excerpts.rejected %}- {{ failed.text }}: {{ failed.reason }}{% endfor %}"),
    "error": ("a step's `default:` (with `on_error: default`)", "the message of the failure it stands in for",
              "{message: '{{ error }}', failed: true}"),
    "duration_ms": ("output", "the item's run time in milliseconds, known once its steps are done",
                    "{{ duration_ms }}"),
    "llm_calls": ("output", "the LLM calls the item's steps made (a re-ask or a repair is one more; an answer from the "
                            "cache counts), known once its steps are done", "{{ llm_calls }}"),
    "result": ("summary (rates), memo", "one item's result (its output fields)", "{{ result.verified }}"),
    "results": ("summary", "every item's result", "{{ results | selectattr('verified') | list | length }}"),
    "counts": ("summary", "the count of each value of `summary.count_by`", "{{ counts.get('VALID', 0) }}"),
    "total": ("summary", "the number of items", "{{ total }}"),
    "errors": ("summary", "the number of items with an error", "{{ total - errors }}"),
}
# Names a pipeline chooses itself.
CHOSEN_NAMES: dict[str, tuple[str, str, str]] = {
    "foreach `as:`": ("a foreach step's sub-steps: the current element", "{{ table.file }}", "as: table"),
    "input `parent_as:`": ("everywhere an item is seen: the record an exploded item came from",
                           "{{ batch.actual_batch_size }}", "parent_as: batch"),
    "input `namespaces:`": ("everywhere an item is seen: each named field of the record (an absent one an empty "
                            "mapping), e.g. an OpenAI Evals row's item and sample",
                            "{{ sample.output_text }}", "namespaces: [item, sample]"),
    "summary fields and rates": ("later summary entries and assessment rules: their values", "{{ analyzed }}",
                                 "fields: {analyzed: ...}"),
}


@dataclass(frozen=True)
class Feature:
    title: str
    text: str
    files: dict[str, str]                  # path in the project -> text; the first is the one run
    records: list[dict[str, Any]]
    results: list[dict[str, Any]]           # the output fields each record gives
    answers: tuple[str, ...] = ()           # what the model answers, in order (a pipeline that calls one)
    extra: dict[str, str] = field(default_factory=dict)   # files the run needs but the page does not show


FEATURES = [Feature(**{**entry, "answers": tuple(entry.get("answers", ()))})
            for entry in yaml.safe_load((Path(__file__).parent / "features.yaml").read_text(encoding="utf-8"))]
