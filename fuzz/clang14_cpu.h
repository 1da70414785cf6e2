// Force-included into src/quant/legacy_avx2.cpp in the fuzz build only (see
// fuzz/CMakeLists.txt): clang 14 rejects __builtin_cpu_supports("f16c").
#pragma once
#define __builtin_cpu_supports(feature) __builtin_cpu_supports("avx2")
