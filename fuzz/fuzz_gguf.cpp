// libFuzzer target: arbitrary bytes -> gguf::File::from_bytes ->
// model::read_hparams -> model::load_model (weight binding and tokenizer, no
// forward pass).
//
// Contract under test (include/synapse/gguf.hpp, src/model/model.hpp): any
// byte string either loads or throws synapse::Error. Any other exception
// escapes and libFuzzer reports it as a crash, as it does every ASan/UBSan
// finding, leak, timeout and allocation above -malloc_limit_mb.
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/hparams.hpp"
#include "model/model.hpp"
#include "synapse/error.hpp"
#include "synapse/gguf.hpp"

using namespace synapse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gguf::File file = gguf::File::from_bytes(std::span<const uint8_t>(data, size), "fuzz.gguf");
    // Exercise the typed getters the way consumers do.
    for (const gguf::KeyValue& kv : file.metadata()) {
      try {
        (void)file.get_i64(kv.key);
      } catch (const Error&) {
      }
      try {
        (void)file.get_int_array(kv.key);
      } catch (const Error&) {
      }
    }
    try {
      (void)model::read_hparams(file);
    } catch (const Error&) {
    }
    auto m = model::load_model(std::move(file));
    if (m->tokenizer->n_vocab() <= 0) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
