// Tokenizer API, loading errors, synthetic vocabularies, the pre-tokenizers
// without a vocabulary file here, and hostile input.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "synapse/error.hpp"
#include "tokenizer/fixtures.hpp"
#include "tokenizer/pretokenize.hpp"

namespace synapse::test {
namespace {

using tokenizer::PreTokenizer;
using tokenizer::PreType;

gguf::Value str_array(const std::vector<std::string>& xs) {
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.elem_type = gguf::ValueType::STRING;
  for (const auto& x : xs) {
    gguf::Value it;
    it.type = gguf::ValueType::STRING;
    it.str = x;
    v.items.push_back(it);
  }
  return v;
}

gguf::Value i32_array(const std::vector<int32_t>& xs) {
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.elem_type = gguf::ValueType::INT32;
  for (int32_t x : xs) {
    gguf::Value it;
    it.type = gguf::ValueType::INT32;
    it.i = x;
    v.items.push_back(it);
  }
  return v;
}

gguf::Value f32_array(const std::vector<float>& xs) {
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.elem_type = gguf::ValueType::FLOAT32;
  for (float x : xs) {
    gguf::Value it;
    it.type = gguf::ValueType::FLOAT32;
    it.f = x;
    v.items.push_back(it);
  }
  return v;
}

gguf::File to_file(const gguf::Writer& w) {
  const std::vector<uint8_t> bytes = w.bytes();
  return gguf::File::from_bytes(bytes, "synthetic.gguf");
}

// A six-token byte-level BPE vocabulary: a b Ġ(space) ab Ġab <|end|>.
gguf::Writer tiny_bpe(const std::string& pre) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
  w.set_value("tokenizer.ggml.tokens", str_array({"a", "b", "\xC4\xA0", "ab", "\xC4\xA0" "ab", "<|end|>"}));
  w.set_value("tokenizer.ggml.token_type", i32_array({1, 1, 1, 1, 1, 3}));
  w.set_value("tokenizer.ggml.merges", str_array({"a b", "\xC4\xA0 ab"}));
  w.set_u32("tokenizer.ggml.bos_token_id", 5);
  w.set_u32("tokenizer.ggml.eos_token_id", 5);
  return w;
}

std::vector<std::string> split(PreType pre, std::string_view text) {
  return PreTokenizer(pre).split(text, /*byte_encode=*/false);
}

using Words = std::vector<std::string>;

TEST(TokenizerApi, SpecialIdsAndFlags) {
  const Tokenizer& spm = load_tokenizer("llama-spm");
  EXPECT_EQ(spm.n_vocab(), 32000);
  EXPECT_EQ(spm.bos(), 1);
  EXPECT_EQ(spm.eos(), 2);
  EXPECT_TRUE(spm.add_bos());
  EXPECT_FALSE(spm.add_eos());
  EXPECT_TRUE(spm.is_eog(2));
  EXPECT_FALSE(spm.is_eog(1));
  EXPECT_EQ(spm.text(1), "<s>");
  EXPECT_EQ(spm.type(1), TokenType::control);
  EXPECT_EQ(spm.type(13), TokenType::byte);  // <0x0A>
  EXPECT_EQ(spm.token_to_piece(13, false), "\n");
  EXPECT_EQ(spm.token_to_piece(1, true), "<s>");
  EXPECT_EQ(spm.token_to_piece(1, false), "");

  const Tokenizer& l3 = load_tokenizer("llama-bpe");
  EXPECT_EQ(l3.n_vocab(), 128256);
  EXPECT_EQ(l3.bos(), 128000);
  EXPECT_TRUE(l3.add_bos());  // llama.cpp's default for pre "llama-bpe"
  EXPECT_EQ(l3.text(128009), "<|eot_id|>");
  EXPECT_TRUE(l3.is_eog(128009));
  EXPECT_TRUE(l3.is_eog(l3.eos()));
  EXPECT_FALSE(l3.is_eog(128000));
  EXPECT_FALSE(l3.is_eog(-1));

  const Tokenizer& qwen = load_tokenizer("qwen2");
  EXPECT_FALSE(qwen.add_bos());
  const auto im_end = qwen.tokenize("<|im_end|>", false, true);
  ASSERT_EQ(im_end.size(), 1u);
  EXPECT_TRUE(qwen.is_eog(im_end[0]));
  const auto eot = qwen.tokenize("<|endoftext|>", false, true);
  ASSERT_EQ(eot.size(), 1u);
  EXPECT_TRUE(qwen.is_eog(eot[0]));
}

// o200k_harmony (gpt-oss), as llama.cpp v0.5.0 loads it (here the synthetic
// vocabulary of tiny-gpt-oss, the same special tokens): <|return|>, <|call|>
// and <|endoftext|> end generation, <|end|> does not (it closes the analysis
// message before the final one) and, like <|channel|>, <|message|>,
// <|start|> and <|constrain|>, gets the user-defined attribute (its GGUF
// type stays control): split out of text without parse_special and
// rendered by token_to_piece(id, false).
TEST(TokenizerApi, HarmonyEndOfGenerationAndMarkers) {
  const Tokenizer& t = load_tokenizer("tiny-gpt-oss");
  const auto id = [&](const char* s) {
    const auto ids = t.tokenize(s, false, true);
    EXPECT_EQ(ids.size(), 1u) << s;
    return ids.empty() ? -1 : ids[0];
  };
  EXPECT_EQ(t.eos(), id("<|return|>"));
  EXPECT_TRUE(t.is_eog(id("<|return|>")));
  EXPECT_TRUE(t.is_eog(id("<|call|>")));
  EXPECT_TRUE(t.is_eog(id("<|endoftext|>")));
  EXPECT_FALSE(t.is_eog(id("<|end|>")));
  for (const char* s : {"<|end|>", "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    EXPECT_EQ(t.token_to_piece(id(s), false), s);
    EXPECT_EQ(t.tokenize(s, false, false), std::vector<token_id>{id(s)}) << s;
  }
  EXPECT_EQ(t.token_to_piece(id("<|return|>"), false), "");
}

// The fill-in-the-middle tokens (/infill): from the tokenizer.ggml.fim_*_token_id
// keys (or the older prefix/suffix/middle_token_id), else found by their texts
// as llama.cpp v0.5.0's loader finds them (here Granite's spellings); the
// keys win over the texts; pad, repo and separator end generation.
TEST(TokenizerApi, FimTokensFromKeysOrTexts) {
  const auto fim_vocab = [](const std::vector<std::string>& specials) {
    gguf::Writer w;
    std::vector<std::string> tokens = {"a", "b", "\xC4\xA0"};
    std::vector<int32_t> types = {1, 1, 1};
    for (const std::string& t : specials) {
      tokens.push_back(t);
      types.push_back(4);  // user-defined: the loader makes the FIM ones control tokens
    }
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_value("tokenizer.ggml.tokens", str_array(tokens));
    w.set_value("tokenizer.ggml.token_type", i32_array(types));
    w.set_value("tokenizer.ggml.merges", str_array({"a b"}));
    w.set_u32("tokenizer.ggml.eos_token_id", 0);
    return w;
  };
  const std::vector<std::string> granite = {"<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<reponame>"};
  const Tokenizer by_text = Tokenizer::from_gguf(to_file(fim_vocab(granite)));
  const FimTokens t = by_text.fim();
  EXPECT_EQ(std::vector<token_id>({t.pre, t.mid, t.suf, t.pad, t.rep, t.sep}), std::vector<token_id>({3, 4, 5, 6, 7, -1}));
  EXPECT_TRUE(by_text.is_eog(6) && by_text.is_eog(7));
  EXPECT_FALSE(by_text.is_eog(3) || by_text.is_eog(4) || by_text.is_eog(5));
  // Now control tokens (llama.cpp overrides the attribute): not rendered without `special`.
  EXPECT_EQ(by_text.token_to_piece(3, false), "");
  EXPECT_EQ(by_text.token_to_piece(3, true), "<fim_prefix>");

  gguf::Writer keyed = fim_vocab(granite);
  keyed.set_u32("tokenizer.ggml.fim_pre_token_id", 0);
  keyed.set_u32("tokenizer.ggml.fim_suf_token_id", 1);
  keyed.set_u32("tokenizer.ggml.fim_mid_token_id", 2);
  keyed.set_u32("tokenizer.ggml.fim_sep_token_id", 7);
  const FimTokens k = Tokenizer::from_gguf(to_file(keyed)).fim();
  EXPECT_EQ(std::vector<token_id>({k.pre, k.suf, k.mid, k.pad, k.rep, k.sep}), std::vector<token_id>({0, 1, 2, 6, 7, 7}));

  gguf::Writer old_keys = fim_vocab({});
  old_keys.set_u32("tokenizer.ggml.prefix_token_id", 2);
  old_keys.set_u32("tokenizer.ggml.suffix_token_id", 1);
  old_keys.set_u32("tokenizer.ggml.middle_token_id", 0);
  const FimTokens o = Tokenizer::from_gguf(to_file(old_keys)).fim();
  EXPECT_EQ(std::vector<token_id>({o.pre, o.suf, o.mid}), std::vector<token_id>({2, 1, 0}));

  const FimTokens none = Tokenizer::from_gguf(to_file(tiny_bpe(""))).fim();
  EXPECT_EQ(std::vector<token_id>({none.pre, none.suf, none.mid, none.pad, none.rep, none.sep}),
            std::vector<token_id>(6, -1));
}

TEST(TokenizerApi, OutOfRangeIdsThrow) {
  const Tokenizer& t = load_tokenizer("stories260K");
  EXPECT_EQ(t.n_vocab(), 512);
  for (token_id bad : {-1, 512, 1 << 30}) {
    try {
      (void)t.token_to_piece(bad, true);
      ADD_FAILURE() << "no throw for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::out_of_range);
    }
    EXPECT_THROW((void)t.detokenize({5, bad}, false, true), Error);
    EXPECT_THROW((void)t.text(bad), Error);
  }
}

TEST(TokenizerLoad, SyntheticBpe) {
  const Tokenizer t = Tokenizer::from_gguf(to_file(tiny_bpe("gpt-2")));
  EXPECT_EQ(t.n_vocab(), 6);
  // "ab ab": words "ab", " ab" -> ab, Ġab (second merge needs the first).
  EXPECT_EQ(t.tokenize("ab ab", false, false), (std::vector<token_id>{3, 4}));
  EXPECT_EQ(t.tokenize("ba", false, false), (std::vector<token_id>{1, 0}));
  // Control text is split out only with parse_special; otherwise its
  // characters have no tokens and are dropped, as llama.cpp drops them.
  EXPECT_EQ(t.tokenize("ab<|end|>", false, true), (std::vector<token_id>{3, 5}));
  EXPECT_EQ(t.tokenize("ab<|end|>", false, false), (std::vector<token_id>{3}));
  EXPECT_TRUE(t.is_eog(5));
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.detokenize({3, 4, 5}, false, true), "ab ab<|end|>");
  EXPECT_EQ(t.detokenize({3, 4, 5}, false, false), "ab ab");
}

TEST(TokenizerLoad, UnknownPreWarnsAndUsesDefault) {
  ::testing::internal::CaptureStderr();
  const Tokenizer t = Tokenizer::from_gguf(to_file(tiny_bpe("made-up-pre")));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("made-up-pre"), std::string::npos) << err;
  EXPECT_NE(err.find("default"), std::string::npos) << err;
  EXPECT_EQ(t.tokenize("ab ab", false, false), (std::vector<token_id>{3, 4}));
}

