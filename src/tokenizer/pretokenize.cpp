// BPE pre-tokenization with PCRE2 (see pretokenize.hpp for the scheme).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenize.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "tokenizer/unicode.hpp"

namespace synapse::tokenizer {

namespace {

// The regexes llama-vocab.cpp (c392e509) gives llm_tokenizer_bpe per pre type.
const char* const kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// llama.cpp v0.5.0's LLAMA_VOCAB_PRE_TYPE_GPT4O (o200k: gpt-oss, Llama 4):
// tokenizer.json's regex with its \p{Lu}/\p{Ll} classes rewritten as
// lookaheads over \p{L} (an upper-case run is letters not in [a-z], a
// lower-case run letters not in [A-Z]; on the collapsed text every non-ASCII
// letter is both) and the case-insensitive contractions spelled out
// (src/llama-vocab.cpp:438-444).
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kPoro = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

// llama.cpp's collapsed-category bytes (unicode_regex_split's k_ucat_cpt) and
// the ASCII members each \p{..} keeps (k_ucat_map).
struct Category {
  uint16_t flag;
  char byte;
  const char* ascii;
};
const std::map<std::string, Category>& categories() {
  static const std::map<std::string, Category> m = {
      {R"(\p{N})", {kNumber, '\xD1', "0-9"}},
      {R"(\p{L})", {kLetter, '\xD2', "A-Za-z"}},
      {R"(\p{P})", {kPunctuation, '\xD3', R"(!-#%-*,-/:-;?-@\[-\]_\{\})"}},
      {R"(\p{M})", {kMark, '\xD4', ""}},
      {R"(\p{S})", {kSymbol, '\xD5', R"(\$\+<->^`\|)"}},
      {R"(\p{Lu})", {kLetter, '\xD2', "A-Za-z"}},
      {R"(\p{Ll})", {kLetter, '\xD2', "A-Za-z"}},
      {R"(\p{Lt})", {kLetter, '\xD2', "A-Za-z"}},
      {R"(\p{Lm})", {kLetter, '\xD2', "A-Za-z"}},
      {R"(\p{Lo})", {kLetter, '\xD2', "A-Za-z"}},
  };
  return m;
}

bool uses_categories(const std::string& re) {
  for (const auto& [name, cat] : categories()) {
    if (re.find(name) != std::string::npos) return true;
  }
  return false;
}

// The collapsed form of a category regex, as llama.cpp builds it: \p{X}
// becomes [<byte><ascii>] (or <byte><ascii> inside brackets).
std::string collapse_regex(const std::string& re) {
  std::string out;
  bool inside = false;
  for (size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
      out += '[';
      inside = true;
      continue;
    }
    if (inside && re[i] == ']' && re[i - 1] != '\\') {
      out += ']';
      inside = false;
      continue;
    }
    if (re[i] == '\\' && i + 3 < re.size() && re[i + 1] == 'p' && re[i + 2] == '{') {
      const size_t close = re.find('}', i + 3);
      if (close != std::string::npos && close <= i + 10) {
        auto it = categories().find(re.substr(i, close - i + 1));
        if (it != categories().end()) {
          if (!inside) out += '[';
          out += it->second.byte;
          out += it->second.ascii;
          if (!inside) out += ']';
          i = close;
          continue;
        }
      }
    }
    out += re[i];
  }
  // Tekken's "a letter that is not a-z" written as a lookahead inside a
  // repeated group makes PCRE2 keep a backtracking frame per letter (30,000
  // letters exhaust its limits). On collapsed text the lookahead intersects
  // two byte classes, so the plain class is the same language, matched the
  // same way, in constant space.
  const std::string letter = std::string("[") + '\xD2' + "A-Za-z]";
  const auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t p = out.find(from); p != std::string::npos; p = out.find(from, p + to.size())) {
      out.replace(p, from.size(), to);
    }
  };
  replace_all("((?=" + letter + ")([^a-z]))", std::string("[") + '\xD2' + "A-Z]");
  replace_all("((?=" + letter + ")([^A-Z]))", std::string("[") + '\xD2' + "a-z]");
  return out;
}

struct Regex {
  pcre2_code* code = nullptr;
  bool collapsed = false;  // matches the category bytes (else UTF-8 code points)
};

// Per-thread match context with a JIT stack big enough for long words.
struct MatchEnv {
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* jit = nullptr;
  MatchEnv() {
    mctx = pcre2_match_context_create(nullptr);
    jit = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    if (mctx && jit) pcre2_jit_stack_assign(mctx, nullptr, jit);
  }
  ~MatchEnv() {
    if (jit) pcre2_jit_stack_free(jit);
    if (mctx) pcre2_match_context_free(mctx);
  }
};

