// synapse info MODEL: the file's metadata, each tensor's name, type, shape and
// byte size, and the total size and bits per weight.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "commands.hpp"
#include "base/strings.hpp"
#include "synapse/gguf.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {
namespace {

std::string show(const gguf::Value& v, size_t max_items) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
      return std::to_string(v.u);
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
      return std::to_string(v.i);
    case ValueType::FLOAT32: case ValueType::FLOAT64: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", v.f);
      return buf;
    }
    case ValueType::BOOL: return v.b ? "true" : "false";
    case ValueType::STRING: {
      std::string s = v.str.size() > 80 ? v.str.substr(0, 77) + "..." : v.str;
      std::string out = "\"";
      for (unsigned char c : s) {
        if (c == '\n') out += "\\n";
        else if (c < 0x20) out += "?";
        else out += static_cast<char>(c);
      }
      return out + "\"";
    }
    case ValueType::ARRAY: {
      std::string s = "[" + std::string(gguf::value_type_name(v.elem_type)) + " x " + std::to_string(v.items.size()) + "]";
      if (max_items == 0) return s;
      s += " {";
      s += join(std::span(v.items).first(std::min(v.items.size(), max_items)), ", ",
                [](const gguf::Value& item) { return show(item, 0); });
      return s + (v.items.size() > max_items ? ", ...}" : "}");
    }
  }
  return "?";
}

// The KV cache's bytes a token for each -ctk/-ctv type used for both K and
// V (Model::kv_bytes_per_position; "-" where the head size does not take the
// type's block), as llama.cpp's llama_kv_cache line sizes it per cell.
void print_kv_bytes(const std::string& path) {
  Model m;
  try {
    m = Model::load(path);
  } catch (const Error& e) {
    std::printf("\nKV cache: not computed (%s)\n", e.what());
    return;
  }
  std::printf("\nKV cache bytes per token (-ctk and -ctv the same type%s):\n",
              m.has_recurrent_layers() ? "; attention layers only, the recurrent state aside" : "");
  for (const char* name : {"f16", "bf16", "q8_0", "q5_0", "q4_0", "iq4_nl"}) {
    const GgmlType t = kv_cache_type_from_name(name);
    try {
      std::printf("  %-8s %llu\n", name, static_cast<unsigned long long>(m.kv_bytes_per_position(t, t)));
    } catch (const Error& e) {
      std::printf("  %-8s - (%s)\n", name, e.what());
    }
  }
}

int run(const std::string& path) {
  const gguf::File f = gguf::File::open(path);
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %llu\n", path.c_str(), f.version(),
              f.metadata().size(), f.tensors().size(), static_cast<unsigned long long>(f.alignment()));
  const std::optional<std::string> arch = f.get_string("general.architecture");
  const std::vector<std::string> archs = supported_architectures();
  const bool supported = arch && std::find(archs.begin(), archs.end(), *arch) != archs.end();
  std::printf("architecture: %s (%s; synapse runs %s)\n", arch ? arch->c_str() : "(none)",
              supported ? "supported" : "not supported",
              join(archs, ", ", [](const std::string& n) { return n; }).c_str());
  std::printf("\nmetadata:\n");
  for (const auto& kv : f.metadata())
    std::printf("  %-48s %-8s %s\n", kv.key.c_str(), std::string(gguf::value_type_name(kv.value.type)).c_str(),
                show(kv.value, 5).c_str());
  std::printf("\ntensors:\n");
  uint64_t bytes = 0, params = 0;
  for (const auto& t : f.tensors()) {
    const std::string shape = join_in("[", std::span(t.ne.data(), t.n_dims), ", ", "]");
    std::printf("  %-40s %-8s %-24s %12llu bytes\n", t.name.c_str(), std::string(type_name(t.type)).c_str(),
                shape.c_str(), static_cast<unsigned long long>(t.n_bytes));
    bytes += t.n_bytes;
    params += static_cast<uint64_t>(t.n_elements());
  }
  std::printf("\ntotal: %llu parameters, %llu bytes (%.2f MiB), %.3f bits per weight\n",
              static_cast<unsigned long long>(params), static_cast<unsigned long long>(bytes), bytes / 1048576.0,
              params ? 8.0 * static_cast<double>(bytes) / static_cast<double>(params) : 0.0);
  if (supported) print_kv_bytes(path);
  return 0;
}

}  // namespace

Runner add_info(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  // One option, positional or -m/--model (llama.cpp's tools take -m).
  app.add_option("model,-m,--model", *path, "GGUF file (positional or -m)")->required();
  return [path] { return run(*path); };
}

}  // namespace synapse::tools
