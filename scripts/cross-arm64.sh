#!/usr/bin/env bash
# Cross-builds synapse for ARM64 with aarch64-linux-gnu-g++ and runs, under
# qemu-aarch64, tests/cross/neon_check: every NEON dot kernel
# (src/quant/*_neon.cpp) against its scalar reference, bit for bit. Then
# compares `neon_check --digest` (dots of the same seeded rows through the
# active ISA) on ARM64 (NEON, then scalar) with a host x86-64 build of the
# same program (AVX2 where the CPU has it, then scalar): all four must match.
#
#   scripts/cross-arm64.sh              build neon_check (build-arm64/ and
#                                       build-arm64-host/) and run it
#   TESTS="quant gguf" scripts/cross-arm64.sh
#                                       also build test_quant, test_gguf and run
#                                       them under qemu (slow: minutes each)
#   E2E=1 scripts/cross-arm64.sh        also build `synapse` for both and check
#                                       that `synapse logits` (16 tokens, then 4
#                                       greedy ids) is bit-identical on ARM64 and
#                                       x86-64 for every tests/data/models file
#                                       (a whole-build's compile time, ~10 min)
#
# On the machine this was written on, qemu-user 7.2 hangs as soon as a guest
# program starts a second thread: the ARM64 runs here use one thread (-t 1),
# and test binaries whose tests start threads (QuantizeModel.*, the thread
# pool's) need GTEST_FILTER to leave those out.
#
# Installs what is missing on first use (Debian 12, root or sudo): the cross
# compiler, qemu-user and, through dpkg multiarch (adds the arm64
# architecture), the arm64 builds of the libraries CMake looks for. Not run by
# CI (x86-64). BUILD_DIR overrides the build folder; JOBS the build's -j
# (default 2). GTEST_FILTER passes through to the test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-arm64}
host=${HOST_BUILD_DIR:-build-arm64-host}
jobs=${JOBS:-2}
sysroot=/usr/aarch64-linux-gnu

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
pkgs=(g++-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 libgtest-dev:arm64 libbenchmark-dev:arm64 libcpp-httplib-dev:arm64
      nlohmann-json3-dev libcli11-dev cmake pkg-config)
missing=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "cross-arm64: installing ${missing[*]}" >&2
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CMAKE_LIBRARY_ARCHITECTURE makes find_package look in lib/aarch64-linux-gnu;
# the emulator runs the test binaries (gtest discovery, ctest) under qemu.
PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
  -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ -DCMAKE_LIBRARY_ARCHITECTURE=aarch64-linux-gnu \
  -DCMAKE_CROSSCOMPILING_EMULATOR="qemu-aarch64;-L;$sysroot" >/dev/null

targets=(neon_check)
for t in ${TESTS:-}; do targets+=("test_$t"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

qemu-aarch64 -L "$sysroot" "$build/neon_check"
SYNAPSE_NO_SIMD=1 qemu-aarch64 -L "$sysroot" "$build/neon_check" | tail -n 1

# The same dots on both architectures.
cmake -S . -B "$host" -DCMAKE_BUILD_TYPE=Release -DSYNAPSE_BUILD_TESTS=OFF >/dev/null
cmake --build "$host" -j "$jobs" --target neon_check >/dev/null
digests=("$(qemu-aarch64 -L "$sysroot" "$build/neon_check" --digest)"
         "$(SYNAPSE_NO_SIMD=1 qemu-aarch64 -L "$sysroot" "$build/neon_check" --digest)"
         "$("$host/neon_check" --digest)"
         "$(SYNAPSE_NO_SIMD=1 "$host/neon_check" --digest)")
printf 'arm64  %s\n' "${digests[0]}" "${digests[1]}"
printf 'x86-64 %s\n' "${digests[2]}" "${digests[3]}"
for d in "${digests[@]}"; do  # "digest HEX (N dots, active_isa ISA)": compare up to " ("
  [ "${d%% (*}" = "${digests[0]%% (*}" ] || { echo "cross-arm64: FAIL, the digests differ" >&2; exit 1; }
done
echo "cross-arm64: the same dot bits on ARM64 and x86-64"
if [ -n "${E2E:-}" ]; then
  cmake --build "$build" -j "$jobs" --target synapse >/dev/null
  cmake --build "$host" -j "$jobs" --target synapse >/dev/null
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  ids=1,415,298,338,263,124,492,127,471,263,217,482,5,9,100,17  # < 512, the smallest n_vocab there
  n=0
  for f in tests/data/models/*.gguf; do
    [[ $f == *.imatrix.gguf ]] && continue  # an importance matrix, not a model
    qemu-aarch64 -L "$sysroot" "$build/synapse" logits -m "$f" --ids "$ids" -t 1 -o "$tmp/arm.f32" --greedy 4 \
      >"$tmp/arm.txt" 2>/dev/null
    "$host/synapse" logits -m "$f" --ids "$ids" -o "$tmp/x86.f32" --greedy 4 >"$tmp/x86.txt" 2>/dev/null
    if ! cmp -s "$tmp/arm.f32" "$tmp/x86.f32" || ! cmp -s "$tmp/arm.txt" "$tmp/x86.txt"; then
      echo "cross-arm64: FAIL, $f: the logits or greedy ids differ between ARM64 and x86-64" >&2
      exit 1
    fi
    n=$((n + 1))
  done
  echo "cross-arm64: synapse logits bit-identical on ARM64 and x86-64 for $n models"
fi

for t in ${TESTS:-}; do
  echo "cross-arm64: test_$t under qemu-aarch64" >&2
  (cd "$build" && qemu-aarch64 -L "$sysroot" "./test_$t" --gtest_brief=1)
done
