// Loading refuses what synapse cannot run, naming the tensor or key: a weight
// type without kernels (IQ2_XXS), a missing tensor, a Mixtral file with
// neither expert layout, a misshapen tensor, an unknown architecture.
#include <gtest/gtest.h>

#include <functional>

#include "golden_util.hpp"
#include "model/model.hpp"

namespace synapse {
namespace {

using test::data_path;

// Copies `src` through gguf::Writer, letting `edit` change each tensor (return
// false to drop it) and each metadata value.
gguf::File rewrite(const std::string& src,
                   const std::function<bool(const gguf::TensorInfo&, GgmlType&, std::vector<int64_t>&)>& edit,
                   const std::function<void(gguf::Writer&, const gguf::KeyValue&)>& edit_kv = {}) {
  const gguf::File f = gguf::File::open(src);
  gguf::Writer w(f.alignment());
  for (const auto& kv : f.metadata()) {
    if (edit_kv) edit_kv(w, kv);
    else w.set_value(kv.key, kv.value);
  }
  for (const auto& t : f.tensors()) {
    GgmlType type = t.type;
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (!edit(t, type, ne)) continue;
    if (type == t.type && ne == std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)) {
      w.add_tensor(t.name, type, ne, std::span<const uint8_t>(t.data, t.n_bytes));
    } else {
      int64_t rows = 1;
      for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
      std::vector<uint8_t> zeros(row_size(type, ne[0]) * static_cast<size_t>(rows), 0);
      w.add_tensor(t.name, type, ne, zeros);
    }
  }
  const std::vector<uint8_t> bytes = w.bytes();
  return gguf::File::from_bytes(bytes, "edited.gguf");
}

void expect_load_error(gguf::File f, Errc code, std::initializer_list<const char*> needles) {
  try {
    model::load_model(std::move(f));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(LoadErrors, UnsupportedTensorTypeNamesTensorAndType) {
  auto f = rewrite(data_path("models/tiny-llama-f32.gguf"), [](const gguf::TensorInfo& t, GgmlType& type, auto&) {
    if (t.name == "blk.1.attn_q.weight") type = GgmlType::IQ2_XXS;
    return true;
  });
  expect_load_error(std::move(f), Errc::unsupported, {"blk.1.attn_q.weight", "IQ2_XXS"});
}

TEST(LoadErrors, MissingTensor) {
  auto f = rewrite(data_path("models/tiny-llama-f32.gguf"),
                   [](const gguf::TensorInfo& t, auto&, auto&) { return t.name != "blk.0.ffn_up.weight"; });
  expect_load_error(std::move(f), Errc::format, {"blk.0.ffn_up.weight", "missing"});
}

TEST(LoadErrors, MixtralWithNeitherExpertLayout) {
  auto f = rewrite(data_path("models/tiny-mixtral-f32.gguf"),
                   [](const gguf::TensorInfo& t, auto&, auto&) { return t.name != "blk.0.ffn_gate_exps.weight"; });
  expect_load_error(std::move(f), Errc::format, {"blk.0.ffn_gate_exps.weight"});
}

TEST(LoadErrors, MisshapenTensor) {
  auto f = rewrite(data_path("models/tiny-llama-f32.gguf"), [](const gguf::TensorInfo& t, auto&, auto& ne) {
    if (t.name == "blk.0.attn_k.weight") ne[1] = 64;  // [256, 128] expected
    return true;
  });
  expect_load_error(std::move(f), Errc::format, {"blk.0.attn_k.weight", "[256, 64]", "expected [256, 128]"});
}

// token_embd.weight and output.weight with 300 rows for a 512-token
// vocabulary: refused at load naming the file and both numbers (it used to
// load and fail at the first token id >= 300).
TEST(LoadErrors, VocabularyLargerThanTheEmbeddingRows) {
  auto f = rewrite(data_path("models/stories260K.gguf"), [](const gguf::TensorInfo& t, auto&, auto& ne) {
    if (t.name == "token_embd.weight" || t.name == "output.weight") ne[1] = 300;
    return true;
  });
  expect_load_error(std::move(f), Errc::format,
                    {"edited.gguf", "vocabulary has 512 tokens", "token_embd.weight has 300 rows"});
}

TEST(LoadErrors, UnknownArchitectureListsSupported) {
  auto f = rewrite(
      data_path("models/stories260K.gguf"), [](auto&, auto&, auto&) { return true; },
      [](gguf::Writer& w, const gguf::KeyValue& kv) {
        if (kv.key == "general.architecture") w.set_string(kv.key, "gemma");
        else w.set_value(kv.key, kv.value);
      });
  expect_load_error(std::move(f), Errc::unsupported, {"'gemma'", "supported: llama, mistral, qwen2, phi3"});
}

TEST(LoadErrors, SplitExpertsLoadLikeMerged) {
  auto merged = model::load_model(data_path("models/tiny-mixtral-f32.gguf"));
  auto split = model::load_model(data_path("models/tiny-mixtral-split-f32.gguf"));
  ASSERT_EQ(split->layers[0].gate_exps.size(), 4u);
  ASSERT_EQ(merged->layers[0].gate_exps.size(), 4u);
  // The merged tensor is sliced into views of the mapping, without copies.
  const gguf::TensorInfo* t = merged->file.find_tensor("blk.0.ffn_gate_exps.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(merged->layers[0].gate_exps[0].data, t->data);
  EXPECT_EQ(merged->layers[0].gate_exps[3].data, t->data + 3 * t->n_bytes / 4);
  for (int e = 0; e < 4; ++e)
    EXPECT_EQ(0, std::memcmp(merged->layers[0].gate_exps[e].data, split->layers[0].gate_exps[e].data,
                             merged->layers[0].gate_exps[e].row_bytes * merged->layers[0].gate_exps[e].n_out));
}

}  // namespace
}  // namespace synapse
