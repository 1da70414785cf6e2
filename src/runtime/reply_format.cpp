#include "runtime/reply_format.hpp"

#include "synapse/error.hpp"

namespace synapse {

std::vector<TokenProbs> token_probs(const GenerationResult& r) {
  std::vector<TokenProbs> out;
  out.reserve(r.tokens.size());
  for (size_t i = 0; i < r.tokens.size(); ++i)
    out.push_back({r.tokens[i], i < r.logprobs.size() ? r.logprobs[i] : 0.0f,
                   i < r.top_logprobs.size() ? std::span<const TokenLogprob>(r.top_logprobs[i])
                                             : std::span<const TokenLogprob>()});
  return out;
}

std::vector<TokenProbs> token_probs(std::span<const GeneratedToken> steps) {
  std::vector<TokenProbs> out;
  for (const GeneratedToken& g : steps)
    if (g.id >= 0 && !g.eog) out.push_back({g.id, g.logprob, g.top_logprobs});
  return out;
}

std::string drop_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto byte = [&](size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
  const auto cont = [](unsigned c) { return (c & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < s.size()) {
    const unsigned c = byte(i);
    // The length of the valid sequence starting here (RFC 3629's table:
    // no overlong forms, no surrogates, nothing above U+10FFFF), 0 if none.
    size_t n = 0;
    if (c < 0x80) {
      n = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = cont(byte(i + 1)) ? 2 : 0;
    } else if (c >= 0xE0 && c <= 0xEF) {
      const unsigned c1 = byte(i + 1);
      const bool ok1 = c == 0xE0 ? c1 >= 0xA0 && c1 <= 0xBF : c == 0xED ? c1 >= 0x80 && c1 <= 0x9F : cont(c1);
      n = ok1 && cont(byte(i + 2)) ? 3 : 0;
    } else if (c >= 0xF0 && c <= 0xF4) {
      const unsigned c1 = byte(i + 1);
      const bool ok1 = c == 0xF0 ? c1 >= 0x90 && c1 <= 0xBF : c == 0xF4 ? c1 >= 0x80 && c1 <= 0x8F : cont(c1);
      n = ok1 && cont(byte(i + 2)) && cont(byte(i + 3)) ? 4 : 0;
    }
    // An invalid byte goes alone: the continuation bytes after it cannot
    // start a sequence, so they go next, as Python drops the whole subpart.
    if (n == 0) {
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

namespace runtime {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

bool is_server(ReplyDialect d) { return d == ReplyDialect::llama_server; }

// The piece a dialect shows for a token: llama-server renders control tokens'
// text, llama-cpp-python (Llama._piece) does not.
std::string raw_piece(ReplyDialect d, const Tokenizer& tok, token_id id) {
  return tok.token_to_piece(id, is_server(d));
}

// `s` with each invalid UTF-8 sequence replaced by U+FFFD, as the server's
// serializer writes strings (object keys need it before: the serializer
// would meet them after the replace handler had a chance).
std::string replaced_utf8(const std::string& s) {
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

// Characters of valid UTF-8 text (the bytes that are not continuation bytes).
size_t utf8_chars(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

template <class Json>
Json bytes_of(const std::string& piece) {
  Json b = Json::array();
  for (const unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

template <class Json>
Json prob_entry(ReplyDialect d, const Tokenizer& tok, token_id id, float logprob, bool with_id) {
  const std::string raw = raw_piece(d, tok, id);
  Json e = {{"token", reply_text(d, raw)}, {"logprob", logprob}, {"bytes", bytes_of<Json>(raw)}};
  if (with_id) e["id"] = id;
  return e;
}

template <class Json>
Json finish_value(const std::string& finish) {
  return finish.empty() ? Json() : Json(finish);
}

}  // namespace

std::string reply_text(ReplyDialect d, std::string_view s) {
  return is_server(d) ? std::string(s) : drop_invalid_utf8(s);
}

template <class Json>
Json reply_head(ReplyDialect d, const ReplyHead& head, const char* object) {
  Json j = {{"id", head.id}, {"object", object}, {"created", head.created}, {"model", head.model}};
  if (is_server(d)) j["system_fingerprint"] = head.system_fingerprint;
  return j;
}

template <class Json>
Json reply_usage(ReplyDialect d, const ReplyUsage& u) {
  Json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (is_server(d)) j["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  return j;
}

template <class Json>
Json token_entries(ReplyDialect d, std::span<const TokenProbs> tokens, const Tokenizer& tok, bool with_id) {
  Json out = Json::array();
  for (const TokenProbs& t : tokens) {
    Json e = prob_entry<Json>(d, tok, t.id, t.logprob, with_id);
    Json top = Json::array();
    for (const TokenLogprob& c : t.top) top.push_back(prob_entry<Json>(d, tok, c.id, c.logprob, with_id));
    e["top_logprobs"] = std::move(top);
    out.push_back(std::move(e));
  }
  return out;
}

template <class Json>
Json chat_logprobs(ReplyDialect d, std::span<const TokenProbs> tokens, const Tokenizer& tok) {
  Json j = {{"content", token_entries<Json>(d, tokens, tok, false)}};
  if (is_server(d)) j["refusal"] = nullptr;
  return j;
}

template <class Json>
Json completion_logprobs(ReplyDialect d, std::span<const TokenProbs> tokens, const Tokenizer& tok, size_t offset) {
  Json toks = Json::array(), offs = Json::array(), lps = Json::array(), tops = Json::array();
  for (const TokenProbs& t : tokens) {
    const std::string raw = raw_piece(d, tok, t.id);
    const std::string piece = reply_text(d, raw);
    toks.push_back(piece);
    offs.push_back(offset);
    lps.push_back(t.logprob);
    Json top = Json::object();  // keyed by the candidates' texts; a later equal text overwrites
    for (const TokenLogprob& c : t.top) {
      const std::string p = raw_piece(d, tok, c.id);
      top[is_server(d) ? replaced_utf8(p) : reply_text(d, p)] = c.logprob;
    }
    if (!is_server(d) && !top.contains(piece)) top[piece] = t.logprob;  // llama-cpp-python: the chosen token too
    tops.push_back(std::move(top));
    offset += is_server(d) ? raw.size() : utf8_chars(piece);
  }
  return {{"tokens", toks}, {"text_offset", offs}, {"token_logprobs", lps}, {"top_logprobs", tops}};
}

template <class Json>
Json completion_choice(ReplyDialect d, const ReplyChoice& c, const Tokenizer& tok) {
  return {{"text", reply_text(d, c.text)},
          {"index", c.index},
          {"logprobs", c.logprobs ? completion_logprobs<Json>(d, c.tokens, tok, c.text_offset) : Json()},
          {"finish_reason", finish_value<Json>(c.finish_reason)}};
}

template <class Json>
Json chat_choice(ReplyDialect d, const ReplyChoice& c, const char* field, Json body, const Tokenizer& tok) {
  return {{"index", c.index},
          {field, std::move(body)},
          {"logprobs", c.logprobs ? chat_logprobs<Json>(d, c.tokens, tok) : Json()},
          {"finish_reason", finish_value<Json>(c.finish_reason)}};
}

template <class Json>
Json chat_tool_calls(std::span<const ToolCall> calls) {
  Json out = Json::array();
  for (const ToolCall& c : calls)
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

template <class Json>
Json chat_message(const ParsedOutput& p) {
  Json m = {{"role", "assistant"}};
  m["content"] = p.content.empty() && !p.tool_calls.empty() ? Json() : Json(p.content);
  if (!p.reasoning_content.empty()) m["reasoning_content"] = p.reasoning_content;
  if (!p.tool_calls.empty()) m["tool_calls"] = chat_tool_calls<Json>(p.tool_calls);
  return m;
}

template <class Json>
Json chat_delta(const Delta& d) {
  switch (d.kind) {
    case Delta::Kind::content: return {{"content", d.text}};
    case Delta::Kind::reasoning: return {{"reasoning_content", d.text}};
    case Delta::Kind::tool_call:
      return {{"tool_calls", Json::array({{{"index", d.index},
                                           {"id", d.id},
                                           {"type", "function"},
                                           {"function", {{"name", d.name}, {"arguments", ""}}}}})}};
    case Delta::Kind::arguments:
      return {{"tool_calls", Json::array({{{"index", d.index}, {"function", {{"arguments", d.text}}}}})}};
  }
  return Json::object();
}

#define SYNAPSE_REPLY_FORMAT(Json)                                                                              \
  template Json reply_head<Json>(ReplyDialect, const ReplyHead&, const char*);                                  \
  template Json reply_usage<Json>(ReplyDialect, const ReplyUsage&);                                             \
  template Json token_entries<Json>(ReplyDialect, std::span<const TokenProbs>, const Tokenizer&, bool);         \
  template Json chat_logprobs<Json>(ReplyDialect, std::span<const TokenProbs>, const Tokenizer&);               \
  template Json completion_logprobs<Json>(ReplyDialect, std::span<const TokenProbs>, const Tokenizer&, size_t); \
  template Json completion_choice<Json>(ReplyDialect, const ReplyChoice&, const Tokenizer&);                    \
  template Json chat_choice<Json>(ReplyDialect, const ReplyChoice&, const char*, Json, const Tokenizer&); \
  template Json chat_tool_calls<Json>(std::span<const ToolCall>);                                         \
  template Json chat_message<Json>(const ParsedOutput&);                                                  \
  template Json chat_delta<Json>(const Delta&);
SYNAPSE_REPLY_FORMAT(json)
SYNAPSE_REPLY_FORMAT(ordered_json)
#undef SYNAPSE_REPLY_FORMAT

namespace {

// A dialect's JSON text: llama_cpp_python in its own key order, llama_server sorted.
template <class Json>
std::string reply_object(ReplyDialect d, const ReplyHead& head, const char* object, Json choice,
                         const ReplyUsage& usage, bool chunk) {
  Json j = reply_head<Json>(d, head, object);
  j["choices"] = Json::array({std::move(choice)});
  if (!chunk) j["usage"] = reply_usage<Json>(d, usage);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <class Json>
std::string completion_text(ReplyDialect d, const ReplyHead& head, const ReplyChoice& c, const ReplyUsage& usage,
                            const Tokenizer& tok, bool chunk) {
  return reply_object<Json>(d, head, "text_completion", completion_choice<Json>(d, c, tok), usage, chunk);
}

template <class Json>
std::string chat_text(ReplyDialect d, const ReplyHead& head, const ReplyChoice& c, const ReplyUsage& usage,
                      const Tokenizer& tok, bool chunk) {
  Json body = Json::parse(c.text, nullptr, false);
  if (!body.is_object())
    throw Error(Errc::invalid_argument, std::string("chat_json: the choice's ") + (chunk ? "delta" : "message") +
                                            " must be a JSON object, got: " + c.text.substr(0, 80));
  return reply_object<Json>(d, head, chunk ? "chat.completion.chunk" : "chat.completion",
                            chat_choice<Json>(d, c, chunk ? "delta" : "message", std::move(body), tok), usage, chunk);
}

}  // namespace

}  // namespace runtime

std::string completion_json(ReplyDialect d, const ReplyHead& head, const ReplyChoice& choice, const ReplyUsage& usage,
                            const Tokenizer& tok, bool chunk) {
  return d == ReplyDialect::llama_server
             ? runtime::completion_text<nlohmann::json>(d, head, choice, usage, tok, chunk)
             : runtime::completion_text<nlohmann::ordered_json>(d, head, choice, usage, tok, chunk);
}

std::string chat_json(ReplyDialect d, const ReplyHead& head, const ReplyChoice& choice, const ReplyUsage& usage,
                      const Tokenizer& tok, bool chunk) {
  return d == ReplyDialect::llama_server ? runtime::chat_text<nlohmann::json>(d, head, choice, usage, tok, chunk)
                                         : runtime::chat_text<nlohmann::ordered_json>(d, head, choice, usage, tok, chunk);
}

}  // namespace synapse
