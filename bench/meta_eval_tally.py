"""bench/meta_eval.sh's tally: the eval and the align attempt of the attribution judge on WiCE
items as a markdown section for bench/RESULTS.md, beside LLM-AggreFact's published WiCE
balanced accuracy, with the quote the judge gives against WiCE's supporting sentences.

    python bench/meta_eval_tally.py EVAL_FOLDER ALIGN_JSON ITEMS EVAL_SECONDS ALIGN_SECONDS ALIGN_EXIT"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PUBLISHED = {"GPT-4o": 78.5, "Llama-3.1-8B": 72.0}      # LLM-AggreFact, WiCE column: balanced accuracy (%)


def interval(scores: dict[str, Any], name: str) -> str:
    ci = scores.get(f"{name}_ci95")
    return f"{scores.get(name)} [{ci[0]}, {ci[1]}]" if ci else f"{scores.get(name)} (no interval)"


def quote_agreement(folder: Path, items_file: Path) -> tuple[int, int, int]:
    """(items WiCE finds support for, of which the judge quoted a sentence found in the evidence,
    of which that sentence is one of WiCE's supporting sentences)."""
    from runner.text.quotes import match_quote
    items = {json.loads(line)["id"]: json.loads(line) for line in items_file.read_text().splitlines()}
    supported = quoted = agreed = 0
    for line in (folder / "results.jsonl").read_text().splitlines():
        result = json.loads(line)
        item = items.get(result.get("id"))
        wanted = {i for group in (item or {}).get("supporting_sentences", []) for i in group}
        if not wanted:                # WiCE's not_supported items: [[]]
            continue
        supported += 1
        if not result.get("quote_found"):
            continue
        quoted += 1
        found = [i for i, sentence in enumerate(item["evidence"])  # type: ignore[index]
                 if match_quote(result["quote"], sentence).passed]
        agreed += bool(set(found) & wanted)
    return supported, quoted, agreed


def main() -> None:
    folder, align_json, items_file = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    eval_seconds, align_seconds, align_exit = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    report = json.loads((folder / "eval.json").read_text())
    m = report["metrics"]
    base = m["baseline"]
    lines = [f"Judge on {m['n']} items ({eval_seconds:.0f} s), labels {report['labels']}:", "",
             "| judge | n | accuracy [95% CI] | balanced accuracy [95% CI] | kappa [95% CI] | macro F1 |",
             "|---|---|---|---|---|---|",
             f"| attribution_judge, Gemma 3 270M Q4_K_M | {m['n']} | {interval(m, 'accuracy')} | "
             f"{interval(m, 'balanced_accuracy')} | {interval(m, 'kappa')} | {m['macro_f1']} |",
             f"| always {base['predicts']} | {m['n']} | {base['accuracy']} | {base['balanced_accuracy']} | "
             f"{base['kappa']} | {base['macro_f1']} |"]
    lines += [f"| published (LLM-AggreFact, WiCE, all 358 test items): {name} | | | {value / 100} | | |"
              for name, value in PUBLISHED.items()]
    by = (report.get("by") or {}).get("slices") or {}
    if by:
        lines += ["", "Per WiCE label (`--by wice_label`; `partially_supported` and `not_supported` are labelled "
                      "not_supported):", "", "| WiCE label | n | accuracy [95% CI] |", "|---|---|---|"]
        lines += [f"| {name} | {s['n']} | {interval(s, 'accuracy')} |" for name, s in by.items()]
    supported, quoted, agreed = quote_agreement(folder, items_file)
    lines += ["", f"Quotes: of {supported} items with WiCE supporting sentences, the judge quoted a sentence found "
                  f"in the evidence for {quoted}; {agreed} of those are among WiCE's supporting sentences."]
    if align_json.is_file():
        a = json.loads(align_json.read_text())
        split = a["splits"]
        tried = "; ".join(f"{t['change']}: {'kept' if t.get('kept') else 'rejected'} (dev {t.get('dev')})"
                          for t in a["tried"])
        lines += ["", f"`runner align` ({align_seconds:.0f} s, exit {align_exit}): split train {split['train']['n']}, "
                      f"dev {split['dev']['n']}, test {split['test']['n']} (seed {a['seed']}); baseline dev balanced "
                      f"accuracy {a['baseline']['dev']['balanced_accuracy']}; tried {tried or 'nothing'}; "
                      f"{'shipped' if a['shipped'] else 'not shipped'}: {a['why']}"]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
