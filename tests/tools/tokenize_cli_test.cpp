// `synapse tokenize` as a user runs it: every line of every tokenizer case
// file (llama.cpp c392e509's ids and detokenization) through --jsonl in one
// process per file, llama-tokenize's output formats for -p and -f, and one
// error line with exit 1 for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "golden_util.hpp"

namespace synapse {
namespace {

using Result = test::CliResult;
using test::slurp;
using test::synapse_cli;
using test::tmp_path;
using test::spit;

std::string data(const std::string& rel) { return test::data_path(rel); }

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) v.push_back(line);
  return v;
}

std::string b64_decode(const std::string& in) {
  static const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(chars.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// "detok" or the bytes of "detok_b64".
std::string detok_of(const nlohmann::json& j) {
  if (j.contains("detok")) return j.at("detok").get<std::string>();
  return b64_decode(j.at("detok_b64").get<std::string>());
}

std::string vocab_file(const std::string& name) {
  if (name == "stories260K") return data("models/stories260K.gguf");
  return data("tokenizer/vocab/ggml-vocab-" + name + ".gguf");
}

const std::string kStories = data("models/stories260K.gguf");
const std::string kLlamaBpe = data("tokenizer/vocab/ggml-vocab-llama-bpe.gguf");
const std::string kLlamaSpm = data("tokenizer/vocab/ggml-vocab-llama-spm.gguf");

class JsonlCaseFile : public ::testing::TestWithParam<std::string> {};

// The case file itself is the --jsonl input (extra keys are ignored); every
// output line must carry the file's ids and detok (unparse_special = true).
TEST_P(JsonlCaseFile, EveryLineMatchesLlamaCpp) {
  const std::string& vocab = GetParam();
  const std::string cases = data("tokenizer/cases/" + vocab + ".jsonl");
  const Result r = synapse_cli("tokenize -m " + vocab_file(vocab) + " --jsonl " + cases);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::vector<std::string> want = lines_of(slurp(cases)), got = lines_of(r.out);
  ASSERT_GT(want.size(), 300u);
  ASSERT_EQ(got.size(), want.size());
  int failed = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto w = nlohmann::json::parse(want[i]);
    const auto g = nlohmann::json::parse(got[i]);
    const bool ids_ok = g.at("ids") == w.at("ids");
    const bool detok_ok = detok_of(g) == detok_of(w);
    if (!ids_ok || !detok_ok) {
      ++failed;
      ADD_FAILURE() << vocab << " line " << i + 1 << " (" << w.at("name").get<std::string>() << "):"
                    << (ids_ok ? "" : " ids differ") << (detok_ok ? "" : " detok differs") << "\n  got  " << got[i];
    }
  }
  EXPECT_EQ(failed, 0);
}

INSTANTIATE_TEST_SUITE_P(TokenizeCli, JsonlCaseFile,
                         ::testing::Values("stories260K", "llama-spm", "mistral-spm", "phi-3", "llama-bpe",
                                           "llama-bpe-3.1", "qwen2", "gpt-2"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// llama-tokenize's format, "%6d -> '%s'", with BOS added by default.
TEST(TokenizeCli, DefaultPrintsIdArrowPiece) {
  const Result r = synapse_cli("tokenize -m " + kStories + " -p \"Hello world\"");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "     1 -> '<s>'\n"
            "   346 -> ' He'\n"
            "   306 -> 'll'\n"
            "   414 -> 'o'\n"
            "   263 -> ' w'\n"
            "   304 -> 'or'\n"
            "   341 -> 'ld'\n");
}

TEST(TokenizeCli, IdsListAndSpecialFlags) {
  Result r = synapse_cli("tokenize -m " + kLlamaSpm + " -p \"Hello world\" --ids");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 15043, 3186]\n");
  r = synapse_cli("tokenize -m " + kLlamaSpm + " -p \"Hello world\" --ids --no-add-special");
  EXPECT_EQ(r.out, "[15043, 3186]\n");
  // Special token texts become their ids, as llama-tokenize parses them by
  // default; --no-parse-special keeps them text (case npm-llama3-tokenizer-js-13
  // of tests/data/tokenizer/cases/llama-bpe.jsonl; <|eom_id|> is plain text in
  // this vocabulary). The ids are llama-tokenize's (v0.5.0) for the same flags.
  const std::string text =
      " -p \"<|start_header_id|>This text has special tokens<|eom_id|> in the middle of it."
      "<|end_header_id|><|eot_id|>\" --ids --no-add-special";
  r = synapse_cli("tokenize -m " + kLlamaBpe + text + " --no-parse-special");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "[27, 91, 2527, 8932, 851, 91, 29, 2028, 1495, 706, 3361, 11460, 27, 91, 68, 316, 851, 91, 29, 304, "
            "279, 6278, 315, 433, 16134, 91, 408, 8932, 851, 91, 1822, 91, 68, 354, 851, 91, 29]\n");
  for (const char* flags : {"", " --parse-special"}) {
    r = synapse_cli("tokenize -m " + kLlamaBpe + text + flags);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out,
              "[128006, 2028, 1495, 706, 3361, 11460, 27, 91, 68, 316, 851, 91, 29, 304, 279, 6278, 315, 433, 13, "
              "128007, 128009]\n")
        << flags;
  }
}

