"""Expressions: native values, mixed strings, bare conditions, the sandbox, env scoping."""

from __future__ import annotations

import jinja2
import pytest

from runner.engine.execute import Runtime
from runner.pipeline.loader import load_pipeline
from runner.runs.request import RunOptions
from runner.templating.filters import normalize_html, regex_search, sha256
from runner.templating.sandbox import Renderer


@pytest.fixture
def renderer() -> Renderer:
    return Renderer()


SCOPE = {"item": {"n": 3, "name": "Ada", "tags": ["a", "b"]}, "params": {"t": 0.5}, "steps": {"s": None}}


@pytest.mark.parametrize("template,expected", [
    ("{{ item.n }}", 3),
    ("{{ item.n > 2 }}", True),
    ("{{ item.tags }}", ["a", "b"]),
    ("{{ {'a': item.n} }}", {"a": 3}),
    ("{{ [item.n, 1] | min }}", 1),
    ("{{ params.t * 2 if item.n > 2 else 0 }}", 1.0),
    ("  {{ item.n }}  ", 3),
    ("{{ none }}", None),
    ("n={{ item.n }}", "n=3"),
    ("{{ item.n }} and {{ item.n }}", "3 and 3"),
    ("plain text", "plain text"),
    ("{{ steps.s.passed | default(false) }}", False),
    ("{{ 0.94 | clamp(0, 0.9) }}", 0.9),
    ("{{ 'x<y' | tojson }}", '"x<y"'),
])
def test_render_values(renderer, template, expected):
    assert renderer.value(template, SCOPE) == expected


def test_nested_structures_render(renderer):
    assert renderer.value({"a": ["{{ item.n }}", {"b": "{{ item.name }}!"}]}, SCOPE) == {"a": [3, {"b": "Ada!"}]}


@pytest.mark.parametrize("expr,expected", [
    ("item.n > 2", True), ("not steps.s", True), ("{{ item.n == 4 }}", False), (True, True), (False, False),
])
def test_bare_conditions(renderer, expr, expected):
    assert renderer.condition(expr, SCOPE) is expected


@pytest.mark.parametrize("template", [
    "{{ item.__class__ }}",
    "{{ item.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ item.name.__class__.__mro__ }}",
])
def test_sandbox_refuses_internals(renderer, template):
    with pytest.raises((jinja2.exceptions.SecurityError, jinja2.UndefinedError)):
        renderer.value(template, SCOPE)


def test_undefined_name_is_an_error_not_empty(renderer):
    with pytest.raises(jinja2.UndefinedError):
        renderer.value("{{ item.missing }}", SCOPE)
    with pytest.raises(jinja2.UndefinedError):
        renderer.value("x {{ item.missing }} y", SCOPE)


def test_input_data_is_never_rendered(renderer):
    scope = {"item": {"text": "{{ 7 * 7 }}"}}
    assert renderer.value("{{ item.text }}", scope) == "{{ 7 * 7 }}"
    assert renderer.value("say: {{ item.text }}", scope) == "say: {{ 7 * 7 }}"


def test_only_declared_env_vars_are_visible(project, monkeypatch):
    monkeypatch.setenv("DECLARED_VAR", "yes")
    monkeypatch.setenv("SECRET_UNDECLARED", "no")
    path = project.pipeline("""
        version: 1
        name: x
        env: [DECLARED_VAR, ABSENT_VAR]
        steps: [{id: a, uses: compute, with: {v: 1}}]
        """)
    runtime = Runtime.create(load_pipeline(path), RunOptions())
    assert runtime.env == {"DECLARED_VAR": "yes"}
    assert runtime.renderer.value("{{ env.ABSENT_VAR is defined }}", {"env": runtime.env}) is False
    assert "SECRET_UNDECLARED" not in runtime.env


def test_filters():
    assert normalize_html("<div>\n  <!-- c -->  <P>Hi  There</P></div>") == "<div><p>hi there</p></div>"
    assert sha256("a") == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
    assert regex_search("Email 12 here", r"email\s+(\d+)", True) == "12"
    renderer = Renderer()
    assert renderer.value("{{ 'Email 3, email 40' | regex_findall('(?i)email\\\\s+(\\\\d+)') }}", {}) == ["3", "40"]
    assert renderer.value("{{ '  A  b ' | normalize }}", {}) == "a b"


class Record:
    verdict = "VALID"
    _hidden = "secret"


