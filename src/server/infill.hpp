// llama-server's POST /infill (llama.cpp v0.5.0, tools/server): code
// completion between a prefix and a suffix, with the files of the project as
// extra context. The body is /completion's (n_predict, stream, sampling, ...)
// plus
//   input_prefix  string, or an array of strings and token ids (required)
//   input_suffix  likewise (required)
//   input_extra   [{"filename": string (optional, "tmp"), "text": string}] (optional)
//   prompt        string (optional): text the middle starts with
// The reply is /completion's, streamed or not.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "synapse/tokenizer.hpp"

namespace synapse::server {

// The server settings llama-server's infill prompt depends on.
struct InfillParams {
  int n_batch = 2048;     // -b: the prefix takes at most 3/4 of it, the suffix and prompt the rest
  int n_predict = -1;     // -n (the server's, not the request's): room kept for the reply
  int64_t n_ctx = 0;      // a slot's context: what the extra files may fill
  bool spm_infill = false;  // --spm-infill: suffix before prefix
};

// The prompt llama-server's format_prompt_infill builds for `body`:
//   [FIM_REP]"myproject\n" ([FIM_SEP]filename"\n" text)... [FIM_SEP]"filename\n"
//   [BOS] [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]
// (the extra context before BOS, as llama-server puts it)
// (with --spm-infill the suffix part comes first; BOS per add_bos_token; without
// FIM_REP/FIM_SEP tokens the repository line goes and each file is preceded
// by "\n\n--- snippet ---\n\n"). The prefix keeps its last 3*(n_batch/4)
// tokens, the suffix its first n_batch/4 - 2 - |prompt|, the extra context
// its last n_ctx - n_batch - 2*n_predict. input_prefix, input_suffix and the
// files are tokenized without special-token parsing, the prompt with it.
// Throws HttpError(501) "Infill is not supported by this model: ..." naming
// the missing FIM_PRE/FIM_SUF/FIM_MID tokens (llama-server's text), and
// HttpError(400) naming the field for a missing input_prefix/input_suffix,
// a field of the wrong type or a token id outside the vocabulary.
// Thread-safe (the tokenizer is only read).
std::vector<token_id> infill_prompt(const nlohmann::json& body, const Tokenizer& tok, const InfillParams& p);

}  // namespace synapse::server