MatchEnv& match_env() {
  thread_local MatchEnv env;
  return env;
}

// Splits every segment of `offsets` (code point counts) at the matches of
// `rx`, as llama.cpp's unicode_regex_split_stl: each match is a segment and
// so is each unmatched gap between matches. `subject` holds one byte per code
// point (collapsed) or the UTF-8 text with `byte_at[i]` the byte offset of
// code point i (byte_at has n+1 entries).
std::vector<size_t> split_segments(const Regex& rx, const std::string& subject,
                                   const std::vector<size_t>& byte_at,
                                   const std::vector<size_t>& offsets) {
  std::vector<size_t> out;
  out.reserve(offsets.size());
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  if (!md) return offsets;
  MatchEnv& env = match_env();
  const auto cpt_of_byte = [&](size_t seg_first_cpt, size_t byte) -> size_t {
    if (rx.collapsed) return byte;
    // byte offsets inside the segment -> code point count from its start
    const size_t base = byte_at[seg_first_cpt];
    auto it = std::lower_bound(byte_at.begin() + seg_first_cpt, byte_at.end(), base + byte);
    return static_cast<size_t>(it - (byte_at.begin() + seg_first_cpt));
  };
  size_t first = 0;  // first code point of the segment
  for (size_t len : offsets) {
    const size_t b0 = rx.collapsed ? first : byte_at[first];
    const size_t b1 = rx.collapsed ? first + len : byte_at[first + len];
    const auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data() + b0);
    const size_t n = b1 - b0;
    size_t start = 0;  // end of the last match, in bytes from b0
    size_t pos = 0;
    uint32_t opts = 0;
    // Our UTF-8 is valid by construction; without NO_UTF_CHECK PCRE2 would
    // re-validate the whole subject on every call (quadratic).
    const uint32_t base_opts = rx.collapsed ? 0 : PCRE2_NO_UTF_CHECK;
    while (pos <= n) {
      const int rc = pcre2_match(rx.code, subj, n, pos, opts | base_opts, md, env.mctx);
      if (rc < 0) {
        if (opts != 0 && rc == PCRE2_ERROR_NOMATCH) {
          // no non-empty match at an empty match's position: step one char
          opts = 0;
          ++pos;
          while (!rx.collapsed && pos < n && (subject[b0 + pos] & 0xC0) == 0x80) ++pos;
          continue;
        }
        break;  // no more matches (or a PCRE2 limit: the rest stays one gap)
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t m0 = ov[0], m1 = ov[1];
      if (m0 > start) out.push_back(cpt_of_byte(first, m0) - cpt_of_byte(first, start));
      if (m1 > m0) out.push_back(cpt_of_byte(first, m1) - cpt_of_byte(first, m0));
      start = m1;
      pos = m1;
      // After an empty match retry here for a non-empty one (std::regex_iterator).
      opts = (m1 == m0) ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    }
    if (start < n) out.push_back(len - cpt_of_byte(first, start));
    first += len;
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace

std::vector<std::string> pre_regexes(PreType pre) {
  switch (pre) {
    case PreType::llama3:
    case PreType::dbrx:
    case PreType::smaug:
    case PreType::chatglm4:
      return {kLlama3};
    case PreType::deepseek_llm:
      // The second regex's class is DeepSeek's list of cased letters, written
      // as \x{..} escapes so no editor can fold its Greek/Kelvin/Ohm singletons.
      return {
          "[\r\n]",
          "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
          "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
          "\\s+$",
          "[一-龥ࠀ-一가-퟿]+",
          "\\p{N}+",
      };
    case PreType::deepseek3_llm:
      return {
          "\\p{N}{1,3}",
          "[一-龥぀-ゟ゠-ヿ]+",
          "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
      };
    case PreType::deepseek_coder:
      return {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"};
    case PreType::falcon:
      return {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
    case PreType::starcoder:
    case PreType::refact:
    case PreType::command_r:
    case PreType::smollm:
    case PreType::codeshell:
    case PreType::exaone:
    case PreType::minerva:
      return {R"(\p{N})", kGpt2};
    case PreType::gpt2:
    case PreType::mpt:
    case PreType::olmo:
    case PreType::jais:
      return {kGpt2};
    case PreType::stablelm2:
    case PreType::qwen2:
      return {kQwen2};
    case PreType::poro:
    case PreType::bloom:
    case PreType::gpt3_finnish:
      return {kPoro};
    case PreType::viking:
      return {kPoro, R"(\p{N})"};
    case PreType::tekken:
      return {kTekken};
    case PreType::chameleon:
      return {
          "<sentinel:[0-9]+>",
          "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
          "([\\t\\n]|    |  )",
          R"(\p{N})",
          R"([\p{P}!-/:-@\[-`{-~])",
          kGpt2,
      };
    case PreType::gpt4o:
      return {kGpt4o};
    case PreType::default_:
      break;
  }
  return {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
}

struct PreTokenizer::Impl {
  std::vector<Regex> regexes;
  bool need_collapse = false;
  ~Impl() {
    for (auto& r : regexes) pcre2_code_free(r.code);
  }
};

PreTokenizer::PreTokenizer(PreType pre) : impl_(std::make_unique<Impl>()) {
  for (const std::string& re : pre_regexes(pre)) {
    Regex rx;
    rx.collapsed = uses_categories(re);
    impl_->need_collapse |= rx.collapsed;
    const std::string pattern = rx.collapsed ? collapse_regex(re) : re;
    // ECMAScript semantics: '$' only at the very end; no UCP, so \s and
    // classes stay ASCII as std::regex's are.
    uint32_t options = PCRE2_DOLLAR_ENDONLY | PCRE2_NO_AUTO_CAPTURE;
    if (!rx.collapsed) options |= PCRE2_UTF | PCRE2_NO_UTF_CHECK;
    int err = 0;
    PCRE2_SIZE err_off = 0;
    rx.code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                            options, &err, &err_off, nullptr);
    if (!rx.code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw std::logic_error("pre-tokenizer regex does not compile at " +
                             std::to_string(err_off) + ": " +
                             reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(rx.code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
    impl_->regexes.push_back(rx);
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string> PreTokenizer::split(std::string_view text, bool byte_encode) const {
  const std::vector<uint32_t> cpts = cpts_from_utf8(text);

  // One byte per code point (llama.cpp's text_collapsed).
  std::string collapsed;
  if (impl_->need_collapse) {
    collapsed.resize(cpts.size());
    for (size_t i = 0; i < cpts.size(); ++i) {
      const uint32_t c = cpts[i];
      if (c < 128) {
        collapsed[i] = static_cast<char>(c);
        continue;
      }
      const uint16_t f = cpt_flags(c);
      char b = '\xD0';
      if (f & kWhitespace) {
        b = '\x0B';
      } else {
        switch (f & kCategoryMask) {
          case kNumber: b = '\xD1'; break;
          case kLetter: b = '\xD2'; break;
          case kPunctuation: b = '\xD3'; break;
          case kMark: b = '\xD4'; break;
          case kSymbol: b = '\xD5'; break;
          default: break;
        }
      }
      collapsed[i] = b;
    }
  }
  // UTF-8 of the code points with non-ASCII white space as U+000B (llama.cpp's
  // std::wregex input); code points UTF-8 cannot carry become U+FFFD.
  std::string wide;
  std::vector<size_t> byte_at;
  bool have_wide = false;
  const auto make_wide = [&] {
    byte_at.reserve(cpts.size() + 1);
    for (uint32_t c : cpts) {
      byte_at.push_back(wide.size());
      if (c > 0x7F && (cpt_flags(c) & kWhitespace)) c = 0x0B;
      if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
      append_utf8(wide, c);
    }
    byte_at.push_back(wide.size());
    have_wide = true;
  };

  std::vector<size_t> offsets = {cpts.size()};
  if (cpts.empty()) offsets.clear();
  for (const Regex& rx : impl_->regexes) {
    if (rx.collapsed) {
      offsets = split_segments(rx, collapsed, byte_at, offsets);
    } else {
      if (!have_wide) make_wide();
      offsets = split_segments(rx, wide, byte_at, offsets);
    }
  }

  std::vector<std::string> words;
  words.reserve(offsets.size());
  size_t at = 0;
  std::string utf8;
  for (size_t len : offsets) {
    utf8.clear();
    for (size_t i = at; i < at + len; ++i) append_utf8(utf8, cpts[i]);
    at += len;
    if (!byte_encode) {
      words.push_back(utf8);
      continue;
    }
    std::string enc;
    enc.reserve(utf8.size() * 2);
    for (char c : utf8) enc += byte_to_unicode(static_cast<uint8_t>(c));
    words.push_back(std::move(enc));
  }
  return words;
}

}  // namespace synapse::tokenizer