@pytest.mark.parametrize("obj,attribute", [
    ({"claim": "c"}, "claim"), ({"claim": "c"}, "missing"), ({"items": 5}, "items"), ({"get": 1}, "get"),
    ({"__class__": 1}, "__class__"), ({}, "__init__"), ({"mro": 1}, "mro"), ({1: "x"}, "1"),
    (__import__("collections").OrderedDict(a=1), "a"), (__import__("collections").defaultdict(int), "nope"),
    ({"a": None}, "a"), (Record(), "verdict"), (Record(), "_hidden"), ("text", "upper"), ([1], "append"),
])
@pytest.mark.parametrize("read_only", [False, True])
def test_attribute_lookups_answer_what_jinjas_sandbox_answers(obj, attribute, read_only):
    """The sandbox reads a plain dict's key without asking the dict for an attribute first;
    the answer must be the one Jinja's own lookup gives, whatever the name."""
    from jinja2.sandbox import SandboxedEnvironment

    env = Renderer(read_only=read_only).env

    def outcome(value):
        if isinstance(value, jinja2.Undefined):
            try:
                str(value)
            except jinja2.TemplateError as exc:      # undefined, or refused by the sandbox
                return ("undefined", type(value).__name__, type(exc).__name__, str(exc))
        return ("value", value if not callable(value) else getattr(value, "__name__", "callable"))

    assert outcome(env.getattr(obj, attribute)) == outcome(SandboxedEnvironment.getattr(env, obj, attribute))


class _Dict(dict):
    pass


class _Text(str):
    pass


@pytest.mark.parametrize("build, fails", [
    (lambda u: {"a": [1, 2.0, None, True, "x"]}, False),
    (lambda u: {"a": [1, {"b": (2, u)}]}, True),           # deep inside a tuple in a dict in a list
    (lambda u: [_Dict(x=u)], True),                          # a dict subclass is looked into
    (lambda u: (_Text("t"), {"k": [u]}), True),
])
def test_an_undefined_anywhere_inside_a_value_fails_it(build, fails):
    renderer = Renderer()
    value = build(renderer.env.undefined(name="missing"))
    if fails:
        with pytest.raises(jinja2.UndefinedError, match="missing"):
            renderer.value("{{ v }}", {"v": value})
    else:
        assert renderer.value("{{ v }}", {"v": value}) is value


def test_a_list_holding_itself_is_checked_once():
    loop: list[object] = [1, "x"]
    loop.append(loop)
    assert Renderer().value("{{ v }}", {"v": loop}) is loop


@pytest.mark.parametrize(("expression", "expected"), [
    ("[1, 2, 4] | mean", 7 / 3),
    ("[1, 2, 4] | mean(digits=2)", 2.33),
    ("rows | mean('x')", 2.0),                      # rows without x, or with a non-number, are left out
    ("rows | mean('flag')", None),                  # booleans are not averaged (a rate says its n)
    ("[] | mean", None),
])
def test_mean_averages_the_numbers_there_are(expression, expected):
    rows = [{"x": 1}, {"x": 3}, {"y": 5}, {"x": None}, {"x": "7"}, {"flag": True}]
    assert Renderer().value("{{ " + expression + " }}", {"rows": rows}) == pytest.approx(expected)


def test_one_text_compiled_once_still_renders_with_each_environments_own_prompts(tmp_path):
    """The code of a template is shared by every environment of a process; what it includes
    and the values it reads are each renderer's own."""
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "part.j2").write_text(f"{name} {{{{ n }}}}", encoding="utf-8")
    first, second = Renderer(tmp_path / "one"), Renderer(tmp_path / "two")
    assert first.value("{% include 'part.j2' %}", {"n": 1}) == "one 1"
    assert second.value("{% include 'part.j2' %}", {"n": 2}) == "two 2"
    assert first.condition("n > 1", {"n": 1}) is False and second.condition("n > 1", {"n": 2}) is True
    (tmp_path / "one" / "part.j2").write_text("edited {{ n }}", encoding="utf-8")
    assert Renderer(tmp_path / "one").value("{% include 'part.j2' %}", {"n": 3}) == "edited 3"
    with pytest.raises(jinja2.exceptions.SecurityError):
        Renderer(read_only=True).value("{{ item.update({'a': 1}) }}", {"item": {}})
    assert Renderer().value("{{ item.update({'a': 1}) or item }}", {"item": {}}) == {"a": 1}
