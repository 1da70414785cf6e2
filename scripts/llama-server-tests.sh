#!/usr/bin/env bash
# Runs llama.cpp's own server test suite (tools/server/tests, pytest) against `synapse serve`.
#
#   scripts/llama-server-tests.sh [LLAMA_CPP_DIR] [-- PYTEST ARGS]
#
# LLAMA_CPP_DIR: a llama.cpp checkout (default /work/ref/llama.cpp). The synapse binary is
# $SYNAPSE_BIN (default build/synapse); the model every chosen test uses (ggml-org's stories260K)
# is tests/data/models/stories260K.gguf. Needs python3 with pytest and requests (Debian's
# python3-pytest, python3-requests); wget and filelock are stood in for when missing
# (scripts/llama-server-tests/synapse_offline.py). Offline: the suite's Hugging Face downloads
# are replaced by the local file (scripts/llama-server-tests/llama-server, the shim the suite
# starts as its server binary).
#
# Not run in CI: CI has no llama.cpp checkout. Only the test files of features synapse has are
# run (TESTS below); infill (its model is not here offline; tests/server/infill_test.py), embeddings, rerank, LoRA, speculative decoding, tool calls, Jinja
# templates of other models, multimodal, slots save/restore, router and sleep are out of scope.
# The last results, and what each failure is, are in docs/LLAMA_SERVER_TESTS.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
llama=/work/ref/llama.cpp
if [ $# -gt 0 ] && [ "$1" != "--" ]; then llama=$1; shift; fi
[ "${1:-}" = "--" ] && shift
tests="$llama/tools/server/tests"
[ -d "$tests/unit" ] || { echo "llama-server-tests.sh: no $tests/unit (give a llama.cpp checkout)" >&2; exit 2; }
export SYNAPSE_BIN=${SYNAPSE_BIN:-$root/build/synapse}
export SYNAPSE_TEST_MODEL=${SYNAPSE_TEST_MODEL:-$root/tests/data/models/stories260K.gguf}
[ -x "$SYNAPSE_BIN" ] || { echo "llama-server-tests.sh: no synapse binary at $SYNAPSE_BIN" >&2; exit 2; }
# Absolute paths: the suite runs from a copy elsewhere.
SYNAPSE_BIN=$(realpath "$SYNAPSE_BIN")
SYNAPSE_TEST_MODEL=$(realpath "$SYNAPSE_TEST_MODEL")
export LLAMA_SERVER_BIN_PATH="$here/llama-server-tests/llama-server"
export PYTHONPATH="$here/llama-server-tests${PYTHONPATH:+:$PYTHONPATH}"
TESTS=(test_basic.py test_completion.py test_chat_completion.py test_tokenize.py test_ignore_eos.py
       test_security.py test_metrics.py test_ctx_shift.py)
# A copy of the suite, so that its tmp/ and .pytest_cache stay out of the checkout, at the
# depth it has in llama.cpp: its tests name Jinja templates as ../../../models/templates/*.jinja.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tools/server"
cp -r "$tests" "$work/tools/server/tests"
ln -s "$llama/models" "$work/models"
cd "$work/tools/server/tests"
# Debian's python3 (where python3-pytest is) rather than a pyenv shim's.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
COLUMNS=${COLUMNS:-200} "$py" -m pytest -p synapse_offline -q -rfEs "${TESTS[@]/#/unit/}" "$@"
