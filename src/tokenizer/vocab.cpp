// Vocabulary loading: llama.cpp's llama_vocab::impl::load (c392e509), step by
// step: type defaults, pre-tokenizer flags, tokens/scores/types, special ids,
// add_bos/add_eos, auto-detected EOT/EOM/FIM/EOG tokens (which become control
// tokens), the special-token cache, the piece cache, per-model attributes.
#include "tokenizer/vocab.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "synapse/error.hpp"
#include "tokenizer/unicode.hpp"

namespace synapse::tokenizer {

namespace {

[[noreturn]] void fail(const gguf::File& f, const std::string& key, const std::string& what) {
  throw Error(Errc::format, f.path() + ": " + key + ": " + what);
}

struct PreInfo {
  PreType type;
  bool clean_spaces;   // false where llama.cpp turns clean_spaces off
  bool ignore_merges;
  bool add_bos;
  bool no_bos_id;      // chatglm: special_bos_id = LLAMA_TOKEN_NULL
};

// tokenizer.ggml.pre names -> pre type and flags (llama-vocab.cpp, c392e509).
bool lookup_pre(const std::string& n, PreInfo& p) {
  p = {PreType::default_, true, false, false, false};
  const auto is = [&](std::initializer_list<const char*> names) {
    for (const char* s : names) if (n == s) return true;
    return false;
  };
  if (is({"default"})) {
  } else if (is({"llama3", "llama-v3", "llama-bpe", "falcon3"})) {
    p = {PreType::llama3, true, true, true, false};
  } else if (is({"deepseek-llm"})) {
    p = {PreType::deepseek_llm, false, false, false, false};
  } else if (is({"deepseek-coder"})) {
    p = {PreType::deepseek_coder, false, false, false, false};
  } else if (is({"deepseek-v3"})) {
    p = {PreType::deepseek3_llm, false, false, false, false};
  } else if (is({"falcon"})) {
    p.type = PreType::falcon;
  } else if (is({"mpt"})) {
    p.type = PreType::mpt;
  } else if (is({"starcoder"})) {
    p.type = PreType::starcoder;
  } else if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es",
                 "jina-v2-de", "jina-v2-code", "roberta-bpe"})) {
    p.type = PreType::gpt2;
  } else if (is({"refact"})) {
    p.type = PreType::refact;
  } else if (is({"command-r"})) {
    p = {PreType::command_r, false, false, false, false};
  } else if (is({"qwen2", "deepseek-r1-qwen", "megrez"})) {
    p = {PreType::qwen2, false, false, false, false};
  } else if (is({"stablelm2"})) {
    p.type = PreType::stablelm2;
  } else if (is({"olmo"})) {
    p.type = PreType::olmo;
  } else if (is({"dbrx"})) {
    p.type = PreType::dbrx;
  } else if (is({"smaug-bpe"})) {
    p.type = PreType::smaug;
  } else if (is({"poro-chat"})) {
    p = {PreType::poro, false, false, false, false};
  } else if (is({"chatglm-bpe"})) {
    p = {PreType::chatglm4, true, false, false, true};
  } else if (is({"viking"})) {
    p = {PreType::viking, false, false, false, false};
  } else if (is({"jais"})) {
    p.type = PreType::jais;
  } else if (is({"tekken"})) {
    p = {PreType::tekken, false, true, true, false};
  } else if (is({"smollm"})) {
    p = {PreType::smollm, false, false, false, false};
  } else if (is({"codeshell"})) {
    p.type = PreType::codeshell;
  } else if (is({"bloom"})) {
    p.type = PreType::bloom;
  } else if (is({"gpt3-finnish"})) {
    p.type = PreType::gpt3_finnish;
  } else if (is({"exaone"})) {
    p.type = PreType::exaone;
  } else if (is({"chameleon"})) {
    p = {PreType::chameleon, false, false, true, false};
  } else if (is({"minerva-7b"})) {
    p.type = PreType::minerva;
  } else if (is({"gpt-4o"})) {
    p = {PreType::gpt4o, false, false, false, false};
  } else {
    return false;
  }
  return true;
}

uint32_t attr_of_type(int32_t t) {
  switch (t) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// llama_unescape_whitespace: U+2581 -> ' '.
std::string unescape_whitespace(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// llama_decode_text: each code point of a byte-level BPE token back to its byte.
std::string decode_byte_level(const std::string& text) {
  std::string out;
  for (uint32_t cpt : cpts_from_utf8(text)) {
    std::string utf8;
    append_utf8(utf8, cpt);
    const int b = unicode_to_byte(utf8);
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out += "[UNK_BYTE_0x";
      for (char c : utf8) {
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", static_cast<uint8_t>(c));
        out += hex;
      }
      out += text + "]";
    }
  }
  return out;
}

// <0xXX> -> XX (llama_vocab::token_to_byte).
char token_byte(const std::string& text) {
  if (text.size() < 5) return 0;
  return static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16));
}

