// Embedding and rerank requests and replies (server/embedding.hpp).
#include "server/embedding.hpp"

#include <algorithm>
#include <numeric>

#include "server/request.hpp"

namespace synapse::server {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // replies keep llama-server's key order (its json is ordered)

namespace {

[[noreturn]] void refuse(const std::string& message, const std::string& param = {}) {
  throw HttpError(400, message, param);
}

std::optional<std::string> model_of(const json& body) {
  const auto it = body.find("model");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) refuse("'model' must be a string, got " + quote_value(*it), "model");
  return it->get<std::string>();
}

void check_dimensions(const json& body, int64_t n_embd) {
  const auto it = body.find("dimensions");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_number_integer() || it->get<int64_t>() != n_embd)
    refuse("'dimensions' must be the model's embedding size " + std::to_string(n_embd) +
               " (this model cannot shorten its embeddings), got " + quote_value(*it),
           "dimensions");
}

}  // namespace

std::string base64_floats(const float* x, size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* b = reinterpret_cast<const unsigned char*>(x);
  const size_t len = n * sizeof(float);
  std::string out;
  out.reserve((len + 2) / 3 * 4);
  for (size_t i = 0; i < len; i += 3) {
    const uint32_t v = (uint32_t{b[i]} << 16) | (i + 1 < len ? uint32_t{b[i + 1]} << 8 : 0) |
                       (i + 2 < len ? uint32_t{b[i + 2]} : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < len ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < len ? kAlphabet[v & 63] : '=';
  }
  return out;
}

EmbeddingBody parse_embedding_body(const json& body, bool oai_route, const Tokenizer& tok, int64_t n_embd,
                                   int default_normalize) {
  EmbeddingBody r;
  r.oai = oai_route;
  r.embd_normalize = default_normalize;
  const json* prompt = nullptr;
  if (body.contains("input")) {
    prompt = &body["input"];
  } else if (body.contains("content")) {
    r.oai = false;  // "content" is not OpenAI's: the reply is llama-server's own shape
    prompt = &body["content"];
  } else {
    refuse("\"input\" or \"content\" must be provided");
  }
  if (const auto it = body.find("encoding_format"); it != body.end()) {
    if (it->is_string() && *it == "base64") r.base64 = true;
    else if (!(it->is_string() && *it == "float"))
      refuse("The format to return the embeddings in. Can be either float or base64", "encoding_format");
  }
  if (const auto it = body.find("embd_normalize"); it != body.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() > 1000)
      refuse("'embd_normalize' must be an integer from -1 to 1000, got " + quote_value(*it), "embd_normalize");
    r.embd_normalize = it->get<int>();
  }
  check_dimensions(body, n_embd);
  r.model = model_of(body);
  r.inputs = parse_prompts(*prompt, tok, body.contains("input") ? "input" : "content");
  for (const auto& in : r.inputs)
    if (in.empty()) refuse("Input content cannot be empty");
  return r;
}

ojson embeddings_oai_reply(const EmbeddingBody& req, const std::vector<Embedding>& out, const std::string& model_name) {
  ojson data = ojson::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::vector<float>& v = out[i].rows.at(0);
    if (req.base64)
      data.push_back({{"embedding", base64_floats(v.data(), v.size())},
                      {"index", i},
                      {"object", "embedding"},
                      {"encoding_format", "base64"}});
    else
      data.push_back({{"embedding", v}, {"index", i}, {"object", "embedding"}});
    n_tokens += out[i].n_tokens;
  }
  return {{"model", req.model.value_or(model_name)},
          {"object", "list"},
          {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}},
          {"data", std::move(data)}};
}

ojson embeddings_native_reply(const std::vector<Embedding>& out) {
  ojson arr = ojson::array();
  for (size_t i = 0; i < out.size(); ++i) arr.push_back({{"index", i}, {"embedding", out[i].rows}});
  return arr;
}

