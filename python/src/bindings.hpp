// Shared declarations of the _synapse extension module's translation units.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <span>
#include <string>

#include "synapse/synapse.hpp"

namespace synapse::python {

// The Context the Llama class owns, plus the logits its last decode returned:
// the view Context.logits hands out without a copy.
struct BoundContext {
  BoundContext(const Model& m, int n_threads) : ctx(m, n_threads), n_vocab(m.n_vocab()) {}
  Context ctx;
  int64_t n_vocab;
  std::span<const float> last;  // [rows * n_vocab]; valid until the next decode, empty when stale
  // Held by whoever runs the Context (a decode, or a Stream's worker for its
  // whole reply): synapse::Context allows one caller at a time.
  std::atomic<bool> busy{false};
};

// A GGML type id as llama-cpp-python passes type_k / type_v (GGML_TYPE_Q8_0
// = 8, ...). Throws Error(invalid_argument) naming `field` and the id when
// it is no ggml type; whether it is a cache type is
// Context::set_kv_types' check.
inline GgmlType ggml_type_from_id(const char* field, long long id) {
  if (id < 0 || id >= static_cast<long long>(kGgmlTypeCount) || !type_traits(static_cast<uint32_t>(id)).known)
    throw Error(Errc::invalid_argument, std::string(field) + " = " + std::to_string(id) + ": not a GGML type id");
  return static_cast<GgmlType>(id);
}

// Takes `flag` for this scope; Error(invalid_argument) naming `what` when it
// is already taken (another Python thread is using the object). A Python
// program that shares one Llama between threads gets an exception, not a
// data race.
class BusyGuard {
 public:
  BusyGuard(std::atomic<bool>& flag, const char* what);
  ~BusyGuard() { release(); }
  void release() {
    if (flag_) flag_->store(false);
    flag_ = nullptr;
  }
  BusyGuard(BusyGuard&& o) noexcept : flag_(o.flag_) { o.flag_ = nullptr; }
  BusyGuard(const BusyGuard&) = delete;
  BusyGuard& operator=(const BusyGuard&) = delete;

 private:
  std::atomic<bool>* flag_;
};

// Creates synapse.Error and its subclasses (one per synapse::Errc) in module
// `m` and translates every synapse::Error thrown under a binding into the one
// for its code, with the library's message.
void register_errors(pybind11::module_& m);

// Throws ModelNotFoundError (a synapse.Error, a FileNotFoundError and a ValueError) with
// `message`.
[[noreturn]] void raise_not_found(const std::string& message);

// Generation: the per-request step object, the single-sequence driver and the
// batched scheduler (generation.cpp).
void bind_generation(pybind11::module_& m);

// Grammars: GBNF checked by the library's parser, JSON Schema converted to
// GBNF (grammar.cpp).
void bind_grammar(pybind11::module_& m);

// Chat: the model's Jinja template through the library's engine, and the
// tool-call grammar and reply parser of its family (chat.cpp).
void bind_chat(pybind11::module_& m);

// Replies: the library's OpenAI reply formatter in llama-cpp-python's dialect
// (reply.cpp).
void bind_reply(pybind11::module_& m);

}  // namespace synapse::python
