#include "server/response.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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

constexpr ReplyDialect kDialect = ReplyDialect::llama_server;

// An entry's "logprob" as llama-server's post_sampling_probs spells it:
// "prob", the probability (exp of the stored log, within float rounding).
void to_prob(json& e) {
  const auto lp = e.find("logprob");
  if (lp == e.end()) return;
  const float p = static_cast<float>(std::exp(lp->get<double>()));
  e.erase(lp);
  e["prob"] = p;
}

// llama-server's completion_probabilities (/completion): the chat entries
// with each token's id; with post_sampling_probs "prob" and "top_probs" for
// "logprob" and "top_logprobs" (completion_token_output::probs_vector_to_json).
json completion_probabilities(const CompletionRequest& req, std::span<const TokenProbs> tokens, const Tokenizer& tok) {
  json out = runtime::token_entries<json>(kDialect, tokens, tok, true);
  if (!req.post_sampling_probs) return out;
  for (json& e : out) {
    to_prob(e);
    json top = std::move(e["top_logprobs"]);
    e.erase("top_logprobs");
    for (json& t : top) to_prob(t);
    e["top_probs"] = std::move(top);
  }
  return out;
}

json token_ids(std::span<const TokenProbs> tokens) {
  json ids = json::array();
  for (const TokenProbs& t : tokens) ids.push_back(t.id);
  return ids;
}

// llama-server's timings object (result_timings::to_json): `t` with its
// rates, and cache_n, the prompt tokens found in the cache.
json timings_json(const GenerationTimings& t, int64_t cache_n) {
  return {{"prompt_n", t.prompt_n},
          {"prompt_ms", t.prompt_ms},
          {"prompt_per_token_ms", t.prompt_per_token_ms()},
          {"prompt_per_second", t.prompt_per_second()},
          {"predicted_n", t.predicted_n},
          {"predicted_ms", t.predicted_ms},
          {"predicted_per_token_ms", t.predicted_per_token_ms()},
          {"predicted_per_second", t.predicted_per_second()},
          {"cache_n", cache_n}};
}

json timings(const GenerationResult& c) { return timings_json(c.timings, c.n_cached); }

// With timings_per_token, a streamed chunk's timings: those of its last step
// that sampled a token (none when no step did).
void add_step_timings(json& chunk, const CompletionRequest& req, std::span<const GeneratedToken> steps) {
  if (!req.timings_per_token) return;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (it->id >= 0) {
      chunk["timings"] = timings_json(it->timings, it->n_cached);
      return;
    }
}

// llama-server's stop_type: "eos", "word" or "limit".
const char* stop_type_of(const GenerationResult& r) {
  switch (r.stop_reason) {
    case StopReason::eog: return "eos";
    case StopReason::stop_string: return "word";
    default: return r.finish_reason == FinishReason::length ? "limit" : "none";
  }
}

// llama-server's generation_settings.logit_bias: the request's biases, then
// with ignore_eos every end-of-generation token at -inf (which JSON writes
// null), as llama-server adds them.
json logit_bias_of(const CompletionRequest& req, const Tokenizer& tok) {
  json out = json::array();
  for (const LogitBias& b : req.sampling.logit_bias) out.push_back({{"bias", b.bias}, {"token", b.token}});
  if (req.stop.ignore_eos)
    for (const token_id id : tok.eog_ids())
      out.push_back({{"bias", -std::numeric_limits<float>::infinity()}, {"token", id}});
  return out;
}

