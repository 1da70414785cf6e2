// libFuzzer target: an HTTP request body and route -> parsed, validated
// parameters (server/request.hpp) -> tokenization -> the first scheduler
// step on stories260K (issue 27).
//
// Input: byte 0 picks the route (chat completions, completions, llama-server's
// /completion), the rest is the body. Contract under test: a body is either
// refused with HttpError(400) naming a reason, or yields parameters within
// the documented bounds (prompts of 1..n_ctx tokens inside the vocabulary,
// n x prompts <= max_choices, top_logprobs <= 20, temperature finite >= 0,
// top_p and min_p in [0, 1], n_predict <= n_ctx, stop entries capped) that
// the Scheduler accepts without throwing and runs for one step without
// error. Anything else traps; ASan/UBSan findings, hangs and deep recursion
// are libFuzzer's to report. The model and the Scheduler are made once.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/request.hpp"
#include "synapse/chat.hpp"
#include "synapse/scheduler.hpp"
#include "synapse/synapse.hpp"

using namespace synapse;

namespace {

struct World {
  Model model = Model::load(SYNAPSE_TEST_DATA "/models/stories260K.gguf");
  Scheduler sched{model, [] {
                    SchedulerParams p;
                    p.n_ctx = 128;
                    p.n_threads = 1;
                    p.n_ubatch = 32;  // several steps for a long prompt: the first is what runs
                    return p;
                  }()};
  server::RequestContext rc;
  World() {
    rc.tok = &model.tokenizer();
    rc.chat_template = synapse::chat_template_for_model(model.gguf());
    rc.n_ctx = sched.n_ctx();
    rc.n_predict = 4;
  }
};

World& world() {
  static World w;
  return w;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)world();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = world();
  static constexpr server::Route kRoutes[] = {server::Route::chat_completions, server::Route::completions,
                                              server::Route::completion};
  const server::Route route = kRoutes[data[0] % 3];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  server::CompletionRequest c;
  try {
    c = server::parse_completion_request(route, body, w.rc);
  } catch (const server::HttpError& e) {
    check(e.status() == 400 && e.what()[0] != '\0');
    return 0;
  }
  const server::RequestLimits& lim = w.rc.limits;
  check(!c.prompts.empty() && c.n >= 1 &&
        static_cast<int64_t>(c.prompts.size()) * c.n <= lim.max_choices);
  for (const auto& p : c.prompts) {
    check(!p.empty() && static_cast<int64_t>(p.size()) <= w.rc.n_ctx);
    for (const token_id t : p) check(t >= 0 && t < w.rc.tok->n_vocab());
  }
  const synapse::SamplerParams& s = c.sampling;
  check(std::isfinite(s.temp) && s.temp >= 0);
  check(s.top_p >= 0 && s.top_p <= 1 && s.min_p >= 0 && s.min_p <= 1);
  check(c.top_logprobs >= 0 && c.top_logprobs <= lim.max_top_logprobs);
  check(c.stop.n_predict <= w.rc.n_ctx && c.stop.n_predict <= w.rc.n_predict);
  check(c.stop.stops.size() <= static_cast<size_t>(lim.max_stop));
  for (const auto& b : s.logit_bias) check(b.token >= 0 && b.token < w.rc.tok->n_vocab());

  // The first prompt through the Scheduler for one step (one sampled token):
  // validation passed, so it must be accepted and must not fail.
  Request r;
  r.prompt = c.prompts[0];
  r.params.sampling = c.sampling;
  r.params.max_tokens = 1;
  r.params.stop = c.stop.stops;
  r.params.ignore_eos = c.stop.ignore_eos;
  r.params.logprobs = c.logprobs;
  r.params.n_probs = c.top_logprobs;
  r.params.close_turn = route == server::Route::chat_completions;
  r.cache_prompt = c.cache_prompt;
  bool failed = false;
  r.on_done = [&failed](const GenerationResult& g) { failed = g.finish_reason == FinishReason::error; };
  std::optional<RequestId> id;
  try {
    id = w.sched.try_submit(std::move(r));
  } catch (const Error&) {
    check(false);  // a parameter the request parser let through
  }
  check(id.has_value());
  w.sched.wait_idle();
  check(!failed);
  return 0;
}
