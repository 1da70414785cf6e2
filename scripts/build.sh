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
# Ninja where it is installed (scripts/setup.sh installs it): it starts a
# target's compiles while the libraries below it still build, only their links
# wait, so both cores stay busy through the layer chain; make runs the
# targets one after another there. A folder configured before keeps its
# generator (CMake refuses a change).
gen=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
if [ "${1:-}" = --synapse-only ]; then
  shift
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DSYNAPSE_BUILD_TESTS=OFF -DSYNAPSE_BUILD_BENCHMARKS=OFF \
        -DSYNAPSE_BUILD_EXAMPLES=OFF "$@" >/dev/null
  cmake --build "$build" -j "$(nproc)" --target synapse
else
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DSYNAPSE_BUILD_TESTS=ON -DSYNAPSE_BUILD_BENCHMARKS=ON \
        -DSYNAPSE_BUILD_EXAMPLES=ON "$@" >/dev/null
  cmake --build "$build" -j "$(nproc)"
fi
