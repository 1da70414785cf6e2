// Generation under a grammar (SamplerParams::grammar): every reply is a
// sentence of the grammar and ends exactly when the grammar does; the greedy
// shortcut (check the argmax first) picks what the full mask picks; a bad
// grammar is refused when the Generation is made.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "golden_util.hpp"
#include "synapse/error.hpp"
#include "synapse/generation.hpp"

namespace synapse {
namespace {

using test::data_path;

struct Fixture {
  Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx{model, 1};
  std::vector<token_id> ids(std::string_view text) const { return model.tokenizer().tokenize(text, true, false); }
  GenerationResult run(const GenerationParams& p, std::string_view prompt) {
    Sequence seq = ctx.new_sequence(256);
    const std::vector<token_id> in = ids(prompt);
    return generate(ctx, seq, in, p);
  }
};

constexpr const char* kGrammar =
    "root ::= \" \" name \" \" verb \" \" [a-z]{2,8} (\" \" [a-z]{2,8}){0,3} \".\"\n"
    "name ::= \"Tom\" | \"Lily\" | \"Ben\"\n"
    "verb ::= \"saw\" | \"had\" | \"wanted\"\n";
const std::regex kSentence(" (Tom|Lily|Ben) (saw|had|wanted) [a-z]{2,8}( [a-z]{2,8}){0,3}\\.");

TEST(GrammarGeneration, RepliesAreSentencesOfTheGrammar) {
  Fixture f;
  for (const float temp : {0.0f, 0.8f, 1.5f}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      GenerationParams p;
      p.sampling.grammar = kGrammar;
      p.sampling.temp = temp;
      p.sampling.seed = seed;
      p.max_tokens = 64;
      const GenerationResult r = f.run(p, "Once upon a time");
      SCOPED_TRACE("temp " + std::to_string(temp) + " seed " + std::to_string(seed) + ": '" + r.text + "'");
      EXPECT_TRUE(std::regex_match(r.text, kSentence));
      // The grammar allows nothing after the full stop but the end of generation.
      EXPECT_EQ(r.finish_reason, FinishReason::stop);
      EXPECT_EQ(r.stop_reason, StopReason::eog);
    }
  }
}

TEST(GrammarGeneration, GreedyShortcutEqualsTheMaskedArgmax) {
  // temp 0 checks the unconstrained argmax first; a temperature so small that
  // every logit / temp overflows is an argmax too, but over the full mask.
  Fixture f;
  GenerationParams a;
  a.sampling.grammar = kGrammar;
  a.sampling.temp = 0.0f;
  a.max_tokens = 64;
  GenerationParams b = a;
  b.sampling.temp = 1e-40f;
  for (const char* prompt : {"Once upon a time", "The dog", "Lily and Ben went"}) {
    const GenerationResult ra = f.run(a, prompt);
    const GenerationResult rb = f.run(b, prompt);
    EXPECT_EQ(ra.tokens, rb.tokens) << prompt;
    EXPECT_EQ(ra.text, rb.text) << prompt;
    EXPECT_TRUE(std::regex_match(ra.text, kSentence)) << ra.text;
  }
}

TEST(GrammarGeneration, JsonShapedGrammarWithRepetitions) {
  Fixture f;
  GenerationParams p;
  p.sampling.grammar = "root ::= \"{\\\"name\\\": \\\"\" [A-Za-z ]{1,12} \"\\\", \\\"age\\\": \" [1-9] [0-9]? \"}\"\n";
  p.sampling.temp = 0.7f;
  p.sampling.seed = 42;
  p.max_tokens = 64;
  const GenerationResult r = f.run(p, "Once upon a time");
  EXPECT_TRUE(std::regex_match(r.text, std::regex("\\{\"name\": \"[A-Za-z ]{1,12}\", \"age\": [1-9][0-9]?\\}")))
      << r.text;
  EXPECT_EQ(r.finish_reason, FinishReason::stop);
}

TEST(GrammarGeneration, IgnoreEosEndsWhereTheGrammarEnds) {
  // ignore_eos: no end of generation while the grammar can continue (here
  // "(...){0,3}" could stop early), and the reply ends with the grammar.
  Fixture f;
  GenerationParams p;
  p.sampling.grammar = "root ::= \" a\" (\" b\"){0,3}\n";
  p.sampling.temp = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = 32;
  const GenerationResult r = f.run(p, "Once upon a time");
  EXPECT_EQ(r.text, " a b b b");
  EXPECT_EQ(r.finish_reason, FinishReason::stop);
}

TEST(GrammarGeneration, PreservedControlTokensAreTextToTheGrammar) {
  // <s> is a control token: it renders as "" (no grammar can write it) unless
  // preserved (a chat format's marker). Favoured by logit_bias, the preserved
  // token writes "<s>" itself; otherwise the grammar spells it with other tokens.
  Fixture f;
  const token_id bos = f.model.tokenizer().bos();
  GenerationParams p;
  p.sampling.grammar = "root ::= \"<s>\" \" a\"\n";
  p.sampling.temp = 0.0f;
  p.sampling.logit_bias = {{bos, 100.0f}};
  p.max_tokens = 16;
  const GenerationResult spelled = f.run(p, "Once upon a time");
  EXPECT_EQ(spelled.text, "<s> a");
  EXPECT_NE(spelled.tokens.front(), bos);
  p.preserved_tokens = {bos};
  const GenerationResult kept = f.run(p, "Once upon a time");
  EXPECT_EQ(kept.text, "<s> a");
  EXPECT_EQ(kept.tokens.front(), bos);
}

// Token references take whole tokens by id, a control token included. The
// replies are llama-server v0.5.0's (/work/ref/llama-build/bin/llama-server
// -m stories260K.gguf; POST /completion {"prompt": "Once upon a time",
// "temperature": 0, "return_tokens": true, "grammar": ...}): same tokens, then
// its end of generation.
TEST(GrammarGeneration, TokenReferencesAsLlamaServer) {
  Fixture f;
  struct Case {
    const char* grammar;
    std::vector<token_id> tokens;
    const char* text;
  };
  const Case cases[] = {
      {"root ::= (!<[426]>){4} <[426]>\n", {432, 383, 286, 261, 426}, ", there was a."},
      {"root ::= <s> (!<[426]>){4} <[426]>\n", {1, 403, 407, 261, 378, 426}, " Once upon a time."},
      {"root ::= \" Tom\" <[394]> (!<[426]>){1,6} \".\"\n",
       {410, 434, 287, 394, 261, 370, 432, 352, 266, 268, 426},
       " Tom saw a big, red b."},
  };
  for (const Case& c : cases) {
    GenerationParams p;
    p.sampling.grammar = c.grammar;
    p.sampling.temp = 0.0f;
    p.max_tokens = 16;
    const GenerationResult r = f.run(p, "Once upon a time");
    EXPECT_EQ(r.tokens, c.tokens) << c.grammar;
    EXPECT_EQ(r.text, c.text) << c.grammar;
    EXPECT_EQ(r.stop_reason, StopReason::eog) << c.grammar;
  }
  GenerationParams p;
  p.sampling.grammar = "root ::= <foo>\n";
  try {
    Generation g(f.model.tokenizer(), p);
    FAIL() << "<foo> is not one token";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "grammar: invalid token '<foo>': the model's tokenizer makes 5 tokens of it, not one");
  }
}

TEST(GrammarGeneration, BadGrammarIsRefusedUpFront) {
  Fixture f;
  GenerationParams p;
  p.sampling.grammar = "root ::= \"a\" missing\n";
  try {
    Generation g(f.model.tokenizer(), p);
    FAIL() << "a grammar with an undefined rule was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_STREQ(e.what(), "grammar: line 1, column 14: undefined rule 'missing'");
  }
}

}  // namespace
}  // namespace synapse