RerankBody parse_rerank_body(const json& body, const Tokenizer& tok, const std::optional<std::string>& rerank_template) {
  RerankBody r;
  r.tei = body.contains("texts");
  if (body.count("query") != 1) refuse("\"query\" must be provided", "query");
  if (!body["query"].is_string()) refuse("\"query\" must be a string", "query");
  const std::string query = body["query"].get<std::string>();
  const json* docs = body.contains("documents") ? &body["documents"] : r.tei ? &body["texts"] : nullptr;
  const bool docs_ok = docs && docs->is_array() && !docs->empty() &&
                       std::all_of(docs->begin(), docs->end(), [](const json& d) { return d.is_string(); });
  if (!docs_ok) refuse("\"documents\" must be a non-empty string array", r.tei ? "texts" : "documents");
  for (const json& d : *docs) r.documents.push_back(d.get<std::string>());
  r.top_n = static_cast<int64_t>(r.documents.size());
  if (const auto it = body.find("top_n"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      refuse("'top_n' must be a non-negative integer, got " + quote_value(*it), "top_n");
    r.top_n = it->get<int64_t>();
  }
  if (const auto it = body.find("return_text"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) refuse("'return_text' must be a boolean, got " + quote_value(*it), "return_text");
    r.return_text = r.tei && it->get<bool>();
  }
  r.model = model_of(body);

  auto replace_all = [](std::string s, const std::string& from, const std::string& to) {
    for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
    return s;
  };
  for (const std::string& doc : r.documents) {
    std::vector<token_id> ids;
    if (rerank_template) {
      ids = tok.tokenize(replace_all(replace_all(*rerank_template, "{query}", query), "{document}", doc), false, true);
    } else {
      const std::vector<token_id> q = tok.tokenize(query, false, false), d = tok.tokenize(doc, false, false);
      if (tok.add_bos() && tok.bos() >= 0) ids.push_back(tok.bos());
      ids.insert(ids.end(), q.begin(), q.end());
      if (tok.add_eos() && tok.eos() >= 0) ids.push_back(tok.eos());
      ids.insert(ids.end(), d.begin(), d.end());
      if (tok.add_eos() && tok.eos() >= 0) ids.push_back(tok.eos());
    }
    if (ids.empty()) refuse("Input content cannot be empty");
    r.inputs.push_back(std::move(ids));
  }
  return r;
}

ojson rerank_reply(const RerankBody& req, const std::vector<float>& scores, const std::vector<int64_t>& n_tokens,
                  const std::string& model_name) {
  const char* label = req.tei ? "score" : "relevance_score";
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(req.top_n)));
  ojson results = ojson::array();
  for (const size_t i : order) {
    ojson e = {{"index", i}, {label, scores[i]}};
    if (req.return_text) e["text"] = req.documents[i];
    results.push_back(std::move(e));
  }
  if (req.tei) return results;
  const int64_t total = std::accumulate(n_tokens.begin(), n_tokens.end(), int64_t{0});
  return {{"model", req.model.value_or(model_name)},
          {"object", "list"},
          {"usage", {{"prompt_tokens", total}, {"total_tokens", total}}},
          {"results", std::move(results)}};
}

OllamaEmbedBody parse_ollama_embed(const json& body, bool legacy, const Tokenizer& tok, int64_t n_ctx, int64_t n_embd) {
  OllamaEmbedBody r;
  r.legacy = legacy;
  r.model = body.value("model", "");
  const char* field = legacy ? "prompt" : "input";
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) refuse(std::string("'") + field + "' is required", field);
  bool truncate = true;
  if (const auto t = body.find("truncate"); t != body.end() && !t->is_null()) {
    if (!t->is_boolean()) refuse("'truncate' must be a boolean, got " + quote_value(*t), "truncate");
    truncate = t->get<bool>();
  }
  if (!legacy) check_dimensions(body, n_embd);
  std::vector<std::string> texts;
  if (it->is_string()) {
    texts.push_back(it->get<std::string>());
  } else if (!legacy && it->is_array() &&
             std::all_of(it->begin(), it->end(), [](const json& e) { return e.is_string(); })) {
    for (const json& e : *it) texts.push_back(e.get<std::string>());
  } else {
    refuse(std::string("'") + field + "' must be a string" + (legacy ? "" : " or an array of strings") + ", got " +
               quote_value(*it),
           field);
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<token_id> ids = tok.tokenize(texts[i], true, true);
    if (ids.empty()) refuse(std::string("'") + field + "' " + std::to_string(i) + " has no tokens", field);
    if (static_cast<int64_t>(ids.size()) > n_ctx) {
      if (!truncate)
        refuse("input " + std::to_string(i) + " is " + std::to_string(ids.size()) +
                   " tokens, longer than the context length " + std::to_string(n_ctx) + " (and truncate is false)",
               field);
      ids.resize(static_cast<size_t>(n_ctx));
    }
    r.inputs.push_back(std::move(ids));
  }
  return r;
}

nlohmann::ordered_json ollama_embed_reply(const OllamaEmbedBody& req, const std::vector<Embedding>& out, int64_t total_ns) {
  if (req.legacy) return ojson{{"embedding", out.at(0).rows.at(0)}};
  ojson embeddings = ojson::array();
  int64_t n_tokens = 0;
  for (const Embedding& e : out) {
    embeddings.push_back(e.rows.at(0));
    n_tokens += e.n_tokens;
  }
  return ojson{{"model", req.model},
          {"embeddings", std::move(embeddings)},
          {"total_duration", total_ns},
          {"load_duration", 0},
          {"prompt_eval_count", n_tokens}};
}

}  // namespace synapse::server
