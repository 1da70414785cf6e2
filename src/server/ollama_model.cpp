// The served model as Ollama's listing routes describe it (/api/tags,
// /api/show, /api/ps): names, file facts, details and model_info.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>

#include "server/ollama.hpp"
#include "synapse/gguf.hpp"
#include "synapse/quantize.hpp"
#include "synapse/types.hpp"

namespace synapse::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == suffix;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (const unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// A float metadata value as the float it is (FLOAT32 1e-5 prints 1e-05, not
// 9.99999974737875e-06).
json float_value(double f, bool is_f32) {
  if (!is_f32) return f;
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(f));
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

json value_json(const gguf::Value& v, bool verbose) {
  using T = gguf::ValueType;
  switch (v.type) {
    case T::UINT8: case T::UINT16: case T::UINT32: case T::UINT64: return v.u;
    case T::INT8: case T::INT16: case T::INT32: case T::INT64: return v.i;
    case T::FLOAT32: return float_value(v.f, true);
    case T::FLOAT64: return float_value(v.f, false);
    case T::BOOL: return v.b;
    case T::STRING: return v.str;
    case T::ARRAY: {
      json a = json::array();
      if (!verbose && v.items.size() > 5) return a;  // Ollama's rule: long arrays only when verbose
      for (const gguf::Value& item : v.items) a.push_back(value_json(item, verbose));
      return a;
    }
  }
  return nullptr;
}

// general.file_type's name, else the type holding most of the weights' bytes.
std::string quantization_level(const gguf::File& f) {
  if (const auto ft = f.get_u32("general.file_type")) {
    const std::string_view name = file_type_name(static_cast<FileType>(*ft));
    if (name != "unknown") return std::string(name);
  }
  std::map<std::string, uint64_t> bytes;
  for (const gguf::TensorInfo& t : f.tensors())
    if (t.n_dims >= 2) bytes[std::string(type_name(t.type))] += t.n_bytes;
  const auto top = std::max_element(bytes.begin(), bytes.end(),
                                    [](const auto& a, const auto& b) { return a.second < b.second; });
  return top == bytes.end() ? "unknown" : top->first;
}

std::string param_line(const char* name, const std::string& value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%-30s ", name);
  return buf + value + "\n";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string ollama_human_number(uint64_t n) {
  char buf[32];
  const double d = static_cast<double>(n);
  auto scaled = [&](double unit, const char* whole, const char* frac, char suffix) {
    const double x = d / unit;
    std::snprintf(buf, sizeof buf, x == static_cast<double>(static_cast<uint64_t>(x)) ? whole : frac, x, suffix);
    return std::string(buf);
  };
  if (n >= 1000000000ull) return scaled(1e9, "%.0f%c", "%.1f%c", 'B');
  if (n >= 1000000ull) return scaled(1e6, "%.0f%c", "%.2f%c", 'M');
  if (n >= 1000ull) {
    std::snprintf(buf, sizeof buf, "%.0fK", d / 1e3);
    return buf;
  }
  return std::to_string(n);
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  int64_t secs = ns / 1000000000;
  int64_t frac = ns % 1000000000;
  if (frac < 0) {
    frac += 1000000000;
    --secs;
  }
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(frac));
  return buf;
}

bool template_has_reasoning(std::string_view source) {
  for (const std::string_view marker : {"<think>", "enable_thinking", "reasoning_content", "[THINK]", "<|channel|>"})
    if (source.find(marker) != std::string_view::npos) return true;
  return false;
}

OllamaModel describe_ollama_model(const Model& model, const OllamaServing& s) {
  const gguf::File& f = model.gguf();
  OllamaModel m;
  const bool aliased = s.model_name != s.model_path;
  const std::string file = base_name(s.model_path);
  std::string stem = aliased ? s.model_name : file;
  if (ends_with_ci(stem, ".gguf")) stem.resize(stem.size() - 5);
  m.name = stem.find(':') == std::string::npos ? stem + ":latest" : stem;
  std::vector<std::string> forms = {m.name, stem, s.model_name, s.model_path, file};
  if (ends_with_ci(file, ".gguf")) forms.push_back(file.substr(0, file.size() - 5));
  for (const std::string& form : forms) {
    for (const std::string& n : {form, form + ":latest"}) {
      const std::string l = lower(n);
      if (!l.empty() && std::find(m.names.begin(), m.names.end(), l) == m.names.end()) m.names.push_back(l);
    }
  }

  struct stat st{};
  std::chrono::system_clock::time_point mtime{};
  if (::stat(s.model_path.c_str(), &st) == 0)
    mtime = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  m.modified_at = rfc3339(mtime);
  m.size = f.file_size();
  m.size_loaded = model.weight_bytes() + model.kv_bytes_per_position() * static_cast<uint64_t>(s.n_ctx) *
                                             static_cast<uint64_t>(std::max(s.n_parallel, 1));
  uint64_t seed = fnv1a(s.model_path, fnv1a(std::to_string(m.size) + "/" + m.modified_at));
  char hex[17];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(splitmix64(seed)));
    m.digest += hex;
  }

  const std::string arch = model.architecture();
  m.details = {{"parent_model", ""},
               {"format", "gguf"},
               {"family", arch},
               {"families", json::array({arch})},
               {"parameter_size", ollama_human_number(model.n_params())},
               {"quantization_level", quantization_level(f)}};
  m.capabilities = {"completion"};
  if (s.tools) m.capabilities.push_back("tools");
  if (s.thinking) m.capabilities.push_back("thinking");
  if (s.embedding) m.capabilities.push_back("embedding");
  m.template_source = s.chat_template;

  const SamplerParams& sp = s.sampling;
  m.parameters = param_line("num_ctx", std::to_string(s.n_ctx)) + param_line("temperature", number_text(sp.temp)) +
                 param_line("top_k", std::to_string(sp.top_k)) + param_line("top_p", number_text(sp.top_p)) +
                 param_line("min_p", number_text(sp.min_p)) +
                 param_line("repeat_penalty", number_text(sp.penalty_repeat)) +
                 param_line("repeat_last_n", std::to_string(sp.penalty_last_n));
  if (s.n_predict >= 0) m.parameters += param_line("num_predict", std::to_string(s.n_predict));
  m.parameters.pop_back();  // Ollama's lines are joined, not ended, by '\n'
  m.model_path = s.model_path;
  m.n_ctx = s.n_ctx;
  return m;
}

