"""Every vote outcome and method, as pure functions."""

from __future__ import annotations

import pytest

from runner.engine.voting import Agreement, Vote, merge_answers, tally


def v(seat, value=None, error=None, reason=None, **fields):
    answer = None if error else {"verdict": value, **({"reason": reason} if reason else {}), **fields}
    return Vote(seat, value, answer, error)


def test_all_agree():
    out = tally([v("a", "VALID", reason="direct quote"), v("b", "VALID", reason="fine")])
    assert (out.value, out.reason, out.agreement) == ("VALID", "Consensus (2/2): VALID: direct quote", 1.0)


def test_majority_of_three():
    out = tally([v("a", "MISLEADING", reason="r1"), v("b", "VALID", reason="r2"), v("c", "VALID", reason="r3")])
    assert (out.value, out.reason, out.agreement) == ("VALID", "Majority (2/3): VALID: r2", 0.6667)


def test_one_seat_failing_other_two_agreeing():
    out = tally([v("a", error="timeout"), v("b", "VALID", reason="ok"), v("c", "VALID")])
    assert out.value == "VALID" and out.reason == "Consensus (2/2): VALID: ok"


def test_one_seat_failing_other_two_disagreeing():
    out = tally([v("a", "VALID"), v("b", error="boom"), v("c", "INSUFFICIENT")])
    assert (out.value, out.reason, out.decided) == ("HUNG_JURY", "Hung jury: 1 VALID, 1 INSUFFICIENT", False)


def test_tie_is_never_broken_by_order():
    first = tally([v("a", "X"), v("b", "Y")])
    second = tally([v("a", "Y"), v("b", "X")])
    assert first.value == second.value == "HUNG_JURY"


def test_all_failing():
    out = tally([v("a", error="refused"), v("b", error="401"), v("c", error="x")], on_all_failed="LLM_ERROR")
    assert (out.value, out.reason) == ("LLM_ERROR", "All 3 jurors failed: refused")


def test_quorum():
    out = tally([v("a", "VALID"), v("b", error="down"), v("c", error="down")], quorum=2)
    assert out.value == "LLM_ERROR" and out.reason.startswith("Quorum not met: 1 valid vote(s), 2 needed")
    assert tally([v("a", "VALID"), v("b", "VALID"), v("c", error="x")], quorum=2).value == "VALID"


def test_unanimous():
    assert tally([v("a", "A"), v("b", "A")], "unanimous").value == "A"
    assert tally([v("a", "A"), v("b", "A"), v("c", "B")], "unanimous").value == "HUNG_JURY"


def test_plurality():
    votes = [v("a", "A"), v("b", "B"), v("c", "A"), v("d", "C"), v("e", "D")]
    out = tally(votes, "plurality")
    assert out.value == "A" and out.reason.startswith("Plurality (2/5): A")
    assert tally(votes, "majority").value == "HUNG_JURY"
    assert tally([v("a", "A"), v("b", "B")], "plurality").value == "HUNG_JURY"


@pytest.mark.parametrize("method,expected", [("mean", 70), ("median", 80), ("min", 40), ("max", 90)])
def test_numeric_methods(method, expected):
    votes = [Vote("a", 80, {}), Vote("b", 40, {}), Vote("c", 90, {}), Vote("d", "n/a", {}), Vote("e", error="x")]
    assert tally(votes, method).value == expected


def test_merge_answers():
    votes = [v("a", "VALID", reason="r1", substantive=True, in_context=False),
             v("b", "VALID", reason="r2", substantive=True, in_context=True),
             v("c", "VALID", reason="r3", substantive=False, in_context=False)]
    merged = merge_answers(votes, votes, "verdict")
    assert merged == {"reason": "r1", "substantive": True, "in_context": False}
    assert merge_answers([], votes, "verdict") == {"reason": None, "substantive": None, "in_context": None}


def agreement_of(rows):
    agreement = Agreement()
    for row in rows:
        agreement.add(row)
    return agreement


def test_agreement_statistics():
    rows = [{"a": "Y", "b": "Y", "c": "Y"}, {"a": "Y", "b": "N", "c": "Y"}, {"a": "N", "b": "N", "c": "N"},
            {"a": "N", "b": "N"}]
    assert agreement_of(rows).pairwise() == {"a~b": 0.75, "a~c": 1.0, "b~c": 0.6667}
    # items 1-3 (all seats voted): P = 7/9, Pe = 41/81, kappa = (7/9 - 41/81) / (1 - 41/81) = 0.55
    assert agreement_of(rows).fleiss_kappa() == 0.55
    assert agreement_of([{"a": "Y", "b": "Y"}]).fleiss_kappa() is None


def test_a_hung_jurys_agreement_is_rounded():
    """(hunt) A three-way split kept 0.3333333333333333 (other agreements are rounded to 4 places)."""
    outcome = tally([Vote(s, v) for s, v in zip("abc", ["X", "Y", "Z"], strict=True)], "majority", quorum=1)
    assert outcome.agreement == 0.3333 and not outcome.decided