// llama-server's json_get_nested_values: each "a/b/c" path that names a value
// of `j`, as a key of its own; the others left out.
json nested_values(const std::vector<std::string>& paths, const json& j) {
  json out = json::object();
  for (const std::string& path : paths) {
    const json* at = &j;
    size_t start = 0;
    while (at) {
      const size_t slash = path.find('/', start);
      const std::string key = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      const auto it = at->is_object() ? at->find(key) : at->end();
      at = it != at->end() ? &*it : nullptr;
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (at) out[path] = *at;
  }
  return out;
}

// llama-server's native result object (tools/server/README.md, POST /completion).
json native_result(const CompletionRequest& req, const ReplyMeta& meta, int index, const std::string& text,
                   std::span<const TokenProbs> tokens, const Tokenizer& tok, const GenerationResult* fin) {
  json j = {{"index", index}, {"content", text}, {"stop", fin != nullptr}, {"id_slot", fin ? fin->slot : -1}};
  // A streamed chunk always carries its token ids (llama-server); a whole
  // reply only with return_tokens.
  j["tokens"] = req.return_tokens || (req.stream && fin == nullptr) ? token_ids(tokens) : json::array();
  if (req.logprobs) j["completion_probabilities"] = completion_probabilities(req, tokens, tok);
  if (fin) {
    j["model"] = meta.model;
    j["tokens_predicted"] = fin->tokens.size();
    j["tokens_evaluated"] = fin->n_prompt;
    j["tokens_cached"] = fin->n_cached;
    j["stop_type"] = stop_type_of(*fin);
    j["stopping_word"] = fin->stopping_word;
    j["truncated"] = fin->context_full;  // llama-server: stopped by a full context
    j["has_new_line"] = fin->text.find('\n') != std::string::npos;  // anywhere in the reply
    j["timings"] = timings(*fin);
    // llama-server's "prompt": the prompt's tokens as text, special tokens
    // written out (/infill's FIM markers included).
    const size_t prompt = static_cast<size_t>(index) / static_cast<size_t>(std::max(req.n, 1));
    if (prompt < req.prompts.size()) j["prompt"] = tok.detokenize(req.prompts[prompt], false, true);
    j["generation_settings"] = {{"n_predict", req.stop.n_predict},
                                {"max_tokens", req.stop.n_predict},
                                {"logit_bias", logit_bias_of(req, tok)},
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
                                {"post_sampling_probs", req.post_sampling_probs},
                                {"ignore_eos", req.stop.ignore_eos},
                                {"stop", req.stop.stops},
                                // llama.cpp's adaptive-p sampler, which synapse does
                                // not have: off, as llama-server reports it when off.
                                {"adaptive_target", -1.0f},
                                {"adaptive_decay", 0.9f}};
    if (!req.response_fields.empty()) return nested_values(req.response_fields, j);
  }
  return j;
}

json head(const ReplyMeta& meta, const char* object) { return runtime::reply_head<json>(kDialect, meta, object); }

// A choice of the reply or of a chunk: `tokens`' logprobs when `logprobs`,
// finish_reason null while `finish` is null.
ReplyChoice choice_of(int index, std::string text, bool logprobs, std::span<const TokenProbs> tokens,
                      size_t text_offset, const char* finish) {
  ReplyChoice c;
  c.index = index;
  c.text = std::move(text);
  c.logprobs = logprobs;
  c.tokens.assign(tokens.begin(), tokens.end());
  c.text_offset = text_offset;
  c.finish_reason = finish ? finish : "";
  return c;
}

}  // namespace

const char* finish_reason_of(const GenerationResult& r, bool tool_calls) {
  if (r.finish_reason == FinishReason::length) return "length";
  return tool_calls ? "tool_calls" : "stop";
}

json usage_of(const CompletionRequest& req, std::span<const GenerationResult> choices) {
  ReplyUsage u;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i % static_cast<size_t>(req.n) == 0) {
      u.prompt_tokens += choices[i].n_prompt;
      u.cached_tokens += choices[i].n_cached;
    }
    u.completion_tokens += static_cast<int64_t>(choices[i].tokens.size());
  }
  return runtime::reply_usage<json>(kDialect, u);
}

json completion_reply(const CompletionRequest& req, const ReplyMeta& meta, std::span<const GenerationResult> choices,
                      const Tokenizer& tok) {
  if (req.route == Route::completion) {
    json arr = json::array();
    for (size_t i = 0; i < choices.size(); ++i)
      arr.push_back(native_result(req, meta, static_cast<int>(i), choices[i].text, token_probs(choices[i]), tok,
                                  &choices[i]));
    return choices.size() == 1 ? arr[0] : arr;
  }
  const bool chat = req.route == Route::chat_completions;
  json j = head(meta, chat ? "chat.completion" : "text_completion");
  json cs = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const GenerationResult& c = choices[i];
    const std::vector<TokenProbs> tokens = token_probs(c);
    ReplyChoice choice = choice_of(static_cast<int>(i), c.text, req.logprobs, tokens, 0, finish_reason_of(c));
    if (chat && req.chat_output) {
      const runtime::ParsedOutput parsed =
          runtime::parse_output(req.chat_output->format, c.text, req.chat_output->for_choice(i));
      choice.finish_reason = finish_reason_of(c, !parsed.tool_calls.empty());
      cs.push_back(runtime::chat_choice<json>(kDialect, choice, "message", runtime::chat_message<json>(parsed), tok));
    } else if (chat) {
      cs.push_back(runtime::chat_choice<json>(kDialect, choice, "message", {{"role", "assistant"}, {"content", c.text}},
                                              tok));
    } else {
      cs.push_back(runtime::completion_choice<json>(kDialect, choice, tok));
    }
  }
  j["choices"] = std::move(cs);
  j["usage"] = usage_of(req, choices);
  if (req.verbose && !choices.empty())
    j["__verbose"] = native_result(req, meta, 0, choices[0].text, token_probs(choices[0]), tok, &choices[0]);
  if (!choices.empty()) j["timings"] = timings(choices[0]);
  return j;
}

