"""clean_value: every string of a value UTF-8 can hold, the value itself when nothing needs it."""

from __future__ import annotations

import pytest

from runner.safetext import REPLACEMENT, clean_value


class _Text(str):
    pass


class _Dict(dict):
    pass


class _List(list):
    pass


BAD = "a\ud800b"
FIXED = f"a{REPLACEMENT}b"


@pytest.mark.parametrize("value, expected", [
    (BAD, FIXED),
    (_Text(BAD), FIXED),                         # a str subclass is checked too
    ({"k": BAD}, {"k": FIXED}),
    ({BAD: 1}, {FIXED: 1}),                      # and a key
    (_Dict(k=[1, (2.5, _Text(BAD))]), {"k": [1, [2.5, FIXED]]}),
    (_List([None, True, {"x": [BAD]}]), [None, True, {"x": [FIXED]}]),
    ("\ud83d\ude00", "\U0001f600"),              # a pair that meets is the character it stands for
])
def test_a_string_utf8_cannot_hold_is_replaced_wherever_it_is(value, expected):
    assert clean_value(value) == expected


@pytest.mark.parametrize("value", [
    {"k": [1, 2.0, None, True, "é", _Text("ok"), ("t", {"n": "ü"})]},
    "plain", 3, None,
])
def test_a_clean_value_is_returned_as_it_is(value):
    assert clean_value(value) is value


def test_shared_values_are_written_and_a_value_that_holds_itself_is_refused():
    from runner.safetext import UnwritableValue, writable_value
    shared = {"v": [1, "é"]}
    layered: list = [shared]
    for _ in range(60):                        # 2**60 paths, 61 containers: walked once each
        layered = [layered, layered]
    assert writable_value({"a": shared, "b": shared, "deep": layered})["a"] is shared
    tangled: dict = {"list": []}
    tangled["list"].append(tangled)
    for value, reason in ((tangled, "it refers to itself"), ({"x": float("nan")}, "it holds nan"),
                          ([float("-inf")], "it holds -inf"), ({"n": 10 ** 5000}, "more than 4,300 digits")):
        with pytest.raises(UnwritableValue, match=reason):
            writable_value(value)
    assert writable_value({"n": 10 ** 4000, "f": 1e308})["f"] == 1e308
