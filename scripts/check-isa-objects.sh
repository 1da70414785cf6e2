#!/usr/bin/env bash
# Fails when an instruction-set translation unit (src/**/*_avx2.cpp,
# *_avx512.cpp, *_neon.cpp, built with -mavx2 / -mavx512* / -march=armv8.2-a
# flags) emits a weak function: an inline function or a template instance
# (std::vector<float>::_M_default_append, std::fma, ...) compiled out of
# line. The linker keeps ONE copy of each weak symbol for the whole program,
# and it may be the copy compiled with the wider instruction set, which
# generic code then calls: SIGILL on a CPU without it. So these objects may
# define only their own strong functions and local ones (helpers in
# anonymous namespaces). Weak and unique data (nm V, v, u: an inline
# constexpr table, a static local and its guard) is allowed: its bytes do
# not depend on the instruction set, and the code that initialises a static
# local is its function's, checked here. The sanitizer build (-O1) inlines
# less than Release, so scripts/test.sh runs this on both.
# Run by scripts/test.sh on the Release build; BUILD_DIR (default build)
# names the build folder; it must have been built.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${BUILD_DIR:-build}}
mapfile -t objs < <(find "$build" -path '*/src/*' \( -name '*_avx2.cpp.o' -o -name '*_avx512.cpp.o' -o -name '*_neon.cpp.o' \) | sort)
if ((${#objs[@]} == 0)); then
  echo "check-isa-objects: no *_avx2/*_avx512/*_neon objects under $build (build it first)" >&2
  exit 1
fi
bad=0
for o in "${objs[@]}"; do
  # nm types: W/w weak function (V/v weak object, u unique global: data).
  found=$(nm -C --defined-only "$o" | awk '$2 ~ /^[Ww]$/' || true)
  if [[ -n $found ]]; then
    echo "$o: weak functions in an instruction-set object (docs/LAYERS.md, \"Kernel tables and instruction-set translation units\"):"
    echo "$found" | sed 's/^/  /'
    bad=1
  fi
done
if ((bad)); then
  echo "check-isa-objects: FAILED" >&2
  exit 1
fi
echo "check-isa-objects: ${#objs[@]} instruction-set objects define no weak functions"
