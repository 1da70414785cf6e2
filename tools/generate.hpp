// The decode loop shared by `synapse run` and `synapse chat`: sample, stop,
// stream the text, feed the token back.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

#include "model/forward.hpp"
#include "synapse/sampling.hpp"
#include "synapse/stop.hpp"

namespace synapse::tools {

struct Generated {
  std::string text;   // what was printed
  int n_tokens = 0;   // tokens sampled and accepted (end-of-generation excluded)
  double seconds = 0;
  bool interrupted = false;
  bool context_full = false;
  token_id last_token = -1;  // the last token sampled (the end-of-generation token when that stopped it)
};

// Generates from `logits` (the last row of the previous forward) until the
// stopper is done, the context is full or *interrupt becomes true; each token
// accepted is fed to the model. Text goes to `out` as it is produced (held
// back while it may be the start of a stop string).
inline Generated generate(const model::Model& m, runtime::KvCache& kv, runtime::ThreadPool& pool,
                          runtime::Sampler& sampler, runtime::Stopper& stopper, std::vector<float>& logits,
                          FILE* out, const std::atomic<bool>* interrupt = nullptr) {
  Generated g;
  const auto t0 = std::chrono::steady_clock::now();
  auto emit = [&](const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), out);
    std::fflush(out);
    g.text += s;
  };
  while (!stopper.done()) {
    if (interrupt && interrupt->load()) {
      g.interrupted = true;
      break;
    }
    const token_id next = sampler.sample(logits);
    sampler.accept(next);
    g.last_token = next;
    emit(stopper.on_token(next));
    if (stopper.done()) break;
    if (kv.n_past() >= kv.n_ctx()) {
      g.context_full = true;
      break;
    }
    const token_id one[1] = {next};
    model::forward(m, kv, one, false, logits, pool);
  }
  emit(stopper.finish());
  g.n_tokens = stopper.n_generated();
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return g;
}

}  // namespace synapse::tools