json ollama_model_info(const Model& model, bool verbose) {
  json info = json::object();
  for (const gguf::KeyValue& kv : model.gguf().metadata()) {
    if (kv.key == "general.name" || kv.key == "tokenizer.chat_template") continue;
    info[kv.key] = value_json(kv.value, verbose);
  }
  if (!info.contains("general.parameter_count")) info["general.parameter_count"] = model.n_params();
  return info;
}

bool ollama_model_matches(const OllamaModel& m, std::string_view requested) {
  const std::string r = lower(std::string(requested));
  return std::find(m.names.begin(), m.names.end(), r) != m.names.end();
}

std::string ollama_requested_model(const OllamaModel& m, const ordered_json& body) {
  const auto it = body.find("model");
  if (it == body.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
    throw HttpError(400, "model is required", "model");
  const std::string name = it->get<std::string>();
  if (!ollama_model_matches(m, name)) throw HttpError(404, "model '" + name + "' not found", "model");
  return name;
}

namespace {

json listing_entry(const OllamaModel& m) {
  return {{"name", m.name}, {"model", m.name}, {"size", m.size}, {"digest", m.digest}, {"details", m.details}};
}

}  // namespace

json ollama_tags(const OllamaModel& m) {
  json e = listing_entry(m);
  e["modified_at"] = m.modified_at;
  return {{"models", json::array({std::move(e)})}};
}

json ollama_show(const OllamaModel& m, json model_info) {
  std::string modelfile = "# Modelfile generated by synapse serve\nFROM " + m.model_path + "\n";
  size_t from = 0;
  while (from < m.parameters.size()) {
    const size_t nl = std::min(m.parameters.find('\n', from), m.parameters.size());
    std::string line = m.parameters.substr(from, nl - from);
    const size_t sp = line.find(' ');
    modelfile += "PARAMETER " + line.substr(0, sp) + " " +
                 (sp == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', sp))) + "\n";
    from = nl + 1;
  }
  return {{"modelfile", modelfile},
          {"parameters", m.parameters},
          {"template", m.template_source},
          {"details", m.details},
          {"model_info", std::move(model_info)},
          {"capabilities", m.capabilities},
          {"modified_at", m.modified_at}};
}

json ollama_ps(const OllamaModel& m, const std::string& expires_at) {
  json e = listing_entry(m);
  e["size"] = m.size_loaded;
  e["expires_at"] = expires_at;
  e["size_vram"] = 0;  // CPU only
  e["context_length"] = m.n_ctx;
  return {{"models", json::array({std::move(e)})}};
}

}  // namespace synapse::server
