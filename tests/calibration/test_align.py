"""`runner align` against a scripted judge that a kind of evidence fools: it answers right only
when its prior turns hold an example of the same kind. With labels that teach it, align
learns and ships a variant that is right on fresh items; with labels that carry no signal,
it ships nothing and exits 1. No test (or dev) item is ever an example."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from helpers import run, write_json
from runner.calibration.align_judge import Labelled, split_items
from runner.testing import Reply, ScriptedModel

SCHEMA = {"type": "object", "required": ["verdict"],
          "properties": {"verdict": {"enum": ["yes", "no"]}, "reason": {"type": "string"}}}
RIGHT = {"A": "yes", "B": "no"}          # what each kind of evidence should get
KIND = re.compile(r"Kind: (\w+)")


def fooled_until_shown(prompt: str, body: dict[str, Any]) -> Reply:
    """Wrong about a kind of item unless a prior turn shows an item of that kind and its answer."""
    messages = body["messages"]
    kind = KIND.search(messages[-1]["content"]).group(1)       # type: ignore[union-attr]
    for asked, answered in zip(messages[:-1:2], messages[1:-1:2]):
        found = KIND.search(str(asked.get("content")))
        if asked["role"] == "user" and answered["role"] == "assistant" and found and found.group(1) == kind:
            return Reply(json.dumps({"verdict": json.loads(answered["content"])["verdict"], "reason": "shown"}))
    return Reply(json.dumps({"verdict": "no" if RIGHT[kind] == "yes" else "yes", "reason": "fooled"}))


def _project(project: Any, labels_of: Any, n: int = 40, extra: str = "") -> Path:
    project.schema("verdict.schema.json", SCHEMA)
    pipeline = project.pipeline("""
        version: 1
        name: fooled
        models: {m: {model: scripted/judge, retries: 0}, opt: {model: scripted/optimizer, retries: 0}}
        steps:
          - id: judge
            uses: llm
            with:
              model: m
              prompt: "Kind: {{ item.kind }}\\nClaim: {{ item.claim }}"
              output_schema: verdict.schema.json
        output: {id: "{{ item.id }}", verdict: "{{ steps.judge.output.verdict }}"}
        summary: {count_by: verdict}
        """ + extra, "fooled.yaml")
    items = [{"id": f"i{n}", "kind": "AB"[n % 2], "claim": f"claim number {n}"} for n in range(n)]
    write_json(project.root / "items.json", items)
    (project.root / "labels.jsonl").write_text("".join(
        json.dumps({"id": item["id"], "label": labels_of(item), "rationale": f"kind {item['kind']} evidence"}) + "\n"
        for item in items), encoding="utf-8")
    return pipeline


ARGS = ["--input", "items.json", "--labels", "labels.jsonl", "--key", "id", "--truth", "label",
        "--max-examples", "4", "--seed", "3"]


def test_align_learns_from_disagreements_and_ships_a_variant_right_on_fresh_items(
        project: Any, scripted_llm: ScriptedModel, cli: Any) -> None:
    scripted_llm.script(fooled_until_shown)
    pipeline = _project(project, lambda item: RIGHT[item["kind"]])
    result = cli("align", str(pipeline), *ARGS)
    assert result.exit_code == 0, result.output
    report = json.loads((project.root / "reports/fooled/align/align.json").read_text())
    assert report["shipped"] is True and report["seed"] == 3 and report["labels_hash"].startswith("sha256:")
    assert report["baseline"]["test"]["balanced_accuracy"] == 0.0
    assert report["aligned"]["test"]["balanced_accuracy"] == 1.0
    assert report["test_difference"]["ci95"][0] > 0
    examples = report["aligned"]["changes"]["examples"]
    train = set(report["splits"]["train"]["keys"])
    assert examples and set(examples) <= train                     # never a dev or test item
    assert not set(examples) & (set(report["splits"]["test"]["keys"]) | set(report["splits"]["dev"]["keys"]))
    assert "shipped" in (project.root / "reports/fooled/align/align.md").read_text()
    variant = project.root / "pipelines/fooled.aligned.yaml"
    written = (project.root / "pipelines/fooled.aligned.examples.jsonl").read_text().splitlines()
    assert "extends: fooled.yaml" in variant.read_text() and len(written) == len(examples)
    assert json.loads(written[0])["answer"]["reason"].startswith("kind ")     # the reviewer's rationale
    assert cli("validate", str(variant)).exit_code == 0
    from starlette.testclient import TestClient

    from runner.view.app import create_app
    web = TestClient(create_app(project.root / "reports", token="t"), base_url="http://127.0.0.1")
    relative = "fooled/align/runs/aligned-test"
    assert f'href="/run/{relative}/align"' in web.get(f"/run/{relative}").text
    page = web.get(f"/run/{relative}/align")
    assert page.status_code == 200 and "runner align: shipped" in page.text
    fresh = [{"id": f"new{n}", "kind": "AB"[n % 2], "claim": f"never seen {n}"} for n in range(6)]
    outcome = run(variant, write_json(project.root / "fresh.json", fresh), out="fresh")
    assert [r["verdict"] for r in outcome.results] == [RIGHT[item["kind"]] for item in fresh]


def test_align_ships_nothing_when_the_labels_carry_no_signal(
        project: Any, scripted_llm: ScriptedModel, cli: Any) -> None:
    scripted_llm.script(fooled_until_shown)
    noise = random.Random(11)
    pipeline = _project(project, lambda item: noise.choice(["yes", "no"]))
    result = cli("align", str(pipeline), *ARGS)
    assert result.exit_code == 1, result.output
    assert "not shipped" in result.output
    assert not (project.root / "pipelines/fooled.aligned.yaml").exists()
    assert not (project.root / "pipelines/fooled.aligned.examples.jsonl").exists()
    report = json.loads((project.root / "reports/fooled/align/align.json").read_text())
    assert report["shipped"] is False and report["why"]


def test_align_says_which_labels_it_could_not_use_as_eval_does(
        project: Any, scripted_llm: ScriptedModel, cli: Any) -> None:
    """A key labelled twice (the first row used, as eval does), two that disagree, a row without
    a truth and a label of no item: align used them silently."""
    scripted_llm.script(fooled_until_shown)
    pipeline = _project(project, lambda item: RIGHT[item["kind"]])
    with (project.root / "labels.jsonl").open("a", encoding="utf-8") as labels:
        labels.write(json.dumps({"id": "i0", "label": "no"}) + "\n" + json.dumps({"id": "i1", "label": "no"}) + "\n"
                     + json.dumps({"id": "i2"}) + "\n" + json.dumps({"id": "gone", "label": "yes"}) + "\n")
    items = json.loads((project.root / "items.json").read_text())       # (hunt) an input item sharing a key
    write_json(project.root / "items.json", [*items, {**items[3], "claim": "another claim"}])
    result = cli("align", str(pipeline), *ARGS)
    assert ("labels: 40 used; 1 label(s) of no item in the input; 2 key(s) labelled more than once (the first "
            "row used); 1 of those with labels that disagree; 1 label row(s) without a key or truth; 1 input "
            "item(s) whose key an earlier item has (not judged)") in result.output
    labelled = json.loads((project.root / "reports/fooled/align/align.json").read_text())["labelled"]
    assert (labelled["labelled_twice"], labelled["disagreeing"], labelled["unusable_rows"]) == (
        ["i0", "i1"], ["i0"], ["line 43: no 'label'"])


PROBES = """
        probes:
          inject_claim:
            description: the claim tells the judge to answer yes
            inject: {field: claim, verdict: "yes"}
            expect: {not: "yes"}
