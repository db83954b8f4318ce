"""Every whole-pipeline example of docs/pipeline-language.md validates and, run on the
records the page shows, gives the results it shows."""

from __future__ import annotations

import pytest

from fakellm import Reply
from helpers import run, write_json
from runner.docgen.examples import FEATURES, Feature


@pytest.mark.parametrize("feature", FEATURES, ids=[f.title for f in FEATURES])
def test_the_example_runs_as_the_page_says(feature: Feature, project, fake_llm, monkeypatch):
    monkeypatch.setenv("JUDGE_URL", fake_llm.url)
    if feature.answers:
        fake_llm.script(*(Reply(answer) for answer in feature.answers))
    for path, text in {**feature.files, **feature.extra}.items():
        project.file(path, text)
    main = project.root / next(iter(feature.files))
    outcome = run(main, write_json(project.root / "in.json", feature.records))
    got = [{key: result.get(key) for key in expected} for result, expected in zip(outcome.results, feature.results,
                                                                                  strict=True)]
    assert got == feature.results
    assert not any("error" in result for result in outcome.results)
