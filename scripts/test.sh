#!/usr/bin/env bash
# README command 2: installs what is missing, checks that every #include
# points down the layer table (scripts/check-layers.sh), builds with warnings
# as errors, runs the whole test suite, installs the Python package into .venv
# and runs its pytest suite (scripts/python.sh), installs the libraries into a scratch
# prefix and builds examples/ against that package (find_package(synapse) and
# pkg-config), then builds the suite again with AddressSanitizer +
# UndefinedBehaviorSanitizer (-O1 -g1, in build-asan or $ASAN_BUILD_DIR; the
# test and command-line files at -O0, see SYNAPSE_DRIVER_OPT in CMakeLists.txt;
# warnings are errors only in the Release build: -O1 with sanitizers gives gcc's
# false maybe-uninitialized positives) and runs it there (issue 9); any
# sanitizer report fails its test. There each test binary runs as
# SYNAPSE_SANITIZED_SHARDS gtest shards rather than a process per case, and the
# executables are linked -no-pie: both cut the sanitizers' cost per process
# start (CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check-layers.sh
build=${BUILD_DIR:-build}
# The Python extension is built here too (SYNAPSE_BUILD_PYTHON=ON: the layer
# libraries compiled -fPIC), and scripts/python.sh's install reuses this tree
# instead of compiling the engine a third time in build-python.
scripts/build.sh -DSYNAPSE_WERROR=ON -DSYNAPSE_BUILD_PYTHON=ON -DPython3_EXECUTABLE=/usr/bin/python3
scripts/check-isa-objects.sh "$build"
(cd "$build" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
BUILD_DIR=$build SYNAPSE_PYTHON_BUILD_DIR="$(cd "$build" && pwd)" scripts/python.sh
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix/usr" >/dev/null
cmake -S examples -B "$prefix/examples" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix/usr" >/dev/null
cmake --build "$prefix/examples" -j "$(nproc)"
# (captured first: grep -q closing the pipe early would SIGPIPE the example under pipefail)
example_out=$("$prefix/examples/example_chat" models/stories260K.gguf "Tell me a story." 8 2>&1)
grep -q "tokens, stopped by" <<<"$example_out"
pcdir=$(dirname "$(find "$prefix/usr" -name synapse.pc)")
PKG_CONFIG_PATH="$pcdir" pkg-config --exists synapse
g++ -std=c++20 examples/chat.cpp -o "$prefix/example_chat_pc" \
    $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs synapse)
asan=${ASAN_BUILD_DIR:-build-asan}
# (no benchmarks or examples there: nothing in the suite runs them)
gen=()  # Ninja for a new folder, as scripts/build.sh
if [ ! -f "$asan/CMakeCache.txt" ] && command -v ninja >/dev/null; then gen=(-G Ninja); fi
cmake -S . -B "$asan" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
      -DSYNAPSE_SANITIZE=ON -DSYNAPSE_BUILD_BENCHMARKS=OFF -DSYNAPSE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$asan" -j "$(nproc)"
scripts/check-isa-objects.sh "$asan"  # (-O1 inlines less: helpers must stay local there too)
cd "$asan"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "$(nproc)" --timeout 900
