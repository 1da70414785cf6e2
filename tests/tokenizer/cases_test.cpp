// The referee: every line of tests/data/tokenizer/cases/*.jsonl (what llama.cpp
// c392e509 gives) and every .inp/.out pair of tests/data/tokenizer/vocab/.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/fixtures.hpp"

namespace synapse::test {

std::vector<Case> load_cases(const std::string& vocab_name) {
  std::ifstream in(tokenizer_data("cases/" + vocab_name + ".jsonl"), std::ios::binary);
  if (!in) throw std::runtime_error("cannot open the case file of " + vocab_name);
  std::vector<Case> cases;
  std::string line;
  const auto field = [](const nlohmann::json& j, const std::string& key) -> std::string {
    if (j.contains(key)) return j.at(key).get<std::string>();
    return base64_decode(j.at(key + "_b64").get<std::string>());
  };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    Case c;
    c.name = j.at("name").get<std::string>();
    c.text = field(j, "text");
    c.add_special = j.at("add_special").get<bool>();
    c.parse_special = j.at("parse_special").get<bool>();
    c.ids = j.at("ids").get<std::vector<token_id>>();
    if (j.contains("pieces")) {
      c.pieces = j.at("pieces").get<std::vector<std::string>>();
    } else {
      for (const auto& p : j.at("pieces_b64")) c.pieces.push_back(base64_decode(p.get<std::string>()));
    }
    c.detok = field(j, "detok");
    c.detok_plain = field(j, "detok_plain");
    cases.push_back(std::move(c));
  }
  return cases;
}

namespace {

std::string show_ids(const std::vector<token_id>& ids) {
  std::ostringstream os;
  const size_t n = std::min<size_t>(ids.size(), 24);
  for (size_t i = 0; i < n; ++i) os << (i ? " " : "") << ids[i];
  if (ids.size() > n) os << " ... (" << ids.size() << " ids)";
  return os.str();
}

class CaseFile : public ::testing::TestWithParam<std::string> {};

// ids, detok (unparse_special), detok_plain and each piece, for every line.
TEST_P(CaseFile, MatchesLlamaCpp) {
  const std::string& vocab = GetParam();
  const Tokenizer& tok = load_tokenizer(vocab);
  const std::vector<Case> cases = load_cases(vocab);
  ASSERT_GT(cases.size(), 300u);
  std::vector<std::string> failed;
  for (const Case& c : cases) {
    std::vector<std::string> why;
    const auto ids = tok.tokenize(c.text, c.add_special, c.parse_special);
    if (ids != c.ids) why.push_back("ids: got [" + show_ids(ids) + "] want [" + show_ids(c.ids) + "]");
    if (tok.detokenize(c.ids, false, true) != c.detok) why.push_back("detok");
    if (tok.detokenize(c.ids, false, false) != c.detok_plain) why.push_back("detok_plain");
    std::vector<std::string> pieces;
    for (token_id id : c.ids) pieces.push_back(tok.token_to_piece(id, true));
    if (pieces != c.pieces) why.push_back("pieces");
    if (!why.empty()) {
      std::string msg = c.name + ":";
      for (const auto& w : why) msg += " " + w + ";";
      failed.push_back(msg);
    }
  }
  std::string report;
  for (const auto& f : failed) report += "\n  " + f;
  EXPECT_TRUE(failed.empty()) << vocab << ": " << failed.size() << " of " << cases.size()
                              << " cases differ from llama.cpp:" << report;
  RecordProperty("cases", static_cast<int>(cases.size()));
  RecordProperty("failed", static_cast<int>(failed.size()));
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, CaseFile, ::testing::ValuesIn(case_vocabs()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// llama.cpp's own test-tokenizer-0 vectors: tokenize(add_special = false,
// parse_special = false) of each .inp string equals the .out line.
class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, MatchTestTokenizer0) {
  const std::string& vocab = GetParam();
  const Tokenizer& tok = load_tokenizer(vocab);
  const std::string base = vocab_path(vocab);
  std::ifstream inp(base + ".inp", std::ios::binary), outf(base + ".out", std::ios::binary);
  ASSERT_TRUE(inp && outf) << base;
  std::stringstream ss;
  ss << inp.rdbuf();
  const std::string all = ss.str();
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t at = 0; at < all.size();) {
    const size_t p = all.find(sep, at);
    if (p == std::string::npos) break;
    texts.push_back(all.substr(at, p - at));
    at = p + sep.size();
  }
  std::vector<std::vector<token_id>> want;
  for (std::string line; std::getline(outf, line);) {
    std::vector<token_id> ids;
    std::istringstream ls(line);
    for (token_id id; ls >> id;) ids.push_back(id);
    want.push_back(ids);
  }
  ASSERT_EQ(texts.size(), 46u);
  ASSERT_EQ(want.size(), texts.size());
  int failed = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = tok.tokenize(texts[i], false, false);
    if (ids != want[i]) {
      ++failed;
      ADD_FAILURE() << vocab << " string " << i << ": got [" << show_ids(ids) << "] want ["
                    << show_ids(want[i]) << "]";
    }
  }
  EXPECT_EQ(failed, 0);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, VocabVectors,
                         ::testing::Values("llama-spm", "mistral-spm", "phi-3", "llama-bpe",
                                           "llama-bpe-3.1", "qwen2", "gpt-2"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// detokenize(tokenize(text)) == text wherever llama.cpp's own round trip
// (detok_plain of its ids without added specials) gives the text back.
class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, DetokenizeInvertsTokenize) {
  const std::string& vocab = GetParam();
  const Tokenizer& tok = load_tokenizer(vocab);
  int checked = 0;
  std::vector<std::string> failed;
  for (const Case& c : load_cases(vocab)) {
    if (c.add_special || c.parse_special || c.detok_plain != c.text) continue;
    ++checked;
    if (tok.detokenize(tok.tokenize(c.text, false, false), false, false) != c.text)
      failed.push_back(c.name);
  }
  EXPECT_GT(checked, 100);
  std::string report;
  for (const auto& f : failed) report += " " + f;
  EXPECT_TRUE(failed.empty()) << vocab << ": round trip fails for" << report;
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, RoundTrip, ::testing::ValuesIn(case_vocabs()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace synapse::test
