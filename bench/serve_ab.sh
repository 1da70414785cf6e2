#!/usr/bin/env bash
# Serving throughput of several engines, alternated A B A B in one run: for
# each cycle and each engine, start the server fresh (an empty prompt cache),
# then run bench/serve_load with 1 client and with N clients (round 1, cold:
# every prompt is prefilled; client 0's prompt is the 1-client run's, so one
# of the N is cached), then both again with the same prompts (round 2, warm:
# the slots hold them), and stop the server. One JSON line per measurement on
# stdout: {"engine", "cycle", "round", serve_load's fields}. Before round 1
# each server answers one short warm-up request of other text.
#
#   bench/serve_ab.sh MODEL CYCLES ENGINE... -- [serve_load options]
#   ENGINE: NAME=synapse:BINARY  (run as BINARY serve -np N -c CTX)
#           NAME=llama:BINARY    (llama-server, -np N -c N*CTX: its context is shared by the slots)
#   env: N (16), CTX (512 per slot), THREADS (2), PORT (8390: the starts take 8391, 8392, ...)
#
#   flock /work/bench.lock bench/serve_ab.sh /work/models/llama-3.2-1b-Q4_K_M.gguf 3 \
#     main=synapse:/tmp/main/synapse branch=synapse:build/synapse \
#     llama=llama:/work/ref/llama-build/bin/llama-server -- --max-tokens 128 --prompt-words 32
#
# Every number is wall-clock time: run it alone on the machine.
set -euo pipefail
model=$1 cycles=$2
shift 2
engines=()
while [[ $# -gt 0 && $1 != -- ]]; do engines+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
load_opts=("$@")
N=${N:-16} CTX=${CTX:-512} THREADS=${THREADS:-2} PORT=${PORT:-8390}
here=$(cd "$(dirname "$0")" && pwd)

# Each start takes the next port: a port whose connections are in TIME-WAIT
# cannot be bound again for a minute (cpp-httplib 0.11 sets SO_REUSEPORT, not
# SO_REUSEADDR).
start() {  # kind binary -> sets pid and PORT
  local kind=$1 bin=$2
  PORT=$((PORT + 1))
  if [[ $kind == synapse ]]; then
    "$bin" serve -m "$model" -np "$N" -c "$CTX" -t "$THREADS" --port "$PORT" >/dev/null 2>&1 &
  else
    "$bin" -m "$model" -np "$N" -c $((N * CTX)) -t "$THREADS" --port "$PORT" >/dev/null 2>&1 &
  fi
  pid=$!
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "serve_ab: $bin exited" >&2; exit 1; }
    sleep 0.5
  done
  echo "serve_ab: $bin not healthy after 150 s" >&2
  exit 1
}

for cycle in $(seq "$cycles"); do
  for e in "${engines[@]}"; do
    name=${e%%=*} spec=${e#*=}
    kind=${spec%%:*} bin=${spec#*:}
    start "$kind" "$bin"
    # A short request of other text first: the first request of a fresh
    # process pays its start-up (page-ins, buffer growth), not prefill.
    curl -sf "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
      -d '{"messages": [{"role": "user", "content": "Warm-up."}], "max_tokens": 4}' >/dev/null
    for round in 1 2; do
      for clients in 1 "$N"; do
        out=$("$here/serve_load" --url "http://127.0.0.1:$PORT" -N "$clients" --requests 1 --json "${load_opts[@]}")
        echo "{\"engine\": \"$name\", \"cycle\": $cycle, \"round\": $round, ${out#\{}"
      done
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
done