json stream_chunk(const CompletionRequest& req, const ReplyMeta& meta, int index, const std::string& text,
                  std::span<const GeneratedToken> steps, size_t text_offset, const Tokenizer& tok, bool first,
                  const GenerationResult* final_out, bool tool_calls) {
  const std::vector<TokenProbs> tokens = token_probs(steps);
  if (req.route == Route::completion) {
    json j = native_result(req, meta, index, text, tokens, tok, final_out);
    if (!final_out) add_step_timings(j, req, steps);
    return j;
  }
  const bool chat = req.route == Route::chat_completions;
  json j = head(meta, chat ? "chat.completion.chunk" : "text_completion");
  const ReplyChoice choice = choice_of(index, text, req.logprobs && !tokens.empty(), tokens, text_offset,
                                       final_out ? finish_reason_of(*final_out, tool_calls) : nullptr);
  if (chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    // llama-server's first chunk is the role with content null.
    if (!text.empty() || !tokens.empty())
      delta["content"] = text;
    else if (first)
      delta["content"] = nullptr;
    j["choices"] = json::array({runtime::chat_choice<json>(kDialect, choice, "delta", std::move(delta), tok)});
  } else {
    j["choices"] = json::array({runtime::completion_choice<json>(kDialect, choice, tok)});
  }
  if (req.include_usage) j["usage"] = nullptr;
  // The reply's timings ride on its last chunk: this one, unless the usage
  // chunk follows (llama-server's rule).
  if (final_out && !req.include_usage) j["timings"] = timings(*final_out);
  if (!final_out) add_step_timings(j, req, steps);
  return j;
}

json progress_chunk(const CompletionRequest& req, const ReplyMeta& meta, int index, const PromptProgress& pp,
                    const Tokenizer& tok) {
  json j = stream_chunk(req, meta, index, "", {}, 0, tok, req.route == Route::chat_completions, nullptr);
  j["prompt_progress"] = {{"total", pp.total}, {"cache", pp.cache}, {"processed", pp.processed}, {"time_ms", pp.time_ms}};
  if (req.timings_per_token) j["timings"] = timings_json(pp.timings, pp.cache);
  return j;
}

std::vector<json> delta_chunks(const CompletionRequest& req, const ReplyMeta& meta, int index,
                               std::span<const runtime::Delta> deltas, std::span<const GeneratedToken> steps,
                               const Tokenizer& tok) {
  const std::vector<TokenProbs> tokens = token_probs(steps);
  std::vector<json> out;
  const auto chunk = [&](json delta) {
    json j = head(meta, "chat.completion.chunk");
    // The step's logprobs ride on its first chunk.
    const ReplyChoice choice = choice_of(index, {}, req.logprobs && !tokens.empty() && out.empty(), tokens, 0, nullptr);
    j["choices"] = json::array({runtime::chat_choice<json>(kDialect, choice, "delta", std::move(delta), tok)});
    if (req.include_usage) j["usage"] = nullptr;
    out.push_back(std::move(j));
  };
  for (const runtime::Delta& d : deltas) chunk(runtime::chat_delta<json>(d));
  if (out.empty() && req.logprobs && !tokens.empty()) chunk(json::object());
  if (!out.empty()) add_step_timings(out.back(), req, steps);
  return out;
}

json usage_chunk(const CompletionRequest& req, const ReplyMeta& meta, std::span<const GenerationResult> choices,
                 const GenerationResult& last) {
  json j = head(meta, req.route == Route::chat_completions ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_of(req, choices);
  j["timings"] = timings(last);
  return j;
}

}  // namespace synapse::server
