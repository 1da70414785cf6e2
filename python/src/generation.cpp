// Generation bindings: the library's generation loop (synapse/generation.hpp)
// and scheduler (synapse/scheduler.hpp) driven from Python. Nothing here
// samples or decides when to stop: a Stream runs synapse::generate() on a
// worker thread and hands its steps to Python; a BatchRunner submits requests
// to a synapse::Scheduler and collects their results.
//
// Python's thread waits for the worker with the GIL released, in slices of
// kPollSeconds, and between slices runs PyErr_CheckSignals(): a Ctrl-C (or
// any signal handler that raises) sets the cancel flag, the worker ends the
// reply after its current step, and the exception propagates with the
// Context and Sequence usable again.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "bindings.hpp"
#include "synapse/generation.hpp"
#include "synapse/sampling.hpp"
#include "synapse/scheduler.hpp"

namespace py = pybind11;

namespace synapse::python {

namespace {

constexpr auto kPollSeconds = std::chrono::milliseconds(5);

// Waits on `cv` (the caller has released the GIL and holds `lock`) until
// pred() is true, running Python's signal handlers (PyErr_CheckSignals, with
// the GIL) every kPollSeconds. Returns false when a handler raised: its
// exception is then pending, to be thrown once the GIL is back.
template <class Pred>
bool wait_or_signal(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Pred pred) {
  while (!pred()) {
    cv.wait_for(lock, kPollSeconds);
    if (pred()) break;
    lock.unlock();
    bool raised;
    {
      py::gil_scoped_acquire gil;
      raised = PyErr_CheckSignals() != 0;
    }
    lock.lock();
    if (raised) return false;
  }
  return true;
}

py::tuple step_tuple(const GeneratedToken& t) {
  py::list top;
  for (const TokenLogprob& p : t.top_logprobs) top.append(py::make_tuple(p.id, p.logprob));
  return py::make_tuple(t.id, t.eog, py::bytes(t.text), t.logprob, top,
                        t.finish == FinishReason::none ? py::object(py::none())
                                                       : py::object(py::str(finish_reason_name(t.finish))));
}

// One reply of synapse::generate() on a worker thread. Steps queue up as the
// worker produces them; Python takes them with poll() (streaming) or waits
// for the whole reply with result(). `history` is what the sequence already
// holds: it goes into the sampler's penalty window before `prompt`, as the
// Scheduler accepts a whole prompt however much of it was cached, so a reply
// does not depend on what an earlier call left in the KV cache.
class Stream {
 public:
  Stream(py::object ctx_owner, BoundContext& ctx, Sequence& seq, std::vector<token_id> prompt, GenerationParams params,
         bool keep_steps, std::vector<token_id> history)
      : owner_(std::move(ctx_owner)), keep_steps_(keep_steps), guard_(ctx.busy, "the Context") {
    ctx.last = {};  // decode() overwrites the buffer the last eval's logits view showed
    Context& c = ctx.ctx;
    worker_ = std::thread([this, &c, &seq, prompt = std::move(prompt), params = std::move(params),
                           history = std::move(history)] {
      GenerationResult r;
      std::string error;
      int errc = -1;
      try {
        Generation gen(c.tokenizer(), params, static_cast<int32_t>(seq.n_ctx()));
        gen.accept_prompt(history);
        r = generate(c, seq, prompt, gen, [this](const GeneratedToken& t) {
          if (keep_steps_) {
            std::lock_guard<std::mutex> lock(mu_);
            steps_.push_back(t);
            cv_.notify_all();
          }
          return true;
        }, &cancel_);
      } catch (const Error& e) {
        error = e.what();
        errc = static_cast<int>(e.code());
      } catch (const std::exception& e) {
        error = e.what();
      }
      std::lock_guard<std::mutex> lock(mu_);
      result_ = std::move(r);
      error_ = std::move(error);
      errc_ = errc;
      done_ = true;
      cv_.notify_all();
    });
  }
  ~Stream() {
    py::gil_scoped_release nogil;
    cancel_and_join();
  }

