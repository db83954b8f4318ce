"""`runner eval` on a jury's votes: how correlated the jurors' errors are, the effective
number of independent votes, a warning for a pair that errs together; and the accuracy of
the items whose repeated samples agreed against the others."""

from __future__ import annotations

import json

import pytest

from helpers import run, write_json

# id: label, votes of a, b, c, the jury's stability
ITEMS = {1: ("V", "VVV", 1.0), 2: ("V", "UUV", 1.0), 3: ("U", "UUU", 1.0), 4: ("U", "VVU", 0.6667),
         5: ("V", "VVU", 0.6667), 6: ("U", "UUV", 1.0), 7: ("V", "UUU", 0.6667), 8: ("U", "VVV", 0.5),
         9: ("V", "VVV", 1.0), 10: ("U", "UUU", 1.0)}


@pytest.fixture
def folder(project):
    path = project.pipeline("""
        version: 1
        name: votes
        steps: [{id: c, uses: compute, with: {verdict: "{{ item.verdict }}"}}]
        output:
          id: "{{ item.id }}"
          verdict: "{{ item.verdict }}"
          jury: >-
            {{ {'votes': [{'model': 'a', 'value': item.a}, {'model': 'b', 'value': item.b},
                          {'model': 'c', 'value': item.c}], 'stability': item.stability} }}
        summary: {count_by: verdict}
        """)
    records = [{"id": n, "a": v[0], "b": v[1], "c": v[2], "verdict": max(v, key=v.count), "stability": s}
               for n, (_, v, s) in ITEMS.items()]
    run(path, write_json(project.root / "items.json", records), out="runs/one")
    (project.root / "labels.jsonl").write_text("".join(json.dumps({"id": n, "label": label}) + "\n"
                                                       for n, (label, _, _) in ITEMS.items()))
    return project.root / "runs/one"


def test_jurors_that_err_together_are_named_and_count_for_less(folder, cli):
    result = cli("eval", str(folder), "--labels", "labels.jsonl", "--key", "id", "--truth", "label")
    assert result.exit_code == 0, result.output
    report = json.loads((folder / "eval.json").read_text())
    found = report["jurors"]["independence"]
    by_pair = {" & ".join(p["jurors"]): p for p in found["pairs"]}
    assert by_pair["a & b"]["correlation"] == 1.0 and by_pair["a & b"]["n"] == 10
    errors = sum(votes[0] != label for label, votes, _ in ITEMS.values())
    assert by_pair["a & b"]["errors"] == [errors, errors] == [4, 4]
    r = by_pair["a & c"]["correlation"]
    assert r == by_pair["b & c"]["correlation"] and -1 < r < 1
    mean = round((1.0 + 2 * r) / 3, 4)
    assert found["mean_error_correlation"] == mean
    assert found["effective_votes"] == round(3 / (1 + 2 * max(mean, 0.0)), 2)
    assert "Kish" in found["formula"]
    assert "warning: jurors a and b: their errors correlate 1.0 over 10 item(s)" in result.output
    assert f"juror independence: {found['effective_votes']} effective vote(s) of 3" in result.output
    page = (folder / "eval.md").read_text()
    assert "## Juror independence" in page and "| a & b | 10 | 4 / 4 | 1.000 |" in page


def test_stable_and_unstable_items_are_scored_apart(folder, cli):
    result = cli("eval", str(folder), "--labels", "labels.jsonl", "--key", "id", "--truth", "label")
    report = json.loads((folder / "eval.json").read_text())
    stability = report["stability"]
    assert stability["field"] == "jury.stability"
    def accuracy(stable: bool) -> dict:
        chosen = [(label, votes) for label, votes, s in ITEMS.values() if (s == 1.0) == stable]
        right = sum(max(votes, key=votes.count) == label for label, votes in chosen)
        return {"n": len(chosen), "accuracy": round(right / len(chosen), 4)}
    assert stability["stable"] == accuracy(True) == {"n": 6, "accuracy": 0.8333}
    assert stability["unstable"] == accuracy(False) == {"n": 4, "accuracy": 0.25}
    assert "stable items (jury.stability 1.0): accuracy 0.8333 on 6; unstable: accuracy 0.25 on 4" in result.output
    named = cli("eval", str(folder), "--labels", "labels.jsonl", "--key", "id", "--truth", "label",
                "--stability-field", "id")
    assert json.loads((folder / "eval.json").read_text())["stability"]["unstable"]["n"] == 0 and \
        named.exit_code == 0
    wrong = cli("eval", str(folder), "--labels", "labels.jsonl", "--key", "id", "--truth", "label",
                "--stability-field", "jury.nothing")
    assert wrong.exit_code == 2 and "--stability-field jury.nothing: no result has a number there" in wrong.output
