// Embedding and rerank requests and replies (keys in llama-server's order), as llama-server v0.5.0 reads and
// writes them (tools/server/server-context.cpp handle_embeddings_impl and
// post_rerank; server-common.cpp tokenize_input_prompts,
// format_embeddings_response_oaicompat, format_response_rerank,
// format_prompt_rerank), and Ollama's /api/embed and /api/embeddings
// (docs/api.md "Generate Embeddings"). Pure functions of their arguments;
// thread-safe (the tokenizer is only read).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "synapse/synapse.hpp"

namespace synapse::server {

// POST /v1/embeddings (oai), /embedding and /embeddings (not oai).
struct EmbeddingBody {
  std::vector<std::vector<token_id>> inputs;
  bool oai = true;             // the OpenAI reply shape; "content" in place of "input" turns it off
  bool base64 = false;         // encoding_format "base64"
  int embd_normalize = 2;      // the body's embd_normalize, else the server's --embd-normalize
  std::optional<std::string> model;  // the body's "model", echoed in the OpenAI reply
};

// "input" (or "content"): a string, an array of token ids, or an array of
// those and of mixed arrays of strings and token ids (tokenize_input_prompts);
// strings tokenized with BOS/EOS per the vocabulary and special tokens parsed.
// `dimensions`, which llama-server ignores, is refused unless it is n_embd
// (a vector of another length would be silently wrong for the client).
// Throws HttpError(400) in llama-server's words for a missing input, an
// empty input ("Input content cannot be empty"), an encoding_format other
// than float or base64, and naming the field for a bad type, token id or
// dimensions.
EmbeddingBody parse_embedding_body(const nlohmann::json& body, bool oai_route, const Tokenizer& tok, int64_t n_embd,
                                   int default_normalize);

// The OpenAI reply: {"data":[{"embedding","index","object":"embedding"}...],
// "model","object":"list","usage":{"prompt_tokens","total_tokens"}}; with
// base64 each embedding is the base64 of its little-endian float32 bytes and
// carries "encoding_format":"base64". `out`: one pooled vector per input.
nlohmann::ordered_json embeddings_oai_reply(const EmbeddingBody& req, const std::vector<Embedding>& out,
                                    const std::string& model_name);

// llama-server's own shape: [{"embedding":[[...], ...],"index":i}, ...]
// (one vector per token with pooling none, else one).
nlohmann::ordered_json embeddings_native_reply(const std::vector<Embedding>& out);

// Base64 (RFC 4648, padded) of `n` floats' bytes as they lie in memory
// (little-endian on every machine synapse runs on).
std::string base64_floats(const float* x, size_t n);

// POST /rerank, /reranking, /v1/rerank, /v1/reranking: Jina's shape
// ({"query","documents","top_n"}) or TEI's ({"query","texts","return_text"}).
struct RerankBody {
  std::vector<std::vector<token_id>> inputs;  // one per document: query and document together
  std::vector<std::string> documents;
  int64_t top_n = 0;        // results kept, best first (default: all)
  bool tei = false;         // "texts" given: TEI's reply shape
  bool return_text = false; // TEI: each result carries its text
  std::optional<std::string> model;
};

// Each document's tokens as format_prompt_rerank makes them: the model's
// "rerank" chat template (tokenizer.chat_template.rerank, Qwen3-Reranker's)
// with {query} and {document} replaced, tokenized without BOS and with
// special tokens parsed; without one, BOS (per the vocabulary), the query,
// EOS, the document, EOS (EOS per add_eos_token). Throws HttpError(400) in
// llama-server's words ("\"query\" must be provided", "\"query\" must be a
// string", "\"documents\" must be a non-empty string array") and for a
// negative top_n.
RerankBody parse_rerank_body(const nlohmann::json& body, const Tokenizer& tok,
                             const std::optional<std::string>& rerank_template);

// format_response_rerank: results {"index", "relevance_score"} (TEI: "score",
// and "text" with return_text) sorted by score, highest first (ties keep
// document order), the first top_n; Jina's shape wraps them with model,
// object and usage, TEI's is the bare array. `scores[i]`: document i's.
nlohmann::ordered_json rerank_reply(const RerankBody& req, const std::vector<float>& scores,
                            const std::vector<int64_t>& n_tokens, const std::string& model_name);

// Ollama's POST /api/embed: {"model","input": string or [strings],
// "truncate" (default true: an input longer than n_ctx is cut to its first
// n_ctx tokens; false: 400), "dimensions"}. Throws HttpError(400) naming the
// field. The inputs are tokenized as llama-server's embeddings.
struct OllamaEmbedBody {
  std::string model;
  std::vector<std::vector<token_id>> inputs;
  bool legacy = false;  // /api/embeddings: {"model","prompt"} in, {"embedding":[...]} out
};
OllamaEmbedBody parse_ollama_embed(const nlohmann::json& body, bool legacy, const Tokenizer& tok, int64_t n_ctx,
                                   int64_t n_embd);

// /api/embed's reply {"model","embeddings":[[...]],"total_duration",
// "load_duration","prompt_eval_count"} (durations in ns; keys in Ollama's
// order); /api/embeddings' {"embedding":[...]}.
nlohmann::ordered_json ollama_embed_reply(const OllamaEmbedBody& req, const std::vector<Embedding>& out, int64_t total_ns);

}  // namespace synapse::server