TEST(TokenizerLoad, MissingOrMistypedKeysThrowFormat) {
  {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "llama");
    try {
      (void)Tokenizer::from_gguf(to_file(w));
      ADD_FAILURE() << "no throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::format);
      EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.tokens"), std::string::npos);
    }
  }
  {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_value("tokenizer.ggml.tokens", str_array({"<unk>", "<s>", "</s>"}));
    w.set_value("tokenizer.ggml.scores", i32_array({0, 0, 0}));
    try {
      (void)Tokenizer::from_gguf(to_file(w));
      ADD_FAILURE() << "no throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::format);
      EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.scores"), std::string::npos);
    }
  }
  {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_value("tokenizer.ggml.tokens", str_array({"a"}));
    EXPECT_THROW((void)Tokenizer::from_gguf(to_file(w)), Error);  // no merges
  }
  {
    gguf::Writer w;
    EXPECT_THROW((void)Tokenizer::from_gguf(to_file(w)), Error);  // no model
  }
  {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "bert");
    w.set_value("tokenizer.ggml.tokens", str_array({"a"}));
    try {
      (void)Tokenizer::from_gguf(to_file(w));
      ADD_FAILURE() << "no throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unsupported);
    }
  }
}

// An SPM vocabulary without byte tokens: unknown characters become <unk>.
TEST(TokenizerLoad, SpmWithoutByteTokensFallsBackToUnk) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_value("tokenizer.ggml.tokens",
              str_array({"<unk>", "<s>", "</s>", "\xE2\x96\x81", "h", "i", "hi", "\xE2\x96\x81hi"}));
  w.set_value("tokenizer.ggml.scores", f32_array({0, 0, 0, -1, -2, -2, -1, -0.5f}));
  w.set_value("tokenizer.ggml.token_type", i32_array({2, 3, 3, 1, 1, 1, 1, 1}));
  const Tokenizer t = Tokenizer::from_gguf(to_file(w));
  EXPECT_EQ(t.tokenize("hi", true, false), (std::vector<token_id>{1, 7}));
  EXPECT_EQ(t.tokenize("hi x", false, false), (std::vector<token_id>{7, 3, 0}));
  EXPECT_EQ(t.detokenize({1, 7}, false, true), "<s> hi");
  EXPECT_EQ(t.detokenize({7}, false, true), "hi");  // the prefix space goes
  EXPECT_EQ(t.detokenize({1, 7}, true, false), " hi");  // not after a removed BOS
}

