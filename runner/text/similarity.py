"""How alike two texts are, by the metrics OpenAI's text_similarity grader names, each from the
library that defines it: a score from 0 to 1 (1: the same).

- `fuzzy_match`: rapidfuzz's `fuzz.ratio` (normalised Indel similarity), over 100;
- `bleu`: sacrebleu's sentence BLEU of the input against the one reference, over 100;
- `gleu`: NLTK's sentence GLEU (Google BLEU) over whitespace tokens;
- `rouge_1` .. `rouge_5`, `rouge_l`: rouge-score's F-measure (rouge1..rouge5, rougeL).

`cosine` (the cosine of the angle between two texts' embeddings, -1 to 1) needs a model:
the `text_similarity` step asks its `model:` for the vectors and `cosine` here compares them.

`meteor` is not here: NLTK's METEOR needs the WordNet corpus, a download runner does not make.
The libraries are imported on first use (a pipeline that compares no texts never loads them)."""

from __future__ import annotations

import functools
import math
from typing import Any

ROUGE = {"rouge_1": "rouge1", "rouge_2": "rouge2", "rouge_3": "rouge3", "rouge_4": "rouge4",
         "rouge_5": "rouge5", "rouge_l": "rougeL"}
METRICS = ("fuzzy_match", "bleu", "gleu", *ROUGE)
EMBEDDING_METRICS = ("cosine",)          # computed from a model's embeddings (the step's `model:`)
UNAVAILABLE = {"meteor": "METEOR needs NLTK's WordNet corpus, a download runner does not make; choose another "
                         "metric (e.g. rouge_l or bleu)"}


def similarity(metric: str, text: str, reference: str) -> float:
    """The score of `text` against `reference` by `metric` (one of METRICS), from 0 to 1."""
    if metric == "fuzzy_match":
        from rapidfuzz import fuzz
        return float(fuzz.ratio(text, reference)) / 100
    if metric == "bleu":
        import sacrebleu
        return float(sacrebleu.sentence_bleu(text, [reference]).score) / 100
    if metric == "gleu":
        from nltk.translate.gleu_score import sentence_gleu
        return float(sentence_gleu([reference.split()], text.split()))
    if metric in ROUGE:
        return float(_rouge_scorer(ROUGE[metric]).score(reference, text)[ROUGE[metric]].fmeasure)
    raise ValueError(f"unknown similarity metric '{metric}' (known: {', '.join(METRICS)})")


def cosine(a: list[float], b: list[float]) -> float:
    """The cosine similarity of two vectors of one length: a.b / (|a| |b|), from -1 to 1;
    ValueError when the lengths differ or a vector is all zeros (it has no direction)."""
    if len(a) != len(b):
        raise ValueError(f"the two vectors differ in length ({len(a)} and {len(b)})")
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norms == 0:
        raise ValueError("a vector is all zeros: its cosine similarity is undefined")
    value = math.fsum(x * y for x, y in zip(a, b, strict=True)) / norms
    if not math.isfinite(value):      # NaN or infinity in a vector: never clamped into a match
        raise ValueError("a vector holds a number that is not finite: its cosine similarity is undefined")
    return max(-1.0, min(1.0, value))


@functools.cache
def _rouge_scorer(kind: str) -> Any:
    from rouge_score import rouge_scorer
    return rouge_scorer.RougeScorer([kind])