TEST(TokenizeCli, PiecesListEscapesLikePython) {
  const Result r = synapse_cli("tokenize -m " + kLlamaBpe + " -p \"Hello world\" --pieces");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "['<|begin_of_text|>', 'Hello', ' world']\n");
  const Result q = synapse_cli("tokenize -m " + kLlamaBpe + " -p \"$(printf \"a\\nb'\")\" --pieces --no-add-special");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, "['a', '\\n', 'b', '\\'']\n");
}

TEST(TokenizeCli, ReadsTextFromFileAndStdin) {
  const std::string path = tmp_path("text.txt");
  spit(path, "Hello world");
  Result r = synapse_cli("tokenize -m " + kLlamaSpm + " -f " + path + " --ids");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 15043, 3186]\n");
  r = synapse_cli("tokenize -m " + kLlamaSpm + " -f - --ids <" + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 15043, 3186]\n");
  std::remove(path.c_str());
}

TEST(TokenizeCli, JsonlBase64InAndOutAndDefaults) {
  const std::string path = tmp_path("in.jsonl");
  // "\xff" is not UTF-8: in through text_b64, out through detok_b64 (byte fallback <0xFF>).
  spit(path,
       "{\"text_b64\": \"/w==\", \"add_special\": false, \"parse_special\": false}\n"
       "\n"
       "{\"text\": \"Hello world\"}\n");
  const Result r = synapse_cli("tokenize -m " + kLlamaSpm + " --jsonl " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"ids\": [29871, 258], \"detok_b64\": \"/w==\"}\n"
            "{\"ids\": [1, 15043, 3186], \"detok\": \"<s> Hello world\"}\n");
  std::remove(path.c_str());
}

TEST(TokenizeCli, BadJsonLineNamesItsNumber) {
  const std::string path = tmp_path("bad.jsonl");
  spit(path, "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": oops}\n{\"text\": \"c\"}\n");
  Result r = synapse_cli("tokenize -m " + kLlamaSpm + " --jsonl " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(path + ":3:"), std::string::npos) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 2u) << r.out;  // the lines before it
  spit(path, "{\"text\": \"a\"}\n[1, 2]\n");
  r = synapse_cli("tokenize -m " + kLlamaSpm + " --jsonl " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(":2: not a JSON object"), std::string::npos) << r.err;
  spit(path, "{\"text\": \"a\", \"add_special\": 1}\n");
  r = synapse_cli("tokenize -m " + kLlamaSpm + " --jsonl " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(":1: \"add_special\""), std::string::npos) << r.err;
  spit(path, "{\"add_special\": true}\n");
  r = synapse_cli("tokenize -m " + kLlamaSpm + " --jsonl " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(":1: needs exactly one of"), std::string::npos) << r.err;
  std::remove(path.c_str());
}

TEST(TokenizeCli, MissingFilesAndBadFlagsFailWithOneLine) {
  Result r = synapse_cli("tokenize -m " + tmp_path("no-such.gguf") + " -p hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("no-such.gguf"), std::string::npos) << r.err;
  r = synapse_cli("tokenize -m " + kLlamaSpm + " --jsonl " + tmp_path("no-such.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no-such.jsonl"), std::string::npos) << r.err;
  r = synapse_cli("tokenize -m " + kLlamaSpm + " -f " + tmp_path("no-such.txt"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no-such.txt"), std::string::npos) << r.err;
  // A directory: one line naming it (it was "internal error: basic_filebuf::underflow", exit 3).
  const std::string dir = ::testing::TempDir();
  for (const char* flag : {" -f ", " --jsonl "}) {
    r = synapse_cli("tokenize -m " + kLlamaSpm + flag + dir);
    EXPECT_EQ(r.exit_code, 1) << flag;
    EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
  }
  r = synapse_cli("tokenize -m " + kLlamaSpm + " -p a -f b");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exactly one of -p, -f, --stdin and --jsonl"), std::string::npos) << r.err;
  // A file that is not GGUF at all.
  const std::string junk = tmp_path("junk.gguf");
  spit(junk, "not a gguf file");
  r = synapse_cli("tokenize -m " + junk + " -p hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
  std::remove(junk.c_str());
}

// llama-tokenize's flags: --show-count, --no-bos, --stdin, escapes (on by
// default for -p, -f and --stdin, as llama.cpp's -e). The ids are
// llama-tokenize's (v0.5.0) for the same command lines.
TEST(TokenizeCli, LlamaTokenizeFlags) {
  Result r = synapse_cli("tokenize -m " + kLlamaBpe + " -p 'a\\tb\\x41' --ids --show-count");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[128000, 64, 2282, 32]\nTotal number of tokens: 4\n");
  r = synapse_cli("tokenize -m " + kLlamaBpe + " -p 'a\\tb\\x41' --ids --no-bos");
  EXPECT_EQ(r.out, "[64, 2282, 32]\n");
  r = synapse_cli("tokenize -m " + kLlamaBpe + " -p 'a\\tb' --ids --no-bos --no-escape");
  EXPECT_EQ(r.out, "[64, 5061, 65]\n");  // a, \t, b
  const std::string path = tmp_path("stdin.txt");
  spit(path, "a\\tb\n");
  r = synapse_cli("tokenize -m " + kLlamaBpe + " --stdin --ids --no-bos <" + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[64, 2282, 198]\n");  // the file's newline is tokenized too
  std::remove(path.c_str());
  r = synapse_cli("tokenize -m " + kLlamaBpe + " --stdin -p x");
  EXPECT_EQ(r.exit_code, 1);
}

}  // namespace
}  // namespace synapse
