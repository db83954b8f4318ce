"""The values a pipeline's verdict (the `summary.count_by` output field) can take, when they
are few and known before the run: an answer schema's enum (with a jury's on_tie and
on_all_failed), a decide step's literal verdicts, the literals of a conditional. Feedback
checks a label against them (runner/stores/reviews.py); run.json keeps them
(`pipeline.verdicts`) for `runner view` and `runner feedback`; validate refuses a probe that
expects the verdict not to become a value it can never take. None when they are open (a
free-text or numeric verdict)."""

from __future__ import annotations

from runner.checks.checker import Checker
from runner.checks.static_values import verdicts_of
from runner.pipeline.model import Pipeline
from runner.pipeline.step_catalog import StepCatalog


def verdict_values(pipeline: Pipeline) -> list[str] | None:
    checker = Checker(pipeline.located, StepCatalog.builtin(), pipeline.project_dir)
    checker.collect_ids(pipeline.located.data["steps"], ("steps",))
    return verdicts_of(pipeline.located.data, checker.text.resolver)
