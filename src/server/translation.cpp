#include "server/translation.hpp"

#include "server/request.hpp"
#include "server/response.hpp"

namespace synapse::server {

std::string sse_events(const std::vector<ApiEvent>& events) {
  std::string s;
  for (const ApiEvent& e : events) s += "event: " + e.event + "\ndata: " + dump_json(e.data) + "\n\n";
  return s;
}

nlohmann::ordered_json parse_ordered_object(std::string_view body, int max_depth) {
  (void)parse_json_object(body, max_depth);  // the depth bound before a recursive parse, and the 400s
  return nlohmann::ordered_json::parse(body.begin(), body.end());
}

std::string id_suffix(const std::string& chat_id) {
  constexpr std::string_view kChat = "chatcmpl-";
  return chat_id.compare(0, kChat.size(), kChat) == 0 ? chat_id.substr(kChat.size()) : chat_id;
}

HttpError renamed_error(const HttpError& e, std::string (*rename)(const std::string& chat_field)) {
  if (e.param().empty()) return e;
  const std::string field = rename(e.param());
  std::string message = e.what();
  if (const size_t at = message.find("'" + e.param() + "'"); at != std::string::npos)
    message.replace(at, e.param().size() + 2, "'" + field + "'");
  return HttpError(e.status(), message, field);
}

namespace translation {

void bad(const std::string& path, const std::string& what) { throw HttpError(400, path + ": " + what, path); }

std::string got(const ordered_json& v) { return ", got " + quote_value(nlohmann::json(v)); }

const ordered_json& object_at(const ordered_json& v, const std::string& path) {
  if (!v.is_object()) bad(path, "must be an object" + got(v));
  return v;
}

const ordered_json& array_at(const ordered_json& v, const std::string& path) {
  if (!v.is_array()) bad(path, "must be an array" + got(v));
  return v;
}

const ordered_json* field(const ordered_json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string string_field(const ordered_json& j, const char* key, const std::string& path, bool required,
                         const std::string& def) {
  const ordered_json* v = field(j, key);
  if (!v) {
    if (required) bad(at_key(path, key), "is required");
    return def;
  }
  if (!v->is_string()) bad(at_key(path, key), "must be a string" + got(*v));
  return v->get<std::string>();
}

std::optional<std::string> replace_prefix(const std::string& chat_field, std::string_view from, std::string_view to) {
  if (chat_field.compare(0, from.size(), from) != 0) return std::nullopt;
  if (chat_field.size() > from.size() && chat_field[from.size()] != '.' && chat_field[from.size()] != '[')
    return std::nullopt;
  return std::string(to) + chat_field.substr(from.size());
}

std::optional<std::string> flat_tool_field(const std::string& chat_field) {
  if (chat_field.compare(0, 6, "tools[") != 0) return std::nullopt;
  const size_t close = chat_field.find(']');
  constexpr std::string_view kFunction = ".function";
  if (close == std::string::npos || chat_field.compare(close + 1, kFunction.size(), kFunction) != 0)
    return std::nullopt;
  return chat_field.substr(0, close + 1) + chat_field.substr(close + 1 + kFunction.size());
}

std::string at_key(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }

std::string at_index(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

}  // namespace translation

}  // namespace synapse::server
