// /infill's prompt (server/infill.hpp) against what llama-server v0.5.0 sent
// its model: tests/data/server/infill.tiny-qwen2-f32.json holds llama-server's
// replies (scripts/golden/make_infill_golden.py), whose "prompt" is the prompt's
// tokens detokenized with their special texts and "tokens_evaluated" their count.
#include <gtest/gtest.h>

#include <fstream>

#include "server/infill.hpp"
#include "server/request.hpp"
#include "synapse/synapse.hpp"

namespace synapse::server {
namespace {

using nlohmann::json;

json golden() {
  std::ifstream f(SYNAPSE_TEST_DATA "/server/infill.tiny-qwen2-f32.json");
  return json::parse(f);
}

// The settings of the golden run: -b 256 -c 1024 (one slot), no -n.
constexpr InfillParams kParams{256, -1, 1024, false};

TEST(Infill, PromptIsLlamaServers) {
  const Model model = Model::load(SYNAPSE_TEST_DATA "/models/tiny-qwen2-f32.gguf");
  const Tokenizer& tok = model.tokenizer();
  const json g = golden();
  ASSERT_EQ(g["cases"].size(), 6u);
  for (const json& c : g["cases"]) {
    const json& reply = c["reply"];
    ASSERT_EQ(reply["status"], 200);
    // A stream's last event carries the prompt.
    const json& fin = reply.contains("events") ? reply["events"].back() : reply["body"];
    const std::vector<token_id> ids = infill_prompt(c["request"], tok, kParams);
    EXPECT_EQ(tok.detokenize(ids, false, true), fin["prompt"].get<std::string>()) << c["request"].dump();
    EXPECT_EQ(static_cast<int64_t>(ids.size()), fin["tokens_evaluated"].get<int64_t>()) << c["request"].dump();
  }
  // The Qwen2 vocabulary's markers, found by their texts: the repository line
  // first, the middle token last.
  const FimTokens fim = tok.fim();
  EXPECT_EQ(fim.pre, 506);
  EXPECT_EQ(fim.mid, 507);
  EXPECT_EQ(fim.suf, 508);
  EXPECT_EQ(fim.pad, 509);
  EXPECT_EQ(fim.rep, 510);
  EXPECT_EQ(fim.sep, 511);
  const std::vector<token_id> ids = infill_prompt(g["cases"][0]["request"], tok, kParams);
  EXPECT_EQ(ids.front(), fim.rep);
  EXPECT_EQ(ids.back(), fim.mid);

  // The long case is cut as llama-server cuts it: the prefix keeps its last
  // 3 * (256 / 4) = 192 tokens, the suffix its first 64 - 2 = 62.
  const json& long_case = g["cases"][2]["request"];
  const std::vector<token_id> full_prefix = tok.tokenize(long_case["input_prefix"].get<std::string>(), false, false);
  ASSERT_GT(full_prefix.size(), 192u);
  const std::vector<token_id> cut = infill_prompt(long_case, tok, kParams);
  const auto pre = std::find(cut.begin(), cut.end(), fim.pre);
  const auto suf = std::find(cut.begin(), cut.end(), fim.suf);
  ASSERT_TRUE(pre != cut.end() && suf != cut.end());
  EXPECT_EQ(std::vector<token_id>(pre + 1, suf), std::vector<token_id>(full_prefix.end() - 192, full_prefix.end()));
  EXPECT_EQ(cut.end() - suf, 1 + 62 + 1);

  // --spm-infill: the suffix part before the prefix part.
  InfillParams spm = kParams;
  spm.spm_infill = true;
  const std::vector<token_id> s = infill_prompt(g["cases"][0]["request"], tok, spm);
  EXPECT_LT(std::find(s.begin(), s.end(), fim.suf), std::find(s.begin(), s.end(), fim.pre));
  EXPECT_EQ(s.size(), ids.size());
}

// The status and message of what infill_prompt throws for `body`.
std::pair<int, std::string> error_of(const json& body, const Tokenizer& tok) {
  try {
    infill_prompt(body, tok, kParams);
  } catch (const HttpError& e) {
    return {e.status(), e.what()};
  }
  return {0, "accepted"};
}

TEST(Infill, BadBodiesAndModelsWithoutFim) {
  const Model model = Model::load(SYNAPSE_TEST_DATA "/models/tiny-qwen2-f32.gguf");
  const json g = golden();
  // llama-server's 400s, message for message.
  for (size_t i = 0; i < 3; ++i) {
    const json& c = g["bad_cases"][i];
    EXPECT_EQ(error_of(c["request"], model.tokenizer()),
              std::make_pair(400, c["reply"]["body"]["error"]["message"].get<std::string>()));
  }
  // Where llama-server goes on (a "prompt" that is not a string: ignored) or
  // fails with a 500 (a missing input_suffix), a 400 naming the field.
  EXPECT_EQ(error_of(g["bad_cases"][3]["request"], model.tokenizer()),
            std::make_pair(400, std::string("\"prompt\" must be a string")));
  EXPECT_EQ(error_of(g["bad_cases"][4]["request"], model.tokenizer()),
            std::make_pair(400, std::string("\"input_suffix\" is required")));
  const json base = g["cases"][0]["request"];
  auto with = [&](const char* key, json value) {
    json b = base;
    b[key] = std::move(value);
    return error_of(b, model.tokenizer());
  };
  EXPECT_EQ(with("input_prefix", 3).first, 400);
  EXPECT_EQ(with("input_prefix", json::array({"a", 1.5})).second, "'input_prefix[1]' must be a string or a token id, got 1.5");
  EXPECT_EQ(with("input_suffix", json::array({100000})).first, 400);
  EXPECT_EQ(with("input_extra", json::array({"text"})).first, 400);

  const Model no_fim = Model::load(SYNAPSE_TEST_DATA "/models/stories260K.gguf");
  const json& r = g["no_fim_cases"][0]["reply"];
  EXPECT_EQ(error_of(base, no_fim.tokenizer()),
            std::make_pair(r["status"].get<int>(), r["body"]["error"]["message"].get<std::string>()));
}

}  // namespace
}  // namespace synapse::server
