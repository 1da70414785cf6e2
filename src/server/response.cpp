#include "server/response.hpp"

#include <algorithm>

namespace synapse::server {

using nlohmann::json;

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

json error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  const char* type = status == 400 || status == 408 || status == 413 || status == 431 ? "invalid_request_error"
                     : status == 401               ? "authentication_error"
                     : status == 404               ? "not_found_error"
                     : status == 501               ? "not_supported_error"
                     : status == 503               ? "unavailable_error"
                                                   : "server_error";
  return {{"error",
           {{"message", message}, {"type", type}, {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json(status) : json(code)}}}};
}

namespace {

// A token's bytes as OpenAI's "bytes" field gives them (the piece may be a
// partial UTF-8 sequence; the "token" string then shows U+FFFD).
json bytes_of(const std::string& piece) {
  json b = json::array();
  for (const unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

std::string piece(const Tokenizer& tok, token_id id) { return tok.token_to_piece(id, true); }

// `s` with each invalid UTF-8 sequence replaced by U+FFFD (for object keys,
// which the serializer's replace handler does not cover when it throws first).
std::string valid_utf8(const std::string& s) { return json::parse(dump_json(json(s))).get<std::string>(); }

// A token and its log-probabilities, from a finished reply or a streamed step.
struct TokenEntry {
  token_id id;
  float logprob;
  std::span<const TokenLogprob> top;
};

std::vector<TokenEntry> entries_of(const GenerationResult& r) {
  std::vector<TokenEntry> out;
  for (size_t i = 0; i < r.tokens.size(); ++i)
    out.push_back({r.tokens[i], i < r.logprobs.size() ? r.logprobs[i] : 0.0f,
                   i < r.top_logprobs.size() ? std::span<const TokenLogprob>(r.top_logprobs[i])
                                             : std::span<const TokenLogprob>()});
  return out;
}

// Steps that put a token in the reply (not closing steps, not end-of-generation).
std::vector<TokenEntry> entries_of(std::span<const GeneratedToken> steps) {
  std::vector<TokenEntry> out;
  for (const GeneratedToken& g : steps)
    if (g.id >= 0 && !g.eog) out.push_back({g.id, g.logprob, g.top_logprobs});
  return out;
}

// One token's entry: OpenAI's {token, logprob, bytes}, plus llama-server's id.
json prob_entry(const Tokenizer& tok, token_id id, float logprob, bool with_id) {
  const std::string p = piece(tok, id);
  json e = {{"token", p}, {"logprob", logprob}, {"bytes", bytes_of(p)}};
  if (with_id) e["id"] = id;
  return e;
}

// The entries of chat's logprobs.content (with_id false) and of
// llama-server's completion_probabilities (true), each with its top_logprobs.
json token_probs(std::span<const TokenEntry> tokens, const Tokenizer& tok, bool with_id) {
  json out = json::array();
  for (const TokenEntry& t : tokens) {
    json e = prob_entry(tok, t.id, t.logprob, with_id);
    json top = json::array();
    for (const TokenLogprob& c : t.top) top.push_back(prob_entry(tok, c.id, c.logprob, with_id));
    e["top_logprobs"] = std::move(top);
    out.push_back(std::move(e));
  }
  return out;
}

json chat_logprobs(std::span<const TokenEntry> tokens, const Tokenizer& tok) {
  return {{"content", token_probs(tokens, tok, false)}, {"refusal", nullptr}};
}

// OpenAI's legacy completions shape; text_offset counts bytes from the start
// of the choice's text (`offset` for the first token of a streamed chunk).
json completion_logprobs(std::span<const TokenEntry> tokens, const Tokenizer& tok, size_t offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (const TokenEntry& t : tokens) {
    const std::string p = piece(tok, t.id);
    toks.push_back(p);
    lps.push_back(t.logprob);
    json top = json::object();  // keyed by the candidates' texts, made valid UTF-8
    for (const TokenLogprob& c : t.top) top[valid_utf8(piece(tok, c.id))] = c.logprob;
    tops.push_back(std::move(top));
    offs.push_back(offset);
    offset += p.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json token_ids(std::span<const TokenEntry> tokens) {
  json ids = json::array();
  for (const TokenEntry& t : tokens) ids.push_back(t.id);
  return ids;
}

json timings(const GenerationResult& c) {
  const GenerationTimings& t = c.timings;
  return {{"prompt_n", t.prompt_n},
          {"prompt_ms", t.prompt_ms},
          {"prompt_per_second", t.prompt_per_second()},
          {"predicted_n", t.predicted_n},
          {"predicted_ms", t.predicted_ms},
          {"predicted_per_second", t.predicted_per_second()},
          {"cache_n", c.n_cached}};
}

// llama-server's stop_type: "eos", "word" or "limit".
const char* stop_type_of(const GenerationResult& r) {
  switch (r.stop_reason) {
    case StopReason::eog: return "eos";
    case StopReason::stop_string: return "word";
    default: return r.finish_reason == FinishReason::length ? "limit" : "none";
  }
}

// llama-server's native result object (tools/server/README.md, POST /completion).
json native_result(const CompletionRequest& req, const ReplyMeta& meta, int index, const std::string& text,
                   std::span<const TokenEntry> tokens, const Tokenizer& tok, const GenerationResult* fin) {
  json j = {{"index", index}, {"content", text}, {"stop", fin != nullptr}, {"id_slot", fin ? fin->slot : -1}};
  // A streamed chunk always carries its token ids (llama-server); a whole
  // reply only with return_tokens.
  j["tokens"] = req.return_tokens || (req.stream && fin == nullptr) ? token_ids(tokens) : json::array();
  if (req.logprobs) j["completion_probabilities"] = token_probs(tokens, tok, true);
  if (fin) {
    j["model"] = meta.model;
    j["tokens_predicted"] = fin->tokens.size();
    j["tokens_evaluated"] = fin->n_prompt;
    j["tokens_cached"] = fin->n_cached;
    j["stop_type"] = stop_type_of(*fin);
    j["stopping_word"] = fin->stopping_word;
    j["truncated"] = false;
    j["has_new_line"] = fin->text.find('\n') != std::string::npos;  // anywhere in the reply
    j["timings"] = timings(*fin);
    // llama-server's "prompt": the prompt's tokens as text, special tokens
    // written out (/infill's FIM markers included).
    const size_t prompt = static_cast<size_t>(index) / static_cast<size_t>(std::max(req.n, 1));
    if (prompt < req.prompts.size()) j["prompt"] = tok.detokenize(req.prompts[prompt], false, true);
    j["generation_settings"] = {{"n_predict", req.stop.n_predict},
                                {"seed", fin->seed},
                                {"temperature", req.sampling.temp},
                                {"top_k", req.sampling.top_k},
                                {"top_p", req.sampling.top_p},
                                {"min_p", req.sampling.min_p},
                                {"typical_p", req.sampling.typical_p},
                                {"repeat_penalty", req.sampling.penalty_repeat},
                                {"repeat_last_n", req.sampling.penalty_last_n},
                                {"presence_penalty", req.sampling.penalty_present},
                                {"frequency_penalty", req.sampling.penalty_freq},
                                {"n_probs", req.top_logprobs},
                                {"ignore_eos", req.stop.ignore_eos},
                                {"stop", req.stop.stops}};
  }
  return j;
}

json head(const ReplyMeta& meta, const char* object) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", meta.system_fingerprint}};
}

}  // namespace

const char* finish_reason_of(const GenerationResult& r, bool tool_calls) {
  if (r.finish_reason == FinishReason::length) return "length";
  return tool_calls ? "tool_calls" : "stop";
}

json chat_message(const runtime::ParsedOutput& p) {
  json m = {{"role", "assistant"}};
  m["content"] = p.content.empty() && !p.tool_calls.empty() ? json() : json(p.content);
  if (!p.reasoning_content.empty()) m["reasoning_content"] = p.reasoning_content;
  if (!p.tool_calls.empty()) {
    json calls = json::array();
    for (const runtime::ToolCall& c : p.tool_calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

json usage_of(const CompletionRequest& req, std::span<const GenerationResult> choices) {
  int64_t prompt = 0, cached = 0, completion = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i % static_cast<size_t>(req.n) == 0) {
      prompt += choices[i].n_prompt;
      cached += choices[i].n_cached;
    }
    completion += static_cast<int64_t>(choices[i].tokens.size());
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json completion_reply(const CompletionRequest& req, const ReplyMeta& meta, std::span<const GenerationResult> choices,
                      const Tokenizer& tok) {
  if (req.route == Route::completion) {
    json arr = json::array();
    for (size_t i = 0; i < choices.size(); ++i)
      arr.push_back(native_result(req, meta, static_cast<int>(i), choices[i].text, entries_of(choices[i]), tok,
                                  &choices[i]));
    return choices.size() == 1 ? arr[0] : arr;
  }
  const bool chat = req.route == Route::chat_completions;
  json j = head(meta, chat ? "chat.completion" : "text_completion");
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const GenerationResult& c = choices[i];
    json choice = {{"index", i}, {"finish_reason", finish_reason_of(c)}};
    const std::vector<TokenEntry> tokens = entries_of(c);
    if (chat && req.chat_output) {
      const runtime::ParsedOutput parsed =
          runtime::parse_output(req.chat_output->format, c.text, req.chat_output->for_choice(i));
      choice["message"] = chat_message(parsed);
      choice["finish_reason"] = finish_reason_of(c, !parsed.tool_calls.empty());
      choice["logprobs"] = req.logprobs ? chat_logprobs(tokens, tok) : json();
    } else if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      choice["logprobs"] = req.logprobs ? chat_logprobs(tokens, tok) : json();
    } else {
      choice["text"] = c.text;
      choice["logprobs"] = req.logprobs ? completion_logprobs(tokens, tok, 0) : json();
    }
    cs.push_back(std::move(choice));
  }
  j["choices"] = std::move(cs);
  j["usage"] = usage_of(req, choices);
  return j;
}

json stream_chunk(const CompletionRequest& req, const ReplyMeta& meta, int index, const std::string& text,
                  std::span<const GeneratedToken> steps, size_t text_offset, const Tokenizer& tok, bool first,
                  const GenerationResult* final_out, bool tool_calls) {
  const std::vector<TokenEntry> tokens = entries_of(steps);
  if (req.route == Route::completion) return native_result(req, meta, index, text, tokens, tok, final_out);
  const bool chat = req.route == Route::chat_completions;
  json j = head(meta, chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", index},
                 {"finish_reason", final_out ? json(finish_reason_of(*final_out, tool_calls)) : json()}};
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first || !tokens.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = req.logprobs && !tokens.empty() ? chat_logprobs(tokens, tok) : json();
  } else {
    choice["text"] = text;
    choice["logprobs"] = req.logprobs && !tokens.empty() ? completion_logprobs(tokens, tok, text_offset) : json();
  }
  j["choices"] = json::array({std::move(choice)});
  if (req.include_usage) j["usage"] = nullptr;
  return j;
}

std::vector<json> delta_chunks(const CompletionRequest& req, const ReplyMeta& meta, int index,
                               std::span<const runtime::Delta> deltas, std::span<const GeneratedToken> steps,
                               const Tokenizer& tok) {
  using Kind = runtime::Delta::Kind;
  const std::vector<TokenEntry> tokens = entries_of(steps);
  std::vector<json> out;
  const auto chunk = [&](json delta) {
    json j = head(meta, "chat.completion.chunk");
    json choice = {{"index", index}, {"finish_reason", nullptr}, {"delta", std::move(delta)}};
    // The step's logprobs ride on its first chunk.
    choice["logprobs"] = req.logprobs && !tokens.empty() && out.empty() ? chat_logprobs(tokens, tok) : json();
    j["choices"] = json::array({std::move(choice)});
    if (req.include_usage) j["usage"] = nullptr;
    out.push_back(std::move(j));
  };
  for (const runtime::Delta& d : deltas) {
    switch (d.kind) {
      case Kind::content: chunk({{"content", d.text}}); break;
      case Kind::reasoning: chunk({{"reasoning_content", d.text}}); break;
      case Kind::tool_call:
        chunk({{"tool_calls", json::array({{{"index", d.index},
                                            {"id", d.id},
                                            {"type", "function"},
                                            {"function", {{"name", d.name}, {"arguments", ""}}}}})}});
        break;
      case Kind::arguments:
        chunk({{"tool_calls", json::array({{{"index", d.index}, {"function", {{"arguments", d.text}}}}})}});
        break;
    }
  }
  if (out.empty() && req.logprobs && !tokens.empty()) chunk(json::object());
  return out;
}

json usage_chunk(const CompletionRequest& req, const ReplyMeta& meta, std::span<const GenerationResult> choices) {
  json j = head(meta, req.route == Route::chat_completions ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_of(req, choices);
  return j;
}

}  // namespace synapse::server
