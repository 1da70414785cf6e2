#!/usr/bin/env bash
# Configures and builds synapse (Release) into build/ (or $BUILD_DIR): the
# libraries, the `synapse` binary, tests, benchmarks and examples; further
# arguments go to CMake's configure step.
#
# scripts/build.sh --synapse-only [CMAKE ARGS]: the `synapse` binary alone
# (README command 1); tests, benchmarks and examples are configured off, and
# a later plain run (README command 2) turns them back on.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
if [ "${1:-}" = --synapse-only ]; then
  shift
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSYNAPSE_BUILD_TESTS=OFF -DSYNAPSE_BUILD_BENCHMARKS=OFF \
        -DSYNAPSE_BUILD_EXAMPLES=OFF "$@" >/dev/null
  cmake --build "$build" -j "$(nproc)" --target synapse
else
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSYNAPSE_BUILD_TESTS=ON -DSYNAPSE_BUILD_BENCHMARKS=ON \
        -DSYNAPSE_BUILD_EXAMPLES=ON "$@" >/dev/null
  cmake --build "$build" -j "$(nproc)"
fi