// Pre-tokenizers of llama.cpp with no vocabulary file in tests/data: the words
// follow from llama.cpp's regex lists applied one after another, each regex
// seeing only the segments the previous one left.
TEST(PreTokenize, StarcoderAndSmollmSplitDigitsFirst) {
  // \p{N} cuts every digit out first; the GPT-2 regex then runs on "abc ",
  // where the trailing space is a segment end (no \S follows inside it).
  const Words want = {"abc", " ", "1", "2", "3", " x"};
  EXPECT_EQ(split(PreType::starcoder, "abc 123 x"), want);
  EXPECT_EQ(split(PreType::smollm, "abc 123 x"), want);
}

TEST(PreTokenize, Gpt2) {
  EXPECT_EQ(split(PreType::gpt2, "Hello world's  12 3!!\n\nx"),
            (Words{"Hello", " world", "'s", " ", " 12", " 3", "!!", "\n", "\n", "x"}));
}

TEST(PreTokenize, Llama3GroupsDigitsInThrees) {
  EXPECT_EQ(split(PreType::llama3, "1234567 HELLO'S\r\n\n  x"),
            (Words{"123", "456", "7", " HELLO", "'S", "\r\n\n", " ", " x"}));
}

TEST(PreTokenize, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split(PreType::qwen2, "x=123"), (Words{"x", "=", "1", "2", "3"}));
}

