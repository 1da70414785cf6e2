// The tools the chat output tests call (llama.cpp's special_function and a
// few more) and the parse options they use.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/chat_output.hpp"

namespace synapse::runtime {

using nlohmann::json;

inline json tool(const std::string& name, json parameters) {
  return {{"type", "function"}, {"function", {{"name", name}, {"description", "d"}, {"parameters", parameters}}}};
}

// The tools of llama.cpp's tests (special_function, ...) and a few more.
inline const json& test_tools() {
  static const json tools = json::array({
      tool("special_function",
           {{"type", "object"}, {"properties", {{"arg1", {{"type", "integer"}}}}}, {"required", {"arg1"}}}),
      tool("special_function_with_opt", {{"type", "object"},
                                         {"properties", {{"arg1", {{"type", "integer"}}}, {"arg2", {{"type", "integer"}}}}},
                                         {"required", {"arg1"}}}),
      tool("get_weather", {{"type", "object"},
                           {"properties",
                            {{"location", {{"type", "string"}}},
                             {"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
                           {"required", {"location"}}}),
      tool("python", {{"type", "object"}, {"properties", {{"code", {{"type", "string"}}}}}, {"required", {"code"}}}),
      tool("html", {{"type", "object"}, {"properties", {{"markup", {{"type", "string"}}}}}, {"required", {"markup"}}}),
      tool("get_time", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}),
      tool("brave_search", {{"type", "object"}, {"properties", {{"query", {{"type", "string"}}}}}, {"required", {"query"}}}),
      tool("edit", {{"type", "object"},
                    {"properties",
                     {{"oldString", {{"type", "string"}}},
                      {"newString", {{"type", "string"}}},
                      {"replaceAll", {{"type", "boolean"}}}}},
                    {"required", {"oldString", "newString"}}}),
  });
  return tools;
}

inline ParseOptions with_tools(ReasoningFormat r = ReasoningFormat::automatic) {
  ParseOptions o;
  o.reasoning_format = r;
  o.tools_offered = true;
  o.tools = test_tools();
  o.id_seed = 42;
  return o;
}

inline const std::string kArg1 = R"({"arg1":1})";

}  // namespace synapse::runtime
