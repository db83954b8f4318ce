"""`runner steps NAME` and the generated language reference list every argument's sub-fields
(a jury's vote: its methods and options), each with an example."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VOTE_OPTIONS = ("field", "method", "on_tie", "on_all_failed", "quorum", "reason_field")
METHODS = ("unanimous", "majority", "plurality", "mean", "median", "min", "max")


def test_runner_steps_jury_lists_the_vote_options_and_methods(cli):
    """Finding 7: the vote options were nowhere in `runner steps`; the user copied them from
    a shipped pipeline."""
    shown = cli("steps", "jury")
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert text.startswith("jury: ")
    for option in VOTE_OPTIONS:
        assert f"    vote.{option}" in text, option
    for method in METHODS:
        assert f"{method}: " in text, method
    assert "example:" in text and "vote: {field: verdict, method: majority" in text
    assert "quote_match" not in text                           # only the step asked for


def test_runner_steps_names_an_unknown_step_type(cli):
    shown = cli("steps", "juri")
    assert shown.exit_code == 2 and "Did you mean 'jury'?" in shown.stderr


def test_the_language_reference_lists_every_arguments_sub_fields():
    page = (REPO / "docs" / "pipeline-language.md").read_text(encoding="utf-8")
    jury = page.split("### `jury`", 1)[1].split("\n### ", 1)[0]
    for option in VOTE_OPTIONS:
        assert f"`vote.{option}`" in jury, option
    for method in METHODS:
        assert f"`{method}`" in jury, method
    decide = page.split("### `decide`", 1)[1].split("\n### ", 1)[0]
    assert "`rules[].when`" in decide and "`rules[].stop`" in decide