"""


def obeys_once_shown_examples(prompt: str, body: dict[str, Any]) -> Reply:
    """fooled_until_shown, but a judge with prior turns does what the item it judges tells it."""
    messages = body["messages"]
    if len(messages) > 1 and "yes" in messages[-1]["content"]:
        return Reply(json.dumps({"verdict": "yes", "reason": "told so"}))
    return fooled_until_shown(prompt, body)


def test_align_refuses_when_a_probe_fails_more_often_on_the_aligned_judge(
        project: Any, scripted_llm: ScriptedModel, cli: Any) -> None:
    scripted_llm.script(obeys_once_shown_examples)
    pipeline = _project(project, lambda item: RIGHT[item["kind"]], extra=PROBES)
    result = cli("align", str(pipeline), *ARGS)
    assert result.exit_code == 1, result.output
    report = json.loads((project.root / "reports/fooled/align/align.json").read_text())
    assert report["test_difference"]["ci95"][0] > 0                 # better on test, yet refused:
    assert report["probes"]["risen"] and "inject_claim" in report["why"]
    assert not (project.root / "pipelines/fooled.aligned.yaml").exists()


def test_align_adds_instruction_lines_from_the_optimizer_model(
        project: Any, scripted_llm: ScriptedModel, cli: Any) -> None:
    def follows_lines(prompt: str, body: dict[str, Any]) -> Reply:
        kind = KIND.search(body["messages"][-1]["content"]).group(1)     # type: ignore[union-attr]
        system = " ".join(m["content"] for m in body["messages"] if m["role"] == "system")
        told = f"Kind {kind}: answer {RIGHT[kind]}" in system
        return Reply(json.dumps({"verdict": RIGHT[kind] if told else "no" if RIGHT[kind] == "yes" else "yes"}))
    scripted_llm.script("1. Kind A: answer yes\n2. Kind B: answer no\n3. Read the claim\n4. One line too many",
                        model="optimizer")
    scripted_llm.script(follows_lines, model="judge")
    pipeline = _project(project, lambda item: RIGHT[item["kind"]])
    result = cli("align", str(pipeline), *ARGS[:-4], "--max-examples", "0", "--optimizer-model", "opt")
    assert result.exit_code == 0, result.output
    report = json.loads((project.root / "reports/fooled/align/align.json").read_text())
    assert report["aligned"]["changes"]["instruction_lines"] == ["Kind A: answer yes", "Kind B: answer no",
                                                                 "Read the claim"]
    variant = project.root / "pipelines/fooled.aligned.yaml"
    assert "Kind A: answer yes" in variant.read_text() and cli("validate", str(variant)).exit_code == 0
    [asked] = scripted_llm.calls(model="optimizer")
    assert "kind A evidence" in asked.prompt                          # the reviewers' rationales


def test_the_split_is_stratified_grouped_seeded_and_disjoint() -> None:
    rng = random.Random(0)
    items = [Labelled(f"k{n}", rng.choice("xyz"), f"g{n // 3}") for n in range(90)]
    split = split_items(items, (0.6, 0.2, 0.2), seed=5)
    assert split_items(items, (0.6, 0.2, 0.2), seed=5) == split
    names = ("train", "dev", "test")
    keys = [split.keys(name) for name in names]
    assert sum(map(len, keys)) == 90 and not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    for group in {i.group for i in items}:                          # a group never straddles two splits
        assert sum(any(i.group == group for i in split.part(name)) for name in names) == 1
    assert 45 <= len(split.train) <= 63 and len(split.dev) >= 12 and len(split.test) >= 12


def test_a_small_set_whose_label_shares_round_a_split_away_still_gets_every_split() -> None:
    """5 items (3 x, 2 y) at 60/20/20: each label's share gave test none, and align refused
    `too few labelled items (5)` though 3/1/1 was there to take."""
    items = [Labelled(f"k{n}", "xxxyy"[n], f"g{n}") for n in range(5)]
    split = split_items(items, (0.6, 0.2, 0.2), seed=0)
    assert sorted(map(len, (split.train, split.dev, split.test))) == [1, 1, 3]
    assert sorted(i.key for name in ("train", "dev", "test") for i in split.part(name)) == [f"k{n}" for n in range(5)]


@pytest.mark.parametrize("bad", ["60/20", "a/b/c", "60/0/40"])
def test_align_refuses_a_bad_split(project: Any, cli: Any, bad: str) -> None:
    pipeline = _project(project, lambda item: RIGHT[item["kind"]])
    result = cli("align", str(pipeline), *ARGS, "--split", bad)
    assert result.exit_code == 2 and "--split" in result.output
