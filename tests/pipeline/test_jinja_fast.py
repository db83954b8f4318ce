"""jinja_fast renders and evaluates as Jinja does, from a context like Jinja's own."""

from __future__ import annotations

import jinja2
import pytest

from runner.pipeline.jinja_fast import _context, evaluate, generate
from runner.pipeline.templating import make_environment

SCOPE = {"item": {"n": 3, "name": "a"}, "steps": {"s": {"ok": True}}, "params": {"k": 2}}


def test_the_context_is_the_one_jinja_makes():
    env = make_environment()
    template = env.from_string("{{ item.n }}")
    ours, theirs = _context(template, SCOPE), template.new_context(dict(SCOPE))     # as render() makes it
    assert type(ours) is type(theirs)
    assert dict(ours.parent) == {**dict(template.globals), **SCOPE}
    assert ours.globals_keys == theirs.globals_keys == set(template.globals)
    assert (ours.name, ours.blocks, ours.vars, ours.exported_vars) == \
        (theirs.name, theirs.blocks, theirs.vars, theirs.exported_vars)
    assert ours.get_all() == theirs.get_all()
    assert ours.eval_ctx.__dict__ == theirs.eval_ctx.__dict__
    assert ours.eval_ctx is not _context(template, SCOPE).eval_ctx        # never shared between renders


@pytest.mark.parametrize("expression", [
    "item.n * params.k", "(none or steps.s).ok", "range(item.n) | list", "item.name ~ '!'",
    "{'a': item.n, 'b': [params.k]}", "none if item.n > 2 else 1"])
def test_expressions_evaluate_as_jinja_evaluates_them(expression):
    env = make_environment()
    compiled = env.compile_expression(expression, undefined_to_none=False)
    assert evaluate(compiled, SCOPE) == compiled(**SCOPE)


@pytest.mark.parametrize("source", [
    "{% set x = item.n %}{{ x }} {{ self._TemplateReference__context.name }}",
    "{% block b %}{{ item.name }}{% endblock %} {{ self.b() }}",
    "{% for i in range(params.k) %}{{ loop.index }}{{ cycler('a', 'b').next() }}{% endfor %}",
    "{{ namespace(v=item.n).v }} {{ item.name | upper }}"])
def test_templates_render_as_jinja_renders_them(source):
    env = make_environment()
    template = env.from_string(source)
    try:
        expected = template.render(**SCOPE)
    except jinja2.exceptions.SecurityError as exc:      # the sandbox refuses both alike
        with pytest.raises(type(exc)):
            "".join(generate(template, SCOPE))
        return
    assert "".join(generate(template, SCOPE)) == expected