TEST(PreTokenize, TekkenSplitsAtCaseChanges) {
  // Letters group as [upper]*[lower]+ or [upper]+[lower]*; non-ASCII letters
  // count as both cases (llama.cpp's collapsed text cannot tell them apart).
  EXPECT_EQ(split(PreType::tekken, "HelloWorld ABCdef 12 éA/\n"),
            (Words{"Hello", "World", " ABCdef", " ", "1", "2", " é", "A", "/\n"}));
}

TEST(PreTokenize, DefaultSplitsPunctuationFirst) {
  // [\p{P}$+<=>^~|]+ first, then the GPT-2 rules inside the rest (without the
  // final \s+), then digit runs, then three-digit groups.
  EXPECT_EQ(split(PreType::default_, "a,b 12345"), (Words{"a", ",", "b", " ", "123", "45"}));
}

TEST(PreTokenize, DeepseekCoderCategoriesAndLiterals) {
  EXPECT_EQ(split(PreType::deepseek_coder, "ab 中文\n12"),
            (Words{"ab", " ", "中文", "\n", "1", "2"}));
}

TEST(PreTokenize, LongInputsAreLinear) {
  // 200,000 letters / spaces / marks in one word each: PCRE2 must neither
  // hit its limits nor take long, for every pre-tokenizer.
  const std::vector<std::string> inputs = {std::string(200000, 'A'), std::string(200000, ' '),
                                           std::string(200000, '!'),
                                           std::string(200000, 'a') + "B"};
  for (PreType pre : {PreType::default_, PreType::llama3, PreType::qwen2, PreType::gpt2,
                      PreType::tekken, PreType::starcoder, PreType::deepseek_llm,
                      PreType::deepseek3_llm, PreType::chameleon, PreType::viking}) {
    const PreTokenizer p(pre);
    for (const auto& s : inputs) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto words = p.split(s, false);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      size_t total = 0;
      for (const auto& w : words) total += w.size();
      EXPECT_EQ(total, s.size());  // every byte lands in exactly one word
      EXPECT_LT(ms, 2000.0) << static_cast<int>(pre);
    }
  }
}

