// /props' model_ftype (server::llama_ftype_name) against what llama-server
// v0.5.0's GET /props says for the same files (/work/ref/llama-build's
// llama-server on each, 2026-12-06).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/http_server.hpp"
#include "synapse/gguf.hpp"
#include "synapse/types.hpp"

namespace synapse::server {
namespace {

std::string ftype_of(const std::string& model) {
  return llama_ftype_name(gguf::File::open(SYNAPSE_TEST_DATA "/models/" + model));
}

TEST(LlamaFtype, IsLlamaServersModelFtype) {
  EXPECT_EQ(ftype_of("stories260K.gguf"), "(guessed) all F32");  // no general.file_type
  EXPECT_EQ(ftype_of("stories260K-q8_0.gguf"), "Q8_0");
  EXPECT_EQ(ftype_of("stories260K-q4_0.gguf"), "Q4_0");
  EXPECT_EQ(ftype_of("tiny-llama-q4_k_m.gguf"), "Q4_K - Medium");
  EXPECT_EQ(ftype_of("tiny-gpt-oss-mxfp4_moe.gguf"), "MXFP4 MoE");
  EXPECT_EQ(ftype_of("tiny-llama-bf16.gguf"), "BF16");
}

// Without general.file_type: the type of the most tensors, the first to
// reach that count in name order on a tie (llama-model-loader.cpp's guess);
// a type without a file type of its own reads as all F32.
TEST(LlamaFtype, GuessesFromTheMostCommonTensorType) {
  auto file = [](std::vector<std::pair<std::string, GgmlType>> tensors, std::optional<uint32_t> file_type) {
    gguf::Writer w;
    if (file_type) w.set_u32("general.file_type", *file_type);
    const std::vector<int64_t> ne = {256, 1};  // one K-quant block
    for (const auto& [name, type] : tensors) {
      const std::vector<uint8_t> data(row_size(type, 256));
      w.add_tensor(name, type, ne, data);
    }
    return gguf::File::from_bytes(w.bytes(), "test");
  };
  EXPECT_EQ(llama_ftype_name(file({{"a", GgmlType::Q4_K}, {"b", GgmlType::Q4_K}, {"c", GgmlType::F32}}, {})),
            "(guessed) Q4_K - Medium");
  // A tie: "a" (Q6_K) reaches 1 first, "d" brings Q6_K to 2 after "c" has done so for F16.
  EXPECT_EQ(llama_ftype_name(file({{"a", GgmlType::Q6_K}, {"b", GgmlType::F16}, {"c", GgmlType::F16},
                                   {"d", GgmlType::Q6_K}}, {})),
            "(guessed) F16");
  EXPECT_EQ(llama_ftype_name(file({{"z", GgmlType::Q8_0}, {"a", GgmlType::Q3_K}}, {})), "(guessed) Q3_K - Medium");
  // A stored value: its text; llama.cpp's "guessed" bit (1024) is honoured there too.
  EXPECT_EQ(llama_ftype_name(file({{"a", GgmlType::Q8_0}}, 99u)), "unknown, may not work");
  EXPECT_EQ(llama_ftype_name(file({{"a", GgmlType::Q8_0}}, 1024u + 7u)), "(guessed) Q8_0");
  EXPECT_EQ(llama_ftype_name(file({{"a", GgmlType::Q8_0}}, 21u)), "Q2_K - Small");
}

}  // namespace
}  // namespace synapse::server
