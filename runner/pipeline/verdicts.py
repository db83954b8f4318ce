"""The values a pipeline's verdict (the `summary.count_by` output field) can take, when they
are few and known before the run: an answer schema's enum (with a jury's on_tie and
on_all_failed), a decide step's literal verdicts, the literals of a conditional. Feedback
checks a label against them; run.json keeps them (`pipeline.verdicts`) for `runner view` and
`runner feedback`. None when they are open (a free-text or numeric verdict)."""

from __future__ import annotations

from runner.pipeline.catalog import StepCatalog
from runner.pipeline.loader import Checker
from runner.pipeline.model import Pipeline


def verdict_values(pipeline: Pipeline) -> list[str] | None:
    field = pipeline.summary.get("count_by")
    template = pipeline.output.get(field) if isinstance(field, str) else None
    if template is None:
        return None
    checker = Checker(pipeline.located, StepCatalog.builtin(), pipeline.project_dir)
    checker.collect_ids(pipeline.located.data["steps"], ("steps",))
    known = checker.text.resolver.of_template(template, {"steps", "params"})
    if known is None or known.values is None:
        return None
    return list(dict.fromkeys(str(value) for value in known.values if value is not None))
