// /props' model_ftype: llama.cpp's description of a model's file type
// (src/llama-model-loader.cpp: llama_ftype_name and the guess in
// llama_model_loader's constructor).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "server/http_server.hpp"
#include "synapse/gguf.hpp"
#include "synapse/types.hpp"

namespace synapse::server {

namespace {

// llama_ftype_name's text per enum llama_ftype value (include/llama.h).
std::string_view ftype_text(uint32_t ftype) {
  switch (ftype) {
    case 0: return "all F32";
    case 1: return "F16";
    case 32: return "BF16";
    case 40: return "Q1_0";
    case 41: return "Q2_0";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 7: return "Q8_0";
    case 38: return "MXFP4 MoE";
    case 39: return "NVFP4";
    case 10: return "Q2_K - Medium";
    case 21: return "Q2_K - Small";
    case 11: return "Q3_K - Small";
    case 12: return "Q3_K - Medium";
    case 13: return "Q3_K - Large";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 36: return "TQ1_0 - 1.69 bpw ternary";
    case 37: return "TQ2_0 - 2.06 bpw ternary";
    case 19: return "IQ2_XXS - 2.0625 bpw";
    case 20: return "IQ2_XS - 2.3125 bpw";
    case 28: return "IQ2_S - 2.5 bpw";
    case 29: return "IQ2_M - 2.7 bpw";
    case 22: return "IQ3_XS - 3.3 bpw";
    case 23: return "IQ3_XXS - 3.0625 bpw";
    case 24: return "IQ1_S - 1.5625 bpw";
    case 31: return "IQ1_M - 1.75 bpw";
    case 25: return "IQ4_NL - 4.5 bpw";
    case 30: return "IQ4_XS - 4.25 bpw";
    case 26: return "IQ3_S - 3.4375 bpw";
    case 27: return "IQ3_S mix - 3.66 bpw";
    default: return "unknown, may not work";
  }
}

// The file type llama.cpp guesses from the weights' most common type (by
// tensor count); a type with no file type of its own reads as all F32.
uint32_t guessed_ftype(std::string_view type) {
  static const std::map<std::string_view, uint32_t> kByType = {
      {"F32", 0},      {"F16", 1},     {"BF16", 32},    {"Q4_0", 2},     {"Q4_1", 3},    {"Q5_0", 8},
      {"Q5_1", 9},     {"Q8_0", 7},    {"Q2_K", 10},    {"Q3_K", 12},    {"Q4_K", 15},   {"Q5_K", 17},
      {"Q6_K", 18},    {"TQ1_0", 36},  {"TQ2_0", 37},   {"IQ2_XXS", 19}, {"IQ2_XS", 20}, {"IQ2_S", 28},
      {"IQ3_XXS", 23}, {"IQ1_S", 24},  {"IQ1_M", 31},   {"IQ4_NL", 25},  {"IQ4_XS", 30}, {"IQ3_S", 26},
      {"NVFP4", 39},   {"Q1_0", 40},   {"Q2_0", 41}};
  const auto it = kByType.find(type);
  return it == kByType.end() ? 0 : it->second;
}

// llama.cpp's LLAMA_FTYPE_GUESSED: the file type was not in the file.
constexpr uint32_t kGuessed = 1024;

std::string with_guess_mark(uint32_t ftype) {
  const std::string text(ftype_text(ftype & ~kGuessed));
  return (ftype & kGuessed) != 0 ? "(guessed) " + text : text;
}

}  // namespace

std::string llama_ftype_name(const gguf::File& f) {
  if (const auto ft = f.get_u32("general.file_type")) return with_guess_mark(*ft);
  // llama.cpp walks the tensors in name order (its weights map) and keeps the
  // first type to reach the highest count.
  std::map<std::string_view, GgmlType> by_name;
  for (const gguf::TensorInfo& t : f.tensors()) by_name.emplace(t.name, t.type);
  std::map<std::string_view, uint32_t> n_type;
  uint32_t n_max = 0;
  std::string_view type_max = "F32";
  for (const auto& [name, type] : by_name) {
    const std::string_view tn = type_name(type);
    if (++n_type[tn] > n_max) {
      n_max = n_type[tn];
      type_max = tn;
    }
  }
  return with_guess_mark(guessed_ftype(type_max) | kGuessed);
}

}  // namespace synapse::server
