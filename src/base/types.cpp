// The ggml type table: block size and bytes per block of every type id a GGUF
// file may carry. Source: ggml.c's type_traits (blck_size, type_size) and the
// block_* structs of ggml-common.h.
#include <cctype>
#include <iterator>

#include "synapse/types.hpp"

namespace synapse {
namespace {

constexpr TypeTraits kUnknown{"unknown", 1, 0, false, false};

constexpr TypeTraits kTraits[] = {
    /* 0  F32     */ {"F32", 1, 4, true, true},
    /* 1  F16     */ {"F16", 1, 2, true, true},
    /* 2  Q4_0    */ {"Q4_0", 32, 18, true, true},   // f16 d, 16 B nibbles
    /* 3  Q4_1    */ {"Q4_1", 32, 20, true, true},   // f16 d, f16 m, 16 B
    /* 4  removed */ kUnknown,
    /* 5  removed */ kUnknown,
    /* 6  Q5_0    */ {"Q5_0", 32, 22, true, true},   // f16 d, 4 B qh, 16 B
    /* 7  Q5_1    */ {"Q5_1", 32, 24, true, true},   // f16 d, f16 m, 4 B qh, 16 B
    /* 8  Q8_0    */ {"Q8_0", 32, 34, true, true},   // f16 d, 32 int8
    /* 9  Q8_1    */ {"Q8_1", 32, 36, true, false},  // f16 d, f16 s, 32 int8 (activations)
    /* 10 Q2_K    */ {"Q2_K", 256, 84, true, true},
    /* 11 Q3_K    */ {"Q3_K", 256, 110, true, true},
    /* 12 Q4_K    */ {"Q4_K", 256, 144, true, true},
    /* 13 Q5_K    */ {"Q5_K", 256, 176, true, true},
    /* 14 Q6_K    */ {"Q6_K", 256, 210, true, true},
    /* 15 Q8_K    */ {"Q8_K", 256, 292, true, false},  // activations only
    /* 16 IQ2_XXS */ {"IQ2_XXS", 256, 66, true, true},
    /* 17 IQ2_XS  */ {"IQ2_XS", 256, 74, true, true},
    /* 18 IQ3_XXS */ {"IQ3_XXS", 256, 98, true, true},
    /* 19 IQ1_S   */ {"IQ1_S", 256, 50, true, true},
    /* 20 IQ4_NL  */ {"IQ4_NL", 32, 18, true, true},
    /* 21 IQ3_S   */ {"IQ3_S", 256, 110, true, true},
    /* 22 IQ2_S   */ {"IQ2_S", 256, 82, true, true},
    /* 23 IQ4_XS  */ {"IQ4_XS", 256, 136, true, true},
    /* 24 I8      */ {"I8", 1, 1, true, false},
    /* 25 I16     */ {"I16", 1, 2, true, false},
    /* 26 I32     */ {"I32", 1, 4, true, false},
    /* 27 I64     */ {"I64", 1, 8, true, false},
    /* 28 F64     */ {"F64", 1, 8, true, false},
    /* 29 IQ1_M   */ {"IQ1_M", 256, 56, true, true},
    /* 30 BF16    */ {"BF16", 1, 2, true, true},
    /* 31 removed */ kUnknown,
    /* 32 removed */ kUnknown,
    /* 33 removed */ kUnknown,
    /* 34 TQ1_0   */ {"TQ1_0", 256, 54, true, true},
    /* 35 TQ2_0   */ {"TQ2_0", 256, 66, true, true},
    /* 36 removed */ kUnknown,
    /* 37 removed */ kUnknown,
    /* 38 removed */ kUnknown,
    /* 39 MXFP4   */ {"MXFP4", 32, 17, true, true},  // E8M0 exponent, 16 B of E2M1 nibbles
};
static_assert(std::size(kTraits) == kGgmlTypeCount, "one entry per type id");

}  // namespace

const TypeTraits& type_traits(uint32_t id) noexcept {
  if (id >= std::size(kTraits)) return kUnknown;
  return kTraits[id];
}

bool type_from_name(std::string_view name, GgmlType& out) noexcept {
  for (uint32_t id = 0; id < std::size(kTraits); ++id) {
    const TypeTraits& t = kTraits[id];
    if (!t.known || t.name.size() != name.size()) continue;
    bool same = true;
    for (size_t k = 0; k < name.size() && same; ++k)
      same = std::toupper(static_cast<unsigned char>(name[k])) == t.name[k];
    if (same) {
      out = static_cast<GgmlType>(id);
      return true;
    }
  }
  return false;
}

}  // namespace synapse
