"""`runner align`'s search: the labelled items, each evaluation (one run through runner.api
over the chosen items, under the align folder), and the changes tried on dev (align.py then
scores the test split and ships).

The baseline is run on train and dev. Then, cheapest first, each change is kept only when it
raises agreement on dev: (1) the declared numeric params, swept from the cache by `runner
sweep`'s code; (2) few-shot examples from train items where the judge and the label disagree
(align_judge.py); (3) with an optimizer model, at most three instruction lines. Agreement is
balanced accuracy: always answering the commonest label does not raise it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runner.api import ItemSource, run_pipeline
from runner.calibration import align_judge as judging
from runner.calibration import metrics
from runner.calibration.align_judge import Labelled, Split
from runner.calibration.evaluate import EvalSpec, predicted_field, value_text
from runner.calibration.labels import NO_PREDICTION, LabelRow, join_labels, key_text, labels_by_key, read_labels
from runner.engine.rates import lookup
from runner.errors import InputError, RunnerError
from runner.inputs import ItemStream
from runner.pipeline.loader import load_pipeline
from runner.runs.manifest import sha256_file
from runner.runs.reads import load_items
from runner.runs.request import RunOptions

AGREEMENT = "balanced_accuracy"
RATIONALE_FIELDS = ("rationale", "reason", "comment")
GRID_POINTS = 5


@dataclass
class AlignRequest:
    pipeline: Path
    input: Path
    labels: Path
    key: str
    truth: str
    predicted: str | None = None
    split: str = "60/20/20"
    seed: int = 0
    group_by: str | None = None
    max_examples: int = 8
    optimizer_model: str | None = None
    out: Path | None = None             # align.json; align.md beside it
    cache_dir: Path = Path("cache")
    input_format: str | None = None
    # runner probe's probe_pipeline (a layer above this one: the command passes it in)
    probe: Callable[..., tuple[dict[str, Any], Any]] | None = None


@dataclass
class Candidate:
    params: dict[str, str] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def overrides(self, judge: judging.Judge) -> list[str]:
        sets = [f"params.{name}={value}" for name, value in self.params.items()]
        if self.examples:
            sets.append(f"steps.{judge.step.id}.with.examples={json.dumps(self.examples, ensure_ascii=False)}")
        if self.lines:
            sets.append(f"steps.{judge.step.id}.with.system={json.dumps(judging.system_with(judge, self.lines))}")
        return sets

    def changes(self) -> dict[str, Any]:
        return {"params": self.params, "examples": [e["key"] for e in self.examples], "instruction_lines": self.lines}


class Aligner:
    def __init__(self, request: AlignRequest):
        self.request = request
        self.pipeline = load_pipeline(request.pipeline)
        self.spec = EvalSpec(request.labels, request.key, request.truth, request.predicted, kind="categorical")
        self.predicted = predicted_field(self.spec, self.pipeline.summary.count_by)
        self.judge = judging.find_judge(self.pipeline, self.predicted)
        self.rows = read_labels(request.labels, self.pipeline.name)
        out = request.out or Path("reports") / self.pipeline.name / "align"
        self.json_path = out if out.suffix == ".json" else out / "align.json"     # a file, or a folder
        self.folder = self.json_path.parent
        self.items: dict[str, tuple[int, dict[str, Any]]] = {}
        self.best, self.best_dev = Candidate(), 0.0         # the search's best change so far, its dev agreement
        self.report: dict[str, Any] = {
            "pipeline": str(request.pipeline), "input": str(request.input), "labels": str(request.labels),
            "labels_hash": f"sha256:{sha256_file(request.labels)}", "seed": request.seed, "agreement": AGREEMENT,
            "judge_step": self.judge.step.id, "answer_field": self.judge.field, "tried": []}

    # -- the labelled items and their split ------------------------------------------------
    def _source(self, keys: set[str] | None = None) -> ItemSource:
        source = ItemSource(self.request.input, input_format=self.request.input_format)
        if keys is not None:
            wanted = {self.items[k][0] for k in keys}
            source.derive = lambda stream: ItemStream(lambda: (i for i in stream if i.index in wanted))
        return source

    def labelled(self) -> list[Labelled]:
        shared: list[str] = []          # input items whose key an earlier item has: only the first is judged
        for item in load_items(self.pipeline, self._source()):
            key = item.key if self.request.key == "item_key" else key_text(lookup(item.value, self.request.key))
            if key is not None and key in self.items:
                shared.append(key)
            elif key is not None and isinstance(item.value, dict):
                self.items[key] = (item.index, item.value)
        found, missing = [], []
        grouped, unusable = labels_by_key(self.rows, self.request.key, self.request.truth)
        twice = [key for key, rows in grouped.items() if len(rows) > 1]      # the first row is used, as eval does
        disagree = [key for key in twice
                    if len({value_text(lookup(r.record, self.request.truth)) for r in grouped[key]}) > 1]
        for key, (row, *_) in grouped.items():
            if key not in self.items:
                missing.append(key)
                continue
            rationale = next((str(row.record[f]) for f in RATIONALE_FIELDS if row.record.get(f)), None)
            truth = value_text(lookup(row.record, self.request.truth))
            found.append(Labelled(key, truth, self._group(row, key), rationale))
        self.report["labelled"] = {"used": len(found), "not_in_input": missing[:50], "not_in_input_count": len(missing),
                                   "labelled_twice": twice[:50], "labelled_twice_count": len(twice),
                                   "disagreeing": disagree[:50], "disagreeing_count": len(disagree),
                                   "unusable_rows": unusable[:50], "unusable_count": len(unusable),
                                   "input_keys_shared": shared[:50], "input_keys_shared_count": len(shared)}
        if len(found) < 3:
            raise InputError(f"{self.request.labels}: {len(found)} labelled item(s) found in {self.request.input} "
                             f"by --key {self.request.key} (a field of each item, or item_key: the content key "
                             "results and `runner labels export` hold): align needs at least 3 (train, dev and test)")
        return found

    def _group(self, row: LabelRow, key: str) -> str:
        if self.request.group_by is None:
            return key
        value = lookup(row.record, self.request.group_by)
        value = lookup(self.items[key][1], self.request.group_by) if value is None else value
        return key if value is None else f"group:{value_text(value)}"

    # -- evaluations: each one run of the pipeline over the chosen items ---------------------
    def run(self, name: str, keys: set[str], candidate: Candidate) -> dict[str, str]:
        """The judge's answer (as text) for each key, from one run through runner.api."""
        options = RunOptions(cache_dir=self.request.cache_dir, out_dir=self.folder / "runs" / name)
        outcome = run_pipeline(self.request.pipeline, self._source(keys), options, candidate.overrides(self.judge))
        outcome.stop_if_interrupted()
        rows = [row for row in self.rows if key_text(lookup(row.record, self.request.key)) in keys]
        joined = join_labels(outcome.results, rows, self.request.key, self.request.truth, self.predicted)
        return {pair.key: value_text(pair.predicted) for pair in joined.pairs}

    def score(self, part: list[Labelled], said: dict[str, str]) -> dict[str, Any]:
        truth = [item.truth for item in part]
        guesses = [said.get(item.key, NO_PREDICTION) for item in part]
        m = metrics.categorical(truth, guesses)
        return {name: m.get(name) for name in ("n", "accuracy", "accuracy_ci95", "balanced_accuracy",
                                                "balanced_accuracy_ci95", "kappa", "kappa_ci95", "macro_f1")}

    # -- the search on dev, cheapest change first ----------------------------------------------
    def search(self, split: Split) -> Candidate:
        """The baseline on train and dev, then each change, kept when it raises agreement on dev."""
        said = self.run("baseline-train-dev", split.keys("train") | split.keys("dev"), Candidate())
        dev = self.score(split.dev, said)
        self.report["baseline"] = {"train": self.score(split.train, said), "dev": dev}
        self.best_dev = dev[AGREEMENT] or 0.0
        self.try_params(split)
        wrong = [item for item in split.train if said.get(item.key) != item.truth]
        self.try_examples(split, wrong)
        if self.request.optimizer_model:
            self.try_lines(split, [(item, said.get(item.key, "")) for item in wrong])
        return self.best

    def try_params(self, split: Split) -> None:
        from runner.calibration.sweep import Axis, SweepRequest, run_sweep
        for name, values in numeric_grid(self.pipeline.params, self.pipeline.params_schema):
            request = SweepRequest(self.request.pipeline, self._source(split.keys("dev")), self.spec,
                                   [Axis(f"params.{name}", values)], self.request.cache_dir,
                                   self.best.overrides(self.judge), AGREEMENT, workers=1)
            swept = run_sweep(request)
            top = swept.get("best") or {}
            needs = [s["set"] for s in swept["settings"] if s["status"] == "needs_calls"]
            entry = {"change": f"params.{name}", "values": list(values), "dev": top.get("metric"),
                     "best_set": top.get("set"), "not_cached": [list(s.values())[0] for s in needs]}
            params = {**self.best.params, **{k.split(".", 1)[1]: v for k, v in (top.get("set") or {}).items()}}
            self._keep(entry, top.get("metric"), replace(self.best, params=params),
                       "no value raised agreement on dev (settings needing new calls are not tried: cached answers "
                       "only, as runner sweep without --allow-calls)")

    def try_examples(self, split: Split, wrong: list[Labelled]) -> None:
        chosen = judging.choose(wrong, self.request.max_examples, self.request.seed)
        examples = [e for e in (judging.make_example(self.judge, self.items[c.key][1], c) for c in chosen) if e]
        leaked = {e["key"] for e in examples} - split.keys("train")
        if leaked:                        # a held-out item taught to the judge would make its score a lie
            raise RunnerError(f"align: example(s) {sorted(leaked)} are not train items")
        entry: dict[str, Any] = {"change": "examples", "train_disagreements": len(wrong),
                                 "examples": [e["key"] for e in examples]}
        if examples:
            self._on_dev(entry, split, "examples-dev", replace(self.best, examples=examples))
        else:
            self._keep(entry, None, self.best, "--max-examples 0" if self.request.max_examples == 0 else
                       self.judge.blocked or "no train item where the judge and the label disagree")

    def try_lines(self, split: Split, wrong: list[tuple[Labelled, str]]) -> None:
        assert self.request.optimizer_model is not None
        lines = judging.propose_lines(self.pipeline, self.request.optimizer_model,
                                      judging.instruction_prompt(self.judge, wrong), self.request.cache_dir)
        entry: dict[str, Any] = {"change": "instruction_lines", "lines": lines}
        if lines:
            self._on_dev(entry, split, "lines-dev", replace(self.best, lines=lines))
        else:
            self._keep(entry, None, self.best, "the optimizer model proposed no line")

    def _on_dev(self, entry: dict[str, Any], split: Split, run: str, candidate: Candidate) -> None:
        value = self.score(split.dev, self.run(run, split.keys("dev"), candidate))[AGREEMENT]
        entry["dev"] = value
        self._keep(entry, value, candidate, f"dev agreement {value} is not above {self.best_dev}")

    def _keep(self, entry: dict[str, Any], dev: float | None, candidate: Candidate, why: str) -> None:
        """A change tried: `candidate` becomes the best when its dev agreement is above the best's."""
        if dev is not None and dev > self.best_dev:
            entry["kept"] = True
            self.best, self.best_dev = candidate, dev
        else:
            entry.update(kept=False, why=why)
        self.report["tried"].append(entry)


def numeric_grid(params: dict[str, Any], schemas: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """Each declared number or integer param with a minimum and a maximum: evenly spaced values."""
    grid = []
    for name, schema in sorted(schemas.items()):
        if not isinstance(schema, dict) or schema.get("type") not in ("number", "integer") or name not in params:
            continue
        low, high = schema.get("minimum"), schema.get("maximum")
        if not isinstance(low, (int, float)) or not isinstance(high, (int, float)) or high <= low:
            continue
        points = [low + (high - low) * i / (GRID_POINTS - 1) for i in range(GRID_POINTS)]
        if schema["type"] == "integer":
            points = sorted({round(p) for p in points})
        values = tuple(str(int(p) if schema["type"] == "integer" else round(p, 4)) for p in points)
        grid.append((name, values))
    return grid
