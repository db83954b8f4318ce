#!/usr/bin/env bash
# The attribution judge (pipelines/attribution_judge.yaml) on 100 labelled WiCE items
# (examples/attribution/) against a real OpenAI-compatible server: llama-cpp-python 0.3.36
# serving Gemma 3 270M Q4_K_M on CPU (bench/llama_server.sh). Not part of CI.
#
#     bash bench/meta_eval.sh
#
# 1. `runner eval` runs the judge on the items and scores it against the labels: accuracy,
#    balanced accuracy and kappa with 95% bootstrap intervals, the always-majority baseline,
#    and the same per WiCE label (--by wice_label);
# 2. the quote the judge gives, matched in the evidence, against WiCE's supporting sentences;
# 3. `runner align` on a copy of the project (an aligned pipeline, if one ships, is written
#    there, not into this checkout), with at most MAX_EXAMPLES few-shot examples (default 2:
#    each example is a whole claim and its evidence, and the model reads 8,192 tokens).
# Prints a markdown section for bench/RESULTS.md (bench/meta_eval_tally.py).
# CACHE_DIR  the LLM cache (default: one in the temporary folder)
set -euo pipefail

# shellcheck source=bench/llama_server.sh
source "$(dirname "$0")/llama_server.sh"
start_llama_server

CACHE_DIR=${CACHE_DIR:-$WORK/cache}
MAX_EXAMPLES=${MAX_EXAMPLES:-2}
PROJECT=$WORK/project
mkdir -p "$PROJECT/examples"
cp -r "$ROOT/pipelines" "$ROOT/prompts" "$ROOT/schemas" "$PROJECT/"
cp -r "$ROOT/examples/attribution" "$PROJECT/examples/"
export LOCAL_LLM_BASE_URL=$BASE
cd "$PROJECT/examples/attribution"
LABELS=(--labels labels.jsonl --key id --truth label)

started=$EPOCHREALTIME
"$RUNNER" eval ../../pipelines/attribution_judge.yaml --input items.jsonl "${LABELS[@]}" --by wice_label \
    --out "$WORK/eval" --cache-dir "$CACHE_DIR" >"$WORK/eval.stdout" 2>"$WORK/eval.stderr" \
    || { echo "runner eval exited $?:" >&2; cat "$WORK/eval.stderr" >&2; exit 1; }
eval_seconds=$(awk "BEGIN {print $EPOCHREALTIME - $started}")
cat "$WORK/eval.stdout"

started=$EPOCHREALTIME
set +e
"$RUNNER" align ../../pipelines/attribution_judge.yaml --input items.jsonl "${LABELS[@]}" --seed 0 \
    --max-examples "$MAX_EXAMPLES" --out "$WORK/align/align.json" --cache-dir "$CACHE_DIR" \
    >"$WORK/align.stdout" 2>"$WORK/align.stderr"
align_code=$?
set -e
align_seconds=$(awk "BEGIN {print $EPOCHREALTIME - $started}")
cat "$WORK/align.stdout" "$WORK/align.stderr"
echo "runner align exited $align_code" >&2

"$RUNNER_PY" "$ROOT/bench/meta_eval_tally.py" "$WORK/eval" "$WORK/align/align.json" items.jsonl \
    "$eval_seconds" "$align_seconds" "$align_code"