// Random bytes (invalid UTF-8, control texts, spaces) never throw or crash,
// for every vocabulary and flag combination; every byte of valid text is
// accounted for in detokenize for the byte-complete vocabularies.
TEST(TokenizerHostile, RandomBytesNeverThrow) {
  std::mt19937 rng(1234);
  const std::vector<std::string> atoms = {
      "<s>", "</s>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<tool_call>",
      " ", "  ", "\n", "\r\n", "\t", "'s", "123", "a", "Z", "é", "中", "🦙", "\xE2\x96\x81",
      "\xFF", "\xC3", "\xE2\x82", "\xF0\x9F\xA6", "\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
      "\xF7\xBF\xBF\xBF", "\xC0\xAF", std::string(1, '\0')};
  for (const std::string& vocab : case_vocabs()) {
    const Tokenizer& t = load_tokenizer(vocab);
    for (int iter = 0; iter < 150; ++iter) {
      std::string s;
      const int n = static_cast<int>(rng() % 24);
      for (int k = 0; k < n; ++k) {
        if (rng() % 3 == 0) {
          s += static_cast<char>(rng() % 256);
        } else {
          s += atoms[rng() % atoms.size()];
        }
      }
      for (int flags = 0; flags < 4; ++flags) {
        std::vector<token_id> ids;
        ASSERT_NO_THROW(ids = t.tokenize(s, flags & 1, flags & 2)) << vocab;
        for (token_id id : ids) ASSERT_TRUE(id >= 0 && id < t.n_vocab()) << vocab;
        ASSERT_NO_THROW((void)t.detokenize(ids, flags & 1, flags & 2)) << vocab;
      }
    }
  }
}

}  // namespace
}  // namespace synapse::test
