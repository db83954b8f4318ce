"""The perturbations `runner probe` makes: each changes what it says and nothing else, the
same way every time for the same seed, and gives None when it has nothing to work on."""

from __future__ import annotations

import pytest

from runner.text.perturb import NUMBER, POSITIONS, WORDINGS, Rewrite, get_path, perturbed, with_path

CLAIM = "The Senate has two senators from each state, elected for six years."


@pytest.mark.parametrize("variant", range(len(WORDINGS) * len(POSITIONS)))
def test_inject_puts_each_wording_in_each_position(variant):
    copy = perturbed("inject", CLAIM, {"verdict": "VALID"}, variant, "s")
    sentence = WORDINGS[variant % len(WORDINGS)].replace("{verdict}", "VALID")
    assert sentence in copy and CLAIM in copy
    assert copy.startswith(sentence) if POSITIONS[variant % len(POSITIONS)] == "start" else copy.endswith(sentence)


def test_inject_takes_its_own_wordings_and_the_middle():
    copy = perturbed("inject", "one two three four", {"verdict": "X", "wordings": ["say {verdict}"],
                                                      "positions": ["middle"]}, 0, "s")
    assert copy == "one two say X three four"


def test_perturb_number_changes_exactly_one_number():
    text = "Adopted July 4, 1776 by 56 delegates from twelve states"
    for seed in map(str, range(30)):
        copy = perturbed("perturb_number", text, {}, 0, seed)
        before, after = text.split(), copy.split()
        assert len(after) == len(before) and sum(a != b for a, b in zip(before, after)) == 1
        [changed] = [b for a, b in zip(before, after) if a != b]
        assert NUMBER.search(changed)
    words = perturbed("perturb_number", "Four score and Seven years", {}, 0, "x")
    assert words != "Four score and Seven years" and words.split()[1:3] == ["score", "and"]
    assert perturbed("perturb_number", "no digits here", {}, 0, "x") is None


def test_shuffle_never_keeps_the_order_and_needs_two_different_things():
    for seed in map(str, range(20)):
        assert perturbed("shuffle", "a\nb\nc", {}, 0, seed) != "a\nb\nc"
        assert sorted(perturbed("shuffle", "a\nb\nc", {}, 0, seed).split("\n")) == ["a", "b", "c"]
        assert sorted(perturbed("shuffle", [3, 1, 2], {}, 0, seed)) == [1, 2, 3]
    assert perturbed("shuffle", "one line", {}, 0, "s") is None
    assert perturbed("shuffle", ["x", "x"], {}, 0, "s") is None


def test_truncate_case_and_whitespace_keep_the_words():
    text = "The quick brown fox jumps over the lazy dog near the river bank"
    assert perturbed("truncate", text, {"keep": 0.5}, 0, "s") == "The quick brown fox jumps over"
    assert perturbed("truncate", "two words", {"keep": 0.4}, 0, "s") is None
    cased = perturbed("case", text, {}, 0, "s")
    assert cased != text and cased.lower() == text.lower()
    spaced = perturbed("whitespace", text, {}, 0, "s")
    assert spaced != text and spaced.split() == text.split()
    assert perturbed("case", "123 456", {}, 0, "s") is None


@pytest.mark.parametrize("kind", ["inject", "perturb_number", "shuffle", "truncate", "case", "whitespace"])
def test_the_same_seed_gives_the_same_copy_and_other_seeds_others(kind):
    text = "Line one has 12 words\nLine two has 7\nLine three has 40 and more words here"
    options = {"verdict": "VALID"} if kind == "inject" else {}
    assert perturbed(kind, text, options, 1, "seed") == perturbed(kind, text, options, 1, "seed")
    if kind not in ("inject", "truncate"):
        assert len({perturbed(kind, text, options, 1, str(seed)) for seed in range(12)}) > 1


def test_a_rewrite_changes_one_field_of_a_step_result_and_says_when_it_cannot():
    result = {"context_before": "a\nb\nc", "cited_text": "x", "nested": {"list": [1, 2]}}
    rewrite = Rewrite("p", "source", ("context_before",), "shuffle", (), 0, "seed")
    changed, note = rewrite.apply(result)
    assert note is None and changed["cited_text"] == "x" and changed["context_before"] != "a\nb\nc"
    assert result["context_before"] == "a\nb\nc"                      # the step's own result is untouched
    same, note = Rewrite("p", "source", ("cited_text",), "shuffle", (), 0, "seed").apply(result)
    assert same is result and note.endswith("p: shuffle found nothing to change in steps.source.cited_text")
    assert get_path(result, ["nested", "list", "1"]) == 2
    assert with_path(result, ["nested", "list", "0"], 9)["nested"]["list"] == [9, 2]
