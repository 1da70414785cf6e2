// libFuzzer target: arbitrary bytes -> the Jinja2 template engine (issue 43).
//
// Input: a context byte, then the template text, then optionally a NUL and a
// JSON context. Without JSON (or when it does not parse as an object) the
// context byte picks one of a few chat contexts (messages with tool calls,
// tools, special tokens, flags). Contracts under test (src/template/jinja.hpp):
// parse and render throw nothing but synapse::Error; the output stays within
// max_output; rendering twice gives the same bytes (the clock is fixed); the
// step limit ends every input quickly. Violations trap; ASan, UBSan, stack
// overflows, leaks and timeouts are reported by libFuzzer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "synapse/error.hpp"
#include "template/jinja.hpp"

using namespace synapse;

namespace {

const nlohmann::ordered_json& builtin_context(uint8_t which) {
  static const nlohmann::ordered_json contexts[] = {
      nlohmann::ordered_json::parse(R"({
        "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <b>\u00e9\n"}]})"),
      nlohmann::ordered_json::parse(R"({
        "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": false, "enable_thinking": true,
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                   "days": {"type": ["integer", "null"], "default": 1}}, "required": ["city"]}}}],
        "messages": [{"role": "user", "content": "Weather?"},
                     {"role": "assistant", "content": null, "reasoning_content": "call it",
                      "tool_calls": [{"id": "abc123def", "type": "function",
                                      "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2.5}}}]},
                     {"role": "tool", "tool_call_id": "abc123def", "content": "{\"t\": 18}"}]})"),
      nlohmann::ordered_json::parse(R"({
        "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}]}],
        "documents": [{"title": "T", "text": "x"}], "reasoning_effort": "low", "x": [1, [2, [3, {"k": null}]]]})"),
      nlohmann::ordered_json::object(),
  };
  return contexts[which % (sizeof contexts / sizeof contexts[0])];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view text = rest.substr(0, nul);
  nlohmann::ordered_json context = builtin_context(data[0]);
  if (nul != std::string_view::npos) {
    auto j = nlohmann::ordered_json::parse(rest.substr(nul + 1), nullptr, false);
    if (j.is_object()) context = std::move(j);
  }
  jinja::Options opt;
  opt.max_output = 64 * 1024;  // small bounds keep each input fast; the code paths are the same
  opt.max_steps = 200000;
  opt.now = [] {
    std::tm t{};
    t.tm_year = 126;
    t.tm_mon = 2;
    t.tm_mday = 14;
    return t;
  };
  std::string first, second;
  bool threw = false;
  try {
    const jinja::Template t = jinja::Template::parse(text, opt);
    try {
      first = t.render(context);
    } catch (const Error&) {
      threw = true;
    }
    try {
      second = t.render(context);
      if (threw) __builtin_trap();  // the second render succeeded where the first threw
    } catch (const Error&) {
      if (!threw) __builtin_trap();
    }
  } catch (const Error&) {
    return 0;
  }
  if (first.size() > opt.max_output || first != second) __builtin_trap();
  return 0;
}
