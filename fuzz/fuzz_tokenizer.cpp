// libFuzzer target: arbitrary bytes -> Tokenizer::tokenize with every
// vocabulary in tests/data (tokenizer/vocab/*.gguf and models/stories260K.gguf),
// parse_special false and true, then detokenize.
//
// Contract under test (include/synapse/tokenizer.hpp): tokenize never throws
// on any byte string and returns ids in [0, n_vocab); detokenize of those ids
// never throws. Violations trap; ASan/UBSan findings and timeouts are reported
// by libFuzzer. Vocabularies are loaded once, in LLVMFuzzerInitialize.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "synapse/gguf.hpp"
#include "synapse/tokenizer.hpp"

using namespace synapse;

namespace {

std::vector<std::unique_ptr<Tokenizer>>& vocabularies() {
  static std::vector<std::unique_ptr<Tokenizer>> all = [] {
    std::vector<std::filesystem::path> paths;
    for (const auto& e : std::filesystem::directory_iterator(SYNAPSE_TEST_DATA "/tokenizer/vocab"))
      if (e.path().extension() == ".gguf") paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    // The model's vocabulary, unless the vocab folder holds the same file.
    const std::filesystem::path model = SYNAPSE_TEST_DATA "/models/stories260K.gguf";
    const auto same = [&](const std::filesystem::path& p) {
      return p.filename() == model.filename() &&
             std::filesystem::file_size(p) == std::filesystem::file_size(model);
    };
    if (std::none_of(paths.begin(), paths.end(), same)) paths.push_back(model);
    std::vector<std::unique_ptr<Tokenizer>> v;
    for (const auto& p : paths) {
      const gguf::File f = gguf::File::open(p.string());
      v.push_back(std::make_unique<Tokenizer>(Tokenizer::from_gguf(f)));
    }
    if (v.size() < 2) __builtin_trap();  // the data folder is missing
    return v;
  }();
  return all;
}

}  // namespace

// Loads the vocabularies before the first input, so their loading time does
// not count against -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)vocabularies();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tok : vocabularies()) {
    for (bool parse_special : {false, true}) {
      const std::vector<token_id> ids = tok->tokenize(text, /*add_special=*/parse_special, parse_special);
      for (token_id id : ids)
        if (id < 0 || id >= tok->n_vocab()) __builtin_trap();
      const std::string back = tok->detokenize(ids, /*remove_special=*/!parse_special, parse_special);
      (void)back;
    }
  }
  return 0;
}
