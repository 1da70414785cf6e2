#include "server/infill.hpp"

#include <algorithm>
#include <string>

#include "server/request.hpp"

namespace synapse::server {

using nlohmann::json;

namespace {

// llama-server's tokenize_mixed(vocab, v, add_special = false, parse_special
// = false): a string, or an array whose strings are tokenized and whose
// integers are token ids.
std::vector<token_id> tokenize_mixed(const json& v, const Tokenizer& tok, const std::string& field) {
  if (v.is_string()) return tok.tokenize(v.get_ref<const std::string&>(), false, false);
  if (!v.is_array())
    throw HttpError(400, "'" + field + "' must be a string or an array of strings and token ids, got " + quote_value(v),
                    field);
  std::vector<token_id> ids;
  for (size_t k = 0; k < v.size(); ++k) {
    const std::string fk = field + "[" + std::to_string(k) + "]";
    if (v[k].is_string()) {
      const std::vector<token_id> part = tok.tokenize(v[k].get_ref<const std::string&>(), false, false);
      ids.insert(ids.end(), part.begin(), part.end());
    } else if (v[k].is_number_integer()) {
      ids.push_back(get_token_ids(json::array({v[k]}), fk, tok.n_vocab())[0]);
    } else {
      throw HttpError(400, "'" + fk + "' must be a string or a token id, got " + quote_value(v[k]), fk);
    }
  }
  return ids;
}

void append(std::vector<token_id>& to, const std::vector<token_id>& from) { to.insert(to.end(), from.begin(), from.end()); }

}  // namespace

std::vector<token_id> infill_prompt(const json& body, const Tokenizer& tok, const InfillParams& p) {
  const FimTokens fim = tok.fim();
  std::string missing;
  if (fim.pre < 0) missing += "prefix token is missing. ";
  if (fim.suf < 0) missing += "suffix token is missing. ";
  if (fim.mid < 0) missing += "middle token is missing. ";
  if (!missing.empty()) throw HttpError(501, "Infill is not supported by this model: " + missing);

  if (body.contains("prompt") && !body.at("prompt").is_string())
    throw HttpError(400, "\"prompt\" must be a string", "prompt");
  for (const char* f : {"input_prefix", "input_suffix"})
    if (!body.contains(f)) throw HttpError(400, std::string("\"") + f + "\" is required", f);
  const json no_extra = json::array();
  const json& extra = body.contains("input_extra") ? body.at("input_extra") : no_extra;
  if (!extra.is_array())
    throw HttpError(400, "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}", "input_extra");
  for (size_t i = 0; i < extra.size(); ++i) {
    const json& chunk = extra[i];
    const std::string fi = "input_extra[" + std::to_string(i) + "]";
    if (!chunk.is_object() || !chunk.contains("text") || !chunk.at("text").is_string())
      throw HttpError(400, "extra_context chunk must contain a \"text\" field with a string value", fi + ".text");
    if (chunk.contains("filename") && !chunk.at("filename").is_string())
      throw HttpError(400, "extra_context chunk's \"filename\" field must be a string", fi + ".filename");
  }

  std::vector<token_id> prefix = tokenize_mixed(body.at("input_prefix"), tok, "input_prefix");
  std::vector<token_id> suffix = tokenize_mixed(body.at("input_suffix"), tok, "input_suffix");
  const std::vector<token_id> prompt =
      tok.tokenize(body.contains("prompt") ? body.at("prompt").get_ref<const std::string&>() : std::string(), false, true);

  // The repository-level layout (arXiv 2409.12186), as llama-server writes it:
  // a fixed project name and file name, each file's own name when given.
  std::vector<token_id> extra_tokens;
  if (fim.rep >= 0) {
    extra_tokens.push_back(fim.rep);
    append(extra_tokens, tok.tokenize("myproject\n", false, false));
  }
  for (const json& chunk : extra) {
    if (fim.sep >= 0) {
      const std::string filename = chunk.contains("filename") ? chunk.at("filename").get<std::string>() : "tmp";
      extra_tokens.push_back(fim.sep);
      append(extra_tokens, tok.tokenize(filename + "\n", false, false));
    } else {
      append(extra_tokens, tok.tokenize("\n\n--- snippet ---\n\n", false, false));
    }
    append(extra_tokens, tok.tokenize(chunk.at("text").get_ref<const std::string&>(), false, false));
  }
  if (fim.sep >= 0) {
    extra_tokens.push_back(fim.sep);
    append(extra_tokens, tok.tokenize("filename\n", false, false));
  }

  // What fits one batch: prefix : suffix = 3 : 1; the rest of the context
  // (less twice the server's -n) for the extra files, their end kept.
  const int64_t quarter = p.n_batch / 4;
  const int64_t n_prefix_take = std::min<int64_t>(static_cast<int64_t>(prefix.size()), 3 * quarter);
  const int64_t n_suffix_take = std::min<int64_t>(
      static_cast<int64_t>(suffix.size()), std::max<int64_t>(0, quarter - (2 + static_cast<int64_t>(prompt.size()))));
  const int64_t n_extra_take = std::min<int64_t>(
      std::max<int64_t>(0, p.n_ctx - p.n_batch - 2 * static_cast<int64_t>(p.n_predict)),
      static_cast<int64_t>(extra_tokens.size()));

  prefix.erase(prefix.begin(), prefix.end() - n_prefix_take);
  suffix.resize(static_cast<size_t>(n_suffix_take));
  prefix.insert(prefix.begin(), fim.pre);
  append(prefix, prompt);
  suffix.insert(suffix.begin(), fim.suf);

  // The extra context goes before BOS, as llama-server inserts it.
  std::vector<token_id> out(extra_tokens.end() - n_extra_take, extra_tokens.end());
  if (tok.add_bos() && tok.bos() >= 0) out.push_back(tok.bos());
  append(out, p.spm_infill ? suffix : prefix);
  append(out, p.spm_infill ? prefix : suffix);
  out.push_back(fim.mid);
  return out;
}

}  // namespace synapse::server
