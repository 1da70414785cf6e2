#!/usr/bin/env bash
# Installs the Python package (and python/compat, the llama_cpp names) into .venv (the README's set-up: a venv over
# Debian's site packages, pip with --no-build-isolation --no-index, so nothing
# is fetched) and runs its pytest suite against build/synapse ($BUILD_DIR).
# pytest's own exit status is the script's: no tests collected (5) fails too.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-/usr/bin/python3}
[ -x .venv/bin/python ] || "$python" -m venv --system-site-packages .venv
.venv/bin/pip install --no-build-isolation --no-index --quiet ./python
# The opt-in llama_cpp compatibility package (its tests run its scripts); it
# refuses to install where a real llama-cpp-python is installed.
.venv/bin/pip install --no-build-isolation --no-index --quiet ./python/compat
# From the repository root, so `import synapse` is the installed package, not python/synapse.
SYNAPSE_BINARY="$PWD/${BUILD_DIR:-build}/synapse" .venv/bin/python -m pytest -p no:cacheprovider -ra python/tests "$@"
