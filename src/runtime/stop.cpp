#include "synapse/stop.hpp"

#include <algorithm>
#include <utility>

#include "runtime/utf8.hpp"
#include "synapse/error.hpp"

namespace synapse {

StopFilter::StopFilter(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopFilter::feed(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  // A complete stop string: cut at the earliest occurrence of any.
  size_t best = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t pos = held_.find(s);
    if (pos < best) {
      best = pos;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  hold = std::max(hold, runtime::incomplete_utf8_tail(held_));
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopFilter::flush() {
  if (stopped_) return {};
  return std::exchange(held_, {});
}

const char* stop_reason_name(StopReason r) noexcept {
  switch (r) {
    case StopReason::none: return "none";
    case StopReason::eog: return "eog";
    case StopReason::stop_string: return "stop string";
    case StopReason::n_predict: return "n_predict";
  }
  return "?";
}

Stopper::Stopper(const Tokenizer& tok, StopParams p) : tok_(tok), p_(std::move(p)), filter_(p_.stops) {
  if (p_.n_predict == 0) reason_ = StopReason::n_predict;
}

std::string Stopper::on_token(token_id id) {
  if (done()) throw Error(Errc::invalid_argument, "Stopper::on_token called after the reply stopped");
  if (id < 0 || id >= tok_.n_vocab())
    throw Error(Errc::out_of_range,
                "token id " + std::to_string(id) + " outside [0, " + std::to_string(tok_.n_vocab()) + ")");
  if (!p_.ignore_eos && tok_.is_eog(id)) {
    reason_ = StopReason::eog;
    return {};
  }
  ++n_gen_;
  const bool special = std::find(p_.preserved_tokens.begin(), p_.preserved_tokens.end(), id) != p_.preserved_tokens.end();
  std::string out = filter_.feed(tok_.token_to_piece(id, special));
  if (filter_.stopped()) {
    reason_ = StopReason::stop_string;
  } else if (p_.n_predict > 0 && n_gen_ >= p_.n_predict) {
    reason_ = StopReason::n_predict;
  }
  return out;
}

std::string Stopper::finish() {
  if (finished_) return {};
  finished_ = true;
  return filter_.flush();
}

}  // namespace synapse
