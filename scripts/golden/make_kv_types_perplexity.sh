#!/bin/sh
# llama-perplexity (llama.cpp v0.5.0 de3ff81, the reference build) with
# quantized KV caches, for synapse's -ctk/-ctv fidelity test
# (tests/tools/perplexity_cli_test.cpp, "KvTypes"): tiny-llama-f32 (head size
# 64, so every block type fits) over the first 4 chunks of 256 tokens of
# tests/data/text/wikitext-2-test.first100k.raw, one chunk per batch, 2
# threads. Quantized V needs flash attention in llama.cpp, so every run has
# -fa on (the f16 run is the same setting's F16 reference).
# Usage: scripts/golden/make_kv_types_perplexity.sh [LLAMA_BIN_DIR]
# Writes tests/data/golden/kv-types/tiny-llama-f32.wikitext2-c256-4chunks.<type>.txt
# (stdout + stderr of each run; rerunning writes the same figures, the
# timing lines aside).
set -eu
BIN=${1:-/work/ref/llama-build/bin}
cd "$(dirname "$0")/../../tests/data"
# llama.cpp's logger writes from a thread of its own and may lose its last
# lines at exit (it runs unbuffered, and) a run is repeated (up to 5 times) until its output holds
# the final estimate.
for t in f16 q8_0 q4_0; do
  out="golden/kv-types/tiny-llama-f32.wikitext2-c256-4chunks.$t.txt"
  for try in 1 2 3 4 5; do
    stdbuf -o0 -e0 "$BIN/llama-perplexity" -m models/tiny-llama-f32.gguf -f text/wikitext-2-test.first100k.raw \
      -c 256 -b 256 --chunks 4 -fa on -ctk "$t" -ctv "$t" -t 2 > "$out" 2>&1
    if grep -q "Final estimate" "$out" && grep -q '^\[1\].*\[4\]' "$out"; then break; fi
  done
done
