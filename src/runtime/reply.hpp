// What generate() and the Scheduler both do with the steps of a reply:
// collect them into a GenerationResult and, for close_turn, work out the rows
// that close the turn in the KV cache.
#pragma once

#include <chrono>
#include <vector>

#include "synapse/generation.hpp"

namespace synapse::runtime {

using Clock = std::chrono::steady_clock;

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Appends one step to `r`: its text, and (unless it is an EOG or closing
// step) its token and logprobs when the reply asked for them.
void record_step(GenerationResult& r, const GeneratedToken& t, const GenerationParams& p);

// Copies the finished Generation's reasons and seed into `r`.
void record_end(GenerationResult& r, const Generation& gen);

// The rows to write after a finished reply when params.close_turn is set:
// `pending` (a sampled token not yet in the cache, -1 if none) and then,
// unless that token is the end-of-generation token that ended the reply,
// end_of_turn_token(tok). Empty when close_turn is off or `room` (positions
// left in the sequence) cannot take them all.
std::vector<token_id> closing_rows(const Generation& gen, const Tokenizer& tok, token_id pending, int64_t room);

}  // namespace synapse::runtime
