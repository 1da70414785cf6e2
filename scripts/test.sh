#!/usr/bin/env bash
# README command 2: installs what is missing, builds, runs the whole test suite,
# installs the Python package into .venv (scripts/python.sh) and runs its pytest
# suite (python/tests), then builds the suite again with AddressSanitizer + UndefinedBehaviorSanitizer
# (-O1 -g1, in build-asan or $ASAN_BUILD_DIR) and runs it there (issue 9); any
# sanitizer report fails its test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
scripts/python.sh
asan=${ASAN_BUILD_DIR:-build-asan}
cmake -S . -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
      -DSYNAPSE_SANITIZE=ON >/dev/null
cmake --build "$asan" -j "$(nproc)"
cd "$asan"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "$(nproc)" --timeout 900
