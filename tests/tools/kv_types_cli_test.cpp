// -ctk/--cache-type-k and -ctv/--cache-type-v on the command line: a
// quantized cache gives the same text at any thread count and batch size,
// unknown or unfitting types are one clear error naming the flag or the
// type, `synapse info` lists the KV bytes per token of every type, and
// `synapse bench` reports the types and their bytes (llama-bench's
// type_k/type_v fields). The figures' fidelity to llama.cpp is
// perplexity_cli_test.cpp's (QuantizedKvCacheWithinLlamaPerplexitys).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "golden_util.hpp"

namespace synapse {
namespace {

using test::data_path;
using test::synapse_cli;

const std::string kTiny = data_path("models/tiny-llama-f32.gguf");      // head size 64
const std::string kStories = data_path("models/stories260K.gguf");      // head size 8

std::string run(const std::string& flags) {
  return "run -m " + kTiny + " -p \"Once upon a time\" -n 16 --temp 0 " + flags;
}

TEST(KvTypesCli, SameTextAtAnyThreadsAndBatch) {
  const test::CliResult a = synapse_cli(run("-ctk q8_0 -ctv q4_0 -t 1"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_FALSE(a.out.empty());
  const test::CliResult b = synapse_cli(run("--cache-type-k q8_0 --cache-type-v q4_0 -t 2 -ub 1"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(KvTypesCli, BadTypesAreOneClearError) {
  const test::CliResult unknown = synapse_cli(run("-ctk q3_k"));
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("-ctk (--cache-type-k): unsupported KV cache type 'q3_k' (allowed: f16, bf16, q8_0, "
                             "q4_0, q5_0, iq4_nl)"),
            std::string::npos)
      << unknown.err;
  // llama.cpp's types synapse does not cache in are refused the same way.
  const test::CliResult f32 = synapse_cli(run("--cache-type-v f32"));
  EXPECT_NE(f32.exit_code, 0);
  EXPECT_NE(f32.err.find("--cache-type-v: unsupported KV cache type 'f32'"), std::string::npos) << f32.err;
  // A head size the type's 32-value blocks do not divide.
  const test::CliResult head = synapse_cli("run -m " + kStories + " -p hi -n 2 -ctk q4_0");
  EXPECT_NE(head.exit_code, 0);
  EXPECT_NE(head.err.find("type_k Q4_0: the head size 8 is not a multiple of its block of 32 values"),
            std::string::npos)
      << head.err;
  // A command that keeps no KV cache of its own settings.
  const test::CliResult tok = synapse_cli("tokenize -m " + kTiny + " -p hi -ctk q8_0");
  EXPECT_NE(tok.exit_code, 0);
  EXPECT_NE(tok.err.find("-ctk: not supported by this command"), std::string::npos) << tok.err;
}

// n_layer x (row_size(K) + row_size(V)): tiny-llama has 2 layers of 128 K
// and 128 V values (2 KV heads of 64).
TEST(KvTypesCli, InfoListsKvBytesPerToken) {
  const test::CliResult r = synapse_cli("info " + kTiny);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"  f16      1024\n", "  bf16     1024\n", "  q8_0     544\n", "  q5_0     352\n",
                           "  q4_0     288\n", "  iq4_nl   288\n"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << r.out;
  // stories260K: 5 layers of 32 + 32 values; its head size 8 takes no block type.
  const test::CliResult s = synapse_cli("info " + kStories);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("  f16      640\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("  q8_0     - (type_k Q8_0: the head size 8"), std::string::npos) << s.out;
}

TEST(KvTypesCli, BenchReportsTheTypesAndTheirBytes) {
  const std::string cmd = "bench -m " + kTiny + " -p 0 -n 2 -r 1 -t 1 -ctk q8_0 -ctv q4_0";
  const test::CliResult md = synapse_cli(cmd);
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find(": KV cache K q8_0, V q4_0: 416 bytes per token\n"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| threads | type_k | type_v | test |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find(" | 1 | q8_0 | q4_0 | tg2 | "), std::string::npos) << md.out;
  const test::CliResult js = synapse_cli(cmd + " -o json");
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const nlohmann::json j = nlohmann::json::parse(js.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].at("type_k"), "q8_0");
  EXPECT_EQ(j[0].at("type_v"), "q4_0");
  // tg2 reads on average 1.5 positions a step: 1.5 x 416 bytes.
  EXPECT_DOUBLE_EQ(j[0].at("kv_bytes_per_token").get<double>(), 1.5 * 416);
  // Comma lists, as llama-bench takes them: every K type with every V type.
  const test::CliResult lists = synapse_cli("bench -m " + kTiny + " -p 0 -n 1 -r 1 -t 1 -ctk f16,q8_0 -ctv q4_0,f16 -o json");
  ASSERT_EQ(lists.exit_code, 0) << lists.err;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const nlohmann::json& r : nlohmann::json::parse(lists.out)) pairs.emplace_back(r.at("type_k"), r.at("type_v"));
  EXPECT_EQ(pairs, (std::vector<std::pair<std::string, std::string>>{
                       {"f16", "q4_0"}, {"f16", "f16"}, {"q8_0", "q4_0"}, {"q8_0", "f16"}}));
  const test::CliResult bad = synapse_cli("bench -m " + kTiny + " -p 0 -n 1 -r 1 -ctk f16,q3_k");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("unsupported KV cache type 'q3_k'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace synapse