  // The steps produced since the last call (at least one unless the reply is
  // over; an empty list means it is). Rethrows the library's error, or a
  // signal handler's exception after cancelling the reply.
  py::list poll() {
    std::deque<GeneratedToken> got;
    bool done = false, interrupted = false;
    {
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lock(mu_);
      if (wait_or_signal(lock, cv_, [this] { return !steps_.empty() || done_; })) {
        got.swap(steps_);
        done = done_;
      } else {
        interrupted = true;
        cancel_.store(true);  // the worker ends the reply after its step; stop() joins it
      }
    }
    if (interrupted) throw py::error_already_set();
    if (got.empty() && done) rethrow_error();
    py::list out;
    for (const GeneratedToken& t : got) out.append(step_tuple(t));
    return out;
  }

  // Waits for the end of the reply (checking signals as poll() does) and
  // returns the finished GenerationResult.
  const GenerationResult& result() {
    bool interrupted = false;
    {
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lock(mu_);
      interrupted = !wait_or_signal(lock, cv_, [this] { return done_; });
      lock.unlock();
      if (interrupted)
        cancel_.store(true);  // the worker ends the reply after its step; stop() joins it
      else
        cancel_and_join();  // the reply is over: only joins
    }
    if (interrupted) throw py::error_already_set();
    rethrow_error();
    return result_;
  }

  // Asks the worker to end the reply after its current step; returns at once.
  void cancel() { cancel_.store(true); }

  // Cancels the reply (it ends after the current step) and joins the worker.
  void stop() {
    py::gil_scoped_release nogil;
    cancel_and_join();
  }

 private:
  // Without the GIL (the worker never takes it, so this cannot deadlock).
  void cancel_and_join() {
    cancel_.store(true);
    if (worker_.joinable()) worker_.join();
    guard_.release();
  }
  void rethrow_error() {
    if (errc_ >= 0) throw Error(static_cast<Errc>(errc_), error_);
    if (!error_.empty()) throw std::runtime_error(error_);
  }

  py::object owner_;  // keeps the Context (and so the model) alive while the worker runs
  bool keep_steps_;
  BusyGuard guard_;   // the Context is the worker's until it is joined
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GeneratedToken> steps_;
  GenerationResult result_;
  std::string error_;
  int errc_ = -1;
  bool done_ = false;
  std::thread worker_;
};

// A synapse::Scheduler with n_parallel slots that runs batches of prompts:
// each prompt one request with a slot of its own, so all of them share every
// step's batch. Kept by the Llama object between calls (making the slots'
// KV caches and the Context's threads is the costly part).
class BatchRunner {
 public:
  BatchRunner(const Model& model, const SchedulerParams& sp) {
    py::gil_scoped_release nogil;
    sched_ = std::make_unique<Scheduler>(model, sp);
  }
  ~BatchRunner() {
    py::gil_scoped_release nogil;
    sched_.reset();  // joins the worker
  }

  int32_t n_parallel() const { return sched_->params().n_parallel; }

  // The results in prompt order. Signals are checked as in Stream; on one,
  // every request is cancelled (the scheduler frees their slots within a
  // step) and the handler's exception propagates.
  std::vector<GenerationResult> run(const std::vector<std::vector<token_id>>& prompts,
                                    const std::vector<GenerationParams>& params) {
    if (prompts.size() != params.size())
      throw Error(Errc::invalid_argument, "run_batch: " + std::to_string(prompts.size()) + " prompts but " +
                                              std::to_string(params.size()) + " parameter sets");
    if (prompts.size() > static_cast<size_t>(n_parallel()))
      throw Error(Errc::invalid_argument, "run_batch: " + std::to_string(prompts.size()) + " prompts for " +
                                              std::to_string(n_parallel()) + " slots");
    BusyGuard guard(busy_, "the batch runner");
    results_.assign(prompts.size(), GenerationResult{});
    n_done_ = 0;
    std::vector<RequestId> ids;
    bool interrupted = false;
    try {
      for (size_t i = 0; i < prompts.size(); ++i) {
        Request req;
        req.prompt = prompts[i];
        req.params = params[i];
        req.cache_prompt = false;  // an empty slot: the result cannot depend on earlier batches
        req.on_done = [this, i](const GenerationResult& r) {
          std::lock_guard<std::mutex> lock(mu_);
          results_[i] = r;
          ++n_done_;
          cv_.notify_all();
        };
        const std::optional<RequestId> id = sched_->try_submit(std::move(req));
        if (!id) throw Error(Errc::invalid_argument, "run_batch: the scheduler refused prompt " + std::to_string(i));
        ids.push_back(*id);
      }
      py::gil_scoped_release nogil;
      std::unique_lock<std::mutex> lock(mu_);
      interrupted = !wait_or_signal(lock, cv_, [&] { return n_done_ == ids.size(); });
    } catch (...) {
      cancel_and_wait(ids);  // a refused prompt: the ones already queued must not outlive this call
      throw;
    }
    if (interrupted) {
      cancel_and_wait(ids);
      throw py::error_already_set();
    }
    for (size_t i = 0; i < results_.size(); ++i)
      if (results_[i].finish_reason == FinishReason::error)
        throw Error(Errc::invalid_argument, "prompt " + std::to_string(i) + ": " + results_[i].error);
    return std::move(results_);
  }