// llama_token_to_piece(id, lstrip = 0, special = true), uncached.
std::string piece_of(const Vocab& v, token_id id) {
  const uint32_t a = v.attr[id];
  const std::string& t = v.text[id];
  if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return t;
  if (a & kAttrNormal) {
    return v.type == VocabType::spm || v.escape_whitespaces ? unescape_whitespace(t)
                                                            : decode_byte_level(t);
  }
  if (a & kAttrByte) return std::string(1, token_byte(t));
  return {};  // undefined, unused
}

}  // namespace

int32_t Vocab::rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).append(1, ' ').append(right);
  auto it = merge_rank.find(key);
  return it == merge_rank.end() ? -1 : it->second;
}

token_id Vocab::byte_to_token(uint8_t b) const {
  if (type == VocabType::spm) {
    static const char* hex = "0123456789ABCDEF";
    const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
    token_id id = find(buf);
    if (id != kNull) return id;
    id = find(std::string(1, static_cast<char>(b)));
    return id != kNull ? id : unk;
  }
  return find(byte_to_unicode(b));
}

Vocab Vocab::load(const gguf::File& f) {
  Vocab v;
  const auto model = f.get_string("tokenizer.ggml.model");
  if (!model) fail(f, "tokenizer.ggml.model", "missing");
  v.model = *model;
  v.pre_name = f.get_string("tokenizer.ggml.pre").value_or("");

  if (v.model == "llama") {
    v.type = VocabType::spm;
    v.bos = 1; v.eos = 2; v.unk = 0;
    v.add_space_prefix = true;
    v.clean_spaces = false;
    v.add_bos = true;
    v.add_eos = false;
  } else if (v.model == "gpt2") {
    v.type = VocabType::bpe;
    v.bos = 11; v.eos = 11; v.unk = kNull;
    v.add_space_prefix = false;
    v.escape_whitespaces = false;
    v.clean_spaces = true;
    PreInfo p;
    lookup_pre("default", p);
    if (v.pre_name.empty()) {
      std::fprintf(stderr, "synapse: %s: missing tokenizer.ggml.pre, using 'default'\n",
                   f.path().c_str());
    } else if (!lookup_pre(v.pre_name, p)) {
      // llama.cpp refuses the file; we warn and tokenize with 'default'.
      std::fprintf(stderr, "synapse: %s: unknown pre-tokenizer '%s', using 'default'\n",
                   f.path().c_str(), v.pre_name.c_str());
      lookup_pre("default", p);
    }
    v.pre = p.type;
    v.clean_spaces = p.clean_spaces;
    v.ignore_merges = p.ignore_merges;
    v.add_bos = p.add_bos;
    if (p.no_bos_id) v.bos = kNull;
    const auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges) fail(f, "tokenizer.ggml.merges", "missing (required for a gpt2 vocabulary)");
    v.merge_rank.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const std::string& m = (*merges)[i];
      const size_t pos = m.find(' ', 1);
      if (pos == std::string::npos) continue;  // llama.cpp stores ("", ""): never looked up
      v.merge_rank.emplace(m, static_cast<int32_t>(i));  // first rank wins (emplace)
    }
  } else {
    throw Error(Errc::unsupported,
                f.path() + ": tokenizer.ggml.model: unsupported tokenizer '" + v.model + "'");
  }
  if (auto b = f.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) fail(f, "tokenizer.ggml.tokens", "missing");
  const size_t n = tokens->size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) fail(f, "tokenizer.ggml.tokens", "empty or too large");
  const auto scores = f.get_f32_array("tokenizer.ggml.scores");
  if (scores && scores->size() < n)
    fail(f, "tokenizer.ggml.scores", std::to_string(scores->size()) + " scores for " +
                                         std::to_string(n) + " tokens");
  const auto types = f.get_i32_array("tokenizer.ggml.token_type");
  if (types && types->size() < n)
    fail(f, "tokenizer.ggml.token_type", std::to_string(types->size()) + " types for " +
                                             std::to_string(n) + " tokens");

  v.text = std::move(*tokens);
  v.score.assign(n, 0.0f);
  v.attr.assign(n, kAttrNormal);
  v.ttype.assign(n, TokenType::normal);
  v.to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& w = v.text[i];
    if (w.empty()) w = "[EMPTY_" + std::to_string(i) + "]";
    v.to_id[w] = static_cast<token_id>(i);
    for (size_t j = 1; j < w.size(); ++j) {
      const unsigned k = (unsigned(static_cast<uint8_t>(w[j - 1])) << 8) | static_cast<uint8_t>(w[j]);
      v.inner_pairs[k >> 6] |= uint64_t{1} << (k & 63);
    }
    if (scores) v.score[i] = (*scores)[i];
    if (types) {
      v.attr[i] = attr_of_type((*types)[i]);
      const int32_t t = (*types)[i];
      v.ttype[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::undefined;
    }
  }

  // Special token ids: out-of-range defaults are disabled, out-of-range keys ignored.
  const std::pair<const char*, token_id*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},     {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},     {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.unknown_token_id", &v.unk}, {"tokenizer.ggml.seperator_token_id", &v.sep},
      {"tokenizer.ggml.padding_token_id", &v.pad}, {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep},
      {"tokenizer.ggml.prefix_token_id", &v.fim_pre}, {"tokenizer.ggml.suffix_token_id", &v.fim_suf},
      {"tokenizer.ggml.middle_token_id", &v.fim_mid},
  };
  for (const auto& [key, id] : ids) {
    if (*id >= 0 && static_cast<size_t>(*id) >= n) *id = kNull;
    std::optional<int64_t> nid;
    try {
      nid = f.get_i64(key);
    } catch (const Error&) {
      nid.reset();  // llama.cpp reads it as u32; a wrong type is not fatal here
    }
    if (nid && *nid >= 0 && static_cast<uint64_t>(*nid) < n) *id = static_cast<token_id>(*nid);
  }
  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (v.add_bos && v.bos == kNull)
    fail(f, "tokenizer.ggml.add_bos_token", "true, but tokenizer.ggml.bos_token_id is not set");
  if (v.add_eos && v.eos == kNull)
    fail(f, "tokenizer.ggml.add_eos_token", "true, but tokenizer.ggml.eos_token_id is not set");

  // Auto-detection by text (llama.cpp iterates its token_to_id hash map; the
  // first match found sets each id). We take the lowest id of the candidates; a
  // vocabulary has one of each in practice (the end tokens all become
  // end-of-generation tokens anyway). A detected token that is not a
  // control token becomes one (llama.cpp overwrites its attribute).
  const auto make_control = [&](token_id id) {
    if (!(v.attr[id] & kAttrControl)) v.attr[id] = kAttrControl;
  };
  const auto detect = [&](token_id& slot, std::initializer_list<const char*> names) {
    if (slot != kNull) return;
    for (const char* s : names) {
      const token_id id = v.find(s);
      if (id != kNull && (slot == kNull || id < slot)) slot = id;
    }
    if (slot != kNull) make_control(slot);
  };
  detect(v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                 "<｜end▁of▁sentence｜>"});
  detect(v.eom, {"<|eom_id|>"});
  // The texts llama.cpp v0.5.0's loader looks for (llama-vocab.cpp, "find FIM_PRE token", ...).
  detect(v.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                     "<|code_prefix|>", "<|prefix|>"});
  detect(v.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                     "<|code_suffix|>", "<|suffix|>"});
  detect(v.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                     "<|code_middle|>", "<|middle|>"});
  detect(v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  detect(v.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect(v.fim_sep, {"<|file_sep|>"});

  // End-of-generation set: FIM pad/repo/separator, the end-looking texts
  // (made control tokens), then eos, eot, eom.
  for (token_id id : {v.fim_pad, v.fim_rep, v.fim_sep})
    if (id != kNull) v.eog.insert(id);
  // <|return|> and <|call|>: o200k_harmony (gpt-oss), llama.cpp v0.5.0.
  for (const char* s : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
                        "<|endoftext|>", "<|eom_id|>", "<EOT>"}) {
    const token_id id = v.find(s);
    if (id != kNull) {
      v.eog.insert(id);
      make_control(id);
    }
  }
  // gpt-oss's harmony markers are always split out of text, whatever
  // parse_special says, and always rendered (llama.cpp v0.5.0
  // src/llama-vocab.cpp:2927-2937 makes them user-defined in any vocabulary).
  for (const char* s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
    if (const token_id id = v.find(s); id != kNull) v.attr[id] = kAttrUserDefined;
  for (token_id id : {v.eos, v.eot, v.eom})
    if (id != kNull) v.eog.insert(id);
  // o200k_harmony: <|end|> closes a message, not the reply, when <|return|>
  // and <|call|> end generation: it leaves the end-of-generation set and
  // becomes user-defined (llama.cpp v0.5.0 src/llama-vocab.cpp:2955-2994).
  {
    const token_id ret = v.find("<|return|>"), call = v.find("<|call|>"), end = v.find("<|end|>");
    if (ret != kNull && call != kNull && end != kNull && v.eog.count(ret) && v.eog.count(call) && v.eog.count(end)) {
      v.eog.erase(end);
      v.attr[end] = kAttrUserDefined;
    }
  }

  // Special-token cache: control, user-defined and unknown tokens, longest
  // first. std::sort is not stable; running libstdc++'s std::sort on the same
  // input with the same comparator gives llama.cpp's order among equal lengths.
  for (size_t i = 0; i < n; ++i) {
    if (v.attr[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      v.special_cache.push_back(static_cast<token_id>(i));
  }
  std::sort(v.special_cache.begin(), v.special_cache.end(), [&](token_id a, token_id b) {
    return v.text[a].size() > v.text[b].size();
  });

  v.piece_cache.resize(n);
  for (size_t i = 0; i < n; ++i) v.piece_cache[i] = piece_of(v, static_cast<token_id>(i));

  // Per-model attributes: Phi-3 strips white space after its special tokens.
  const std::string name = lower(f.get_string("general.name").value_or(""));
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (token_id id : v.special_cache) v.attr[id] |= kAttrRstrip;
    if (token_id id = v.find("</s>"); id != kNull) v.attr[id] |= kAttrRstrip;
    for (const char* s : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (token_id id = v.find(s); id != kNull) v.attr[id] &= ~kAttrRstrip;
    }
  }
  return v;
}

}  // namespace synapse::tokenizer
