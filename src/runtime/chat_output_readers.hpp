// The part of the reply parser that knows the families: what each writes
// (call markers, reasoning blocks, markers around content) and the readers
// of a call section. chat_output.cpp's engine (OutputStream) decides where a
// section starts and what is held; a reader decides what the section holds.
// Internal to the runtime.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/chat_output.hpp"

namespace synapse::runtime::readers {

using Json = nlohmann::ordered_json;  // arguments keep the model's key order

inline bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline size_t skip_ws(std::string_view s, size_t p) {
  while (p < s.size() && is_ws(s[p])) ++p;
  return p;
}
inline std::string_view trim(std::string_view s) {
  size_t b = skip_ws(s, 0), e = s.size();
  while (e > b && is_ws(s[e - 1])) --e;
  return s.substr(b, e - b);
}
inline std::string_view rtrim(std::string_view s) {
  size_t e = s.size();
  while (e > 0 && is_ws(s[e - 1])) --e;
  return s.substr(0, e);
}

// A JSON text, or nothing when it is not one.
std::optional<Json> parse_json(std::string_view s);
// Compact JSON text (invalid UTF-8 in strings replaced).
std::string dump(const Json& j);

// A reader's answer: ok (the section is whole), no (it is not a call
// section: its marker is content), more (it cannot tell yet). At the end of
// the reply (`final`) it says ok or no.
enum class M { ok, no, more };

struct RawCall {
  std::string id;  // the model's, or empty
  std::string name;
  Json arguments;
};

// What a section holds: calls, or (generic's {"response": ...}) content.
struct Section {
  std::vector<RawCall> calls;
  std::string content;
};

// What the readers know of the request: the tools' names and schemas.
class Tools {
 public:
  explicit Tools(const nlohmann::json& tools);
  // Any name when the request named none.
  bool known(std::string_view name) const { return fns_.empty() ? !name.empty() : has(name); }
  // A tool of this name was offered.
  bool has(std::string_view name) const;
  // The JSON types a parameter's schema allows ({} when unknown).
  std::vector<std::string> param_types(std::string_view fn, std::string_view param) const;

 private:
  struct Fn {
    std::string name;
    nlohmann::json parameters;
  };
  std::vector<Fn> fns_;
};

enum class Reader {
  tool_call_tag, function_tag_xml, glm, minimax, mistral, nemotron, apriel, granite, command_r7b, firefunction,
  functionary, deepseek, kimi, llama3_json, python_tag, generic
};

struct Trigger {
  std::string_view marker;
  Reader reader;
  bool at_start = false;  // only as the first thing of the content (whitespace aside)
  bool keep = false;      // the marker is part of what the reader reads ("{")
};

struct EndMarker {
  std::string_view text;
  bool consumed = true;  // false: it also begins what follows (a call)
};

struct Spec {
  std::vector<Trigger> triggers;
  std::vector<std::string_view> reasoning_starts;
  std::vector<EndMarker> reasoning_ends;
  std::vector<std::string_view> dropped;  // markers around content that are not content
};

// What family f writes; `tools`: calls are parsed (else no triggers).
Spec spec_of(ToolCallFormat f, bool tools);

// Reads the section of reader r in `text` from `begin` (right after its
// marker, or at it for a kept marker): ok fills *sec and sets *end to the
// first byte after the section.
M read_section(Reader r, const Tools& tools, std::string_view text, size_t begin, bool final, Section* sec,
               size_t* end);

}  // namespace synapse::runtime::readers
