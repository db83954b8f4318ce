#!/usr/bin/env bash
# Every shipped pipeline's example against a real OpenAI-compatible server: llama-cpp-python
# 0.3.36 serving Gemma 3 270M Q4_K_M on CPU, with runner's default settings (the models are
# only pointed at the server, nothing is tuned). Not part of CI: the first build of
# llama-cpp-python takes about 20-40 minutes on 2 cores.
#
#     bench/real_server.sh [PIPELINE...]      # default: all five
#
# LLAMA_VENV, RUNNER, KEEP=1: see bench/llama_server.sh
# RUN_ARGS     more `runner run` arguments for every run, e.g. RUN_ARGS="--concurrency 4"
#
# Prints one table row per pipeline: answers parsed / calls, HTTP requests, failed calls,
# items by verdict, cold wall time and the cached rerun's wall time (see bench/real_server_tally.py).
set -euo pipefail

# shellcheck source=bench/llama_server.sh
source "$(dirname "$0")/llama_server.sh"
start_llama_server

# Every example, as the README runs it: cold (empty cache), then again from the cache.
# Hosted seats stay disabled (no keys); ollama_chat/ models are pointed at the server.
point() { echo --set "models.$1.model=openai/gemma" --set "models.$1.api_base=$BASE"; }
ONLY=" $* "
run() {  # NAME DIR -- runner run arguments
    local name=$1 dir=$2; shift 3
    if [[ "$ONLY" != "  " && "$ONLY" != *" $name "* ]]; then return; fi
    local cache=$WORK/$name/cache started seconds cold rerun parsed
    mkdir -p "$WORK/$name"
    for pass in cold rerun; do
        started=$EPOCHREALTIME
        (cd "$ROOT/$dir" && env -u OPENAI_API_KEY -u GOOGLE_API_KEY LOCAL_LLM_BASE_URL="$BASE" PARSER_BASE_URL="$BASE" \
            "$RUNNER" run "$@" ${RUN_ARGS:-} --out "$WORK/$name/$pass" --cache-dir "$cache") \
            >"$WORK/$name/$pass.stdout" 2>"$WORK/$name/$pass.stderr" \
            || { echo "$name ($pass) exited $?:" >&2; cat "$WORK/$name/$pass.stderr" >&2; }
        seconds=$(awk "BEGIN {print $EPOCHREALTIME - $started}")
        if [[ $pass == cold ]]; then
            cold=$seconds
            # Only parsed, valid answers are cached: the cache's size after the cold run counts them.
            parsed=$("$RUNNER_PY" -c "import diskcache, sys; print(len(diskcache.Cache(sys.argv[1])))" "$cache/responses")
        else
            rerun=$seconds
        fi
    done
    "$RUNNER_PY" "$ROOT/bench/real_server_tally.py" "$name" "$WORK/$name/cold" "$WORK/$name/rerun" "$parsed" "$cold" "$rerun"
}

echo "| pipeline | answers parsed / calls | HTTP requests | failed calls | items by verdict | wall time | cached rerun |"
echo "|---|---|---|---|---|---|---|"
# shellcheck disable=SC2046
{
run citation_judge examples/citation_judge -- ../../pipelines/citation_judge.yaml --input report.md
run verdict_analyzer . -- pipelines/verdict_analyzer.yaml --input examples/verdict_analyzer/input.jsonl $(point analyst)
run evidence_judge . -- pipelines/evidence_judge.yaml --input examples/evidence_judge/input.json $(point judge)
run deep_judgment . -- pipelines/deep_judgment.yaml --input examples/deep_judgment/input.json
run slide_judge examples/slide_judge -- ../../pipelines/slide_judge.yaml --input input.json $(point judge)
}
