// What the two translations onto the chat route share: Anthropic's Messages
// API (server/anthropic.hpp) and OpenAI's Responses API (server/responses.hpp)
// each turn a request into a chat-completions body, and the chat route's
// reply or stream back into their own shapes.
//
// Both stream named server-sent events ("event: NAME" before each "data:"
// line, Anthropic's and OpenAI's streaming references), and both refuse a bad
// field with a 400 whose message starts with the field's path, as in
// "messages[2].content[0].type: unknown block type 'foo'".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request.hpp"

namespace synapse::server {

// One event of a named-event stream: `event` is the SSE event name, `data`
// its JSON (which repeats the name in data.type in both APIs).
struct ApiEvent {
  std::string event;
  nlohmann::json data;
  bool operator==(const ApiEvent&) const = default;
};

// "event: NAME\ndata: JSON\n\n" for each event, concatenated; invalid UTF-8
// in the JSON's strings is written as U+FFFD (dump_json), as a model's text
// may end inside a character. Pure, thread-safe.
std::string sse_events(const std::vector<ApiEvent>& events);

// A request body parsed as JSON with its keys in the order the client wrote
// them (a schema's properties keep their order on the way to the grammar),
// after parse_json_object's checks. Throws HttpError(400) for a body that is
// not a JSON object, is malformed, or nests deeper than `max_depth`.
nlohmann::ordered_json parse_ordered_object(std::string_view body, int max_depth);

// The part of a chat reply's id after "chatcmpl-" (the whole id when it has
// no such prefix): the translated replies derive their ids from it, so that
// their bytes depend on the request and that id alone.
std::string id_suffix(const std::string& chat_id);

// The chat route names a bad field by the chat body's spelling; a client of
// another API sent that field under its own name. `rename` maps the name
// (anthropic_field, responses_field); the error keeps its status and has the
// name replaced in its param and, where quoted ('max_tokens'), its message.
HttpError renamed_error(const HttpError& e, std::string (*rename)(const std::string& chat_field));

namespace translation {

using nlohmann::ordered_json;

// Throws HttpError(400, path + ": " + what, path).
[[noreturn]] void bad(const std::string& path, const std::string& what);

// ", got <the value quoted>" for the end of a 400's message.
std::string got(const ordered_json& v);

// `v` when it is an object (an array), else a 400 naming `path`.
const ordered_json& object_at(const ordered_json& v, const std::string& path);
const ordered_json& array_at(const ordered_json& v, const std::string& path);

// j[key] when present and not null (both APIs read an explicit null as
// absent), else nullptr.
const ordered_json* field(const ordered_json& j, const char* key);

// j[key] as a string; `def` when absent and not required; a 400 naming
// path.key when it is required and absent or not a string.
std::string string_field(const ordered_json& j, const char* key, const std::string& path, bool required,
                         const std::string& def = {});

// `chat_field` with its leading `from` replaced by `to`, where `from` is a
// whole name (followed by nothing, '.' or '['); nullopt when it is not there.
std::optional<std::string> replace_prefix(const std::string& chat_field, std::string_view from, std::string_view to);

// "tools[i].function.REST" -> "tools[i].REST" (the flat tool shapes of both
// APIs), else nullopt.
std::optional<std::string> flat_tool_field(const std::string& chat_field);

// path + "." + key, and path + "[i]" (path "" gives "key").
std::string at_key(const std::string& path, const char* key);
std::string at_index(const std::string& path, size_t i);

}  // namespace translation

}  // namespace synapse::server