 private:
  void cancel_and_wait(const std::vector<RequestId>& ids) {
    py::gil_scoped_release nogil;
    for (RequestId id : ids) sched_->cancel(id);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return n_done_ == ids.size(); });
  }

  std::unique_ptr<Scheduler> sched_;
  std::atomic<bool> busy_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<GenerationResult> results_;
  size_t n_done_ = 0;
};

}  // namespace

void bind_generation(py::module_& m) {
  py::class_<LogitBias>(m, "LogitBias")
      .def(py::init([](token_id t, float b) { return LogitBias{t, b}; }), py::arg("token"), py::arg("bias"))
      .def_readwrite("token", &LogitBias::token)
      .def_readwrite("bias", &LogitBias::bias);

  py::class_<SamplerParams>(m, "SamplerParams", "llama.cpp's sampler chain settings (synapse/sampling.hpp).")
      .def(py::init<>())
      .def_readwrite("seed", &SamplerParams::seed)
      .def_readwrite("penalty_last_n", &SamplerParams::penalty_last_n)
      .def_readwrite("penalty_repeat", &SamplerParams::penalty_repeat)
      .def_readwrite("penalty_freq", &SamplerParams::penalty_freq)
      .def_readwrite("penalty_present", &SamplerParams::penalty_present)
      .def_readwrite("top_k", &SamplerParams::top_k)
      .def_readwrite("typical_p", &SamplerParams::typical_p)
      .def_readwrite("top_p", &SamplerParams::top_p)
      .def_readwrite("min_p", &SamplerParams::min_p)
      .def_readwrite("temp", &SamplerParams::temp)
      .def_readwrite("logit_bias", &SamplerParams::logit_bias)
      .def_readwrite("grammar", &SamplerParams::grammar, "GBNF text the reply must match (rule root); '': none");

  py::class_<Sampler>(m, "Sampler",
                      "llama.cpp's sampler chain over one row of logits (synapse::Sampler): penalties over the\n"
                      "tokens accept()ed, top-k, typical, top-p, min-p, temperature, then the seeded draw.\n"
                      "The grammar field is not applied here (the generation loop applies it).")
      .def(py::init<const SamplerParams&, int32_t>(), py::arg("params"), py::arg("n_ctx") = 0,
           "n_ctx resolves penalty_last_n = -1; InvalidArgumentError for a NaN parameter")
      .def(
          "sample",
          [](Sampler& s, const py::array_t<float, py::array::c_style | py::array::forcecast>& logits) {
            if (logits.ndim() != 1)
              throw Error(Errc::invalid_argument,
                          "sample: logits must be one row [n_vocab], got " + std::to_string(logits.ndim()) + " dimensions");
            return s.sample(std::span<const float>(logits.data(), static_cast<size_t>(logits.size())));
          },
          py::arg("logits"), "One token id drawn from LOGITS (float32 [n_vocab]); not accepted.")
      .def("accept", &Sampler::accept, py::arg("id"), "Records ID in the penalty window.")
      .def_property_readonly("seed", &Sampler::seed, "the seed in use (drawn when the params' seed is 0xFFFFFFFF)");

  py::class_<GenerationParams>(m, "GenerationParams", "One reply's settings (synapse/generation.hpp).")
      .def(py::init<>())
      .def_readwrite("sampling", &GenerationParams::sampling)
      .def_readwrite("max_tokens", &GenerationParams::max_tokens)
      .def_readwrite("stop", &GenerationParams::stop)
      .def_readwrite("ignore_eos", &GenerationParams::ignore_eos)
      .def_readwrite("logprobs", &GenerationParams::logprobs)
      .def_readwrite("n_probs", &GenerationParams::n_probs)
      .def_readwrite("n_ubatch", &GenerationParams::n_ubatch);

  py::class_<SchedulerParams>(m, "SchedulerParams", "The batch runner's settings (synapse/scheduler.hpp).")
      .def(py::init<>())
      .def_readwrite("n_parallel", &SchedulerParams::n_parallel)
      .def_readwrite("n_ctx", &SchedulerParams::n_ctx)
      .def_readwrite("n_batch", &SchedulerParams::n_batch)
      .def_readwrite("n_ubatch", &SchedulerParams::n_ubatch)
      .def_readwrite("n_threads", &SchedulerParams::n_threads)
      .def_property(
          "type_k", [](const SchedulerParams& p) { return static_cast<int>(p.type_k); },
          [](SchedulerParams& p, long long id) { p.type_k = ggml_type_from_id("type_k", id); })
      .def_property(
          "type_v", [](const SchedulerParams& p) { return static_cast<int>(p.type_v); },
          [](SchedulerParams& p, long long id) { p.type_v = ggml_type_from_id("type_v", id); });

  py::class_<GenerationResult>(m, "GenerationResult", "A finished reply (synapse/generation.hpp).")
      .def_property_readonly("text", [](const GenerationResult& r) { return py::bytes(r.text); })
      .def_readonly("tokens", &GenerationResult::tokens)
      .def_readonly("logprobs", &GenerationResult::logprobs)
      .def_property_readonly("top_logprobs",
                             [](const GenerationResult& r) {
                               py::list out;
                               for (const auto& row : r.top_logprobs) {
                                 py::list l;
                                 for (const TokenLogprob& p : row) l.append(py::make_tuple(p.id, p.logprob));
                                 out.append(l);
                               }
                               return out;
                             })
      .def_property_readonly("finish_reason",
                             [](const GenerationResult& r) { return finish_reason_name(r.finish_reason); })
      .def_readonly("stopping_word", &GenerationResult::stopping_word)
      .def_readonly("n_prompt", &GenerationResult::n_prompt)
      .def_readonly("n_cached", &GenerationResult::n_cached)
      .def_readonly("seed", &GenerationResult::seed);

  py::class_<Stream>(m, "Stream",
                     "One reply of the library's generation loop running on a worker thread\n"
                     "(synapse::generate over a Context and Sequence).")
      .def(py::init([](py::object ctx, Sequence& seq, std::vector<token_id> prompt, GenerationParams params,
                       bool keep_steps, std::vector<token_id> history) {
             BoundContext& c = ctx.cast<BoundContext&>();
             return std::make_unique<Stream>(ctx, c, seq, std::move(prompt), std::move(params), keep_steps,
                                             std::move(history));
           }),
           py::arg("ctx"), py::arg("seq"), py::arg("prompt"), py::arg("params"), py::arg("keep_steps") = true,
           py::arg("history") = std::vector<token_id>{}, py::keep_alive<1, 3>(),
           "HISTORY: the tokens SEQ already holds (they join the repeat-penalty window first).")
      .def("poll", &Stream::poll,
           "The steps produced since the last call as (id, eog, text bytes, logprob, [(id, logprob)],\n"
           "finish_reason or None); [] once the reply is over.")
      .def("result", &Stream::result, py::return_value_policy::copy, "Waits for the end and returns the result.")
      .def("cancel", &Stream::cancel, "Asks the worker to end the reply after its step; returns at once.")
      .def("stop", &Stream::stop, "Cancels the reply and waits for the worker (the Context and Sequence\n"
                                  "are free again after it).");

  py::class_<BatchRunner>(m, "BatchRunner",
                          "A synapse::Scheduler with n_parallel slots (its own Context and KV caches) that\n"
                          "runs prompts as one batch of sequences.")
      .def(py::init<const Model&, const SchedulerParams&>(), py::arg("model"), py::arg("params"),
           py::keep_alive<1, 2>())
      .def_property_readonly("n_parallel", &BatchRunner::n_parallel)
      .def("run", &BatchRunner::run, py::arg("prompts"), py::arg("params"),
           "Runs each prompt as a request with a slot of its own (all in the same steps); results in\n"
           "order. At most n_parallel prompts.");
}

}  // namespace synapse::python
