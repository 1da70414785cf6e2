// Chat bindings over synapse/chat.hpp's Jinja and tool-call API: a model's
// own chat template rendered by the library's template engine
// (JinjaChatTemplate), and the syntax its family writes calls and reasoning
// in (ChatSyntax: the grammar that forces a call, the reply parser, its
// streaming form). Everything crosses as JSON text; the package (synapse/
// __init__.py) turns it into OpenAI-shaped dicts. Errors are the library's
// (InvalidArgumentError naming the field, a ValueError).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "synapse/chat.hpp"

namespace py = pybind11;

namespace synapse::python {

namespace {

ChatReplyOptions reply_options(std::string reasoning_format, bool thinking_open, std::string tools_json,
                               std::string tool_choice_json, bool parallel_tool_calls, uint64_t id_seed) {
  ChatReplyOptions o;
  o.reasoning_format = std::move(reasoning_format);
  o.thinking_open = thinking_open;
  o.tools_json = std::move(tools_json);
  o.tool_choice_json = std::move(tool_choice_json);
  o.parallel_tool_calls = parallel_tool_calls;
  o.id_seed = id_seed;
  return o;
}

}  // namespace

void bind_chat(py::module_& m) {
  py::class_<ChatSyntax>(m, "ChatSyntax",
                         "How a model family writes tool calls and reasoning (synapse::ChatSyntax).")
      .def(py::init<std::string_view, std::string_view>(), py::arg("template_source"), py::arg("architecture") = "",
           "The family of a chat template (by its markers; ARCHITECTURE decides an empty one).")
      .def_property_readonly("name", &ChatSyntax::name, "\"hermes\", \"llama3_json\", ..., \"generic\"")
      .def("prompt_opens_reasoning", &ChatSyntax::prompt_opens_reasoning, py::arg("prompt"),
           "whether PROMPT ends inside the family's reasoning block (e.g. after <think>)")
      .def("tool_call_grammar", &ChatSyntax::tool_call_grammar, py::arg("tools_json"), py::arg("tool_choice_json"),
           py::arg("parallel_tool_calls"), py::arg("thinking_open") = false,
           "GBNF forcing a call for tool_choice \"required\" or a named function (\"\" for auto/none).\n"
           "InvalidArgumentError naming tools[i] / tool_choice for a bad request.")
      .def(
          "parse_reply",
          [](const ChatSyntax& s, std::string_view text, std::string reasoning_format, bool thinking_open,
             std::string tools_json, std::string tool_choice_json, bool parallel_tool_calls, uint64_t id_seed) {
            return s.parse_reply(text, reply_options(std::move(reasoning_format), thinking_open, std::move(tools_json),
                                                     std::move(tool_choice_json), parallel_tool_calls, id_seed));
          },
          py::arg("text"), py::kw_only(), py::arg("reasoning_format") = "auto", py::arg("thinking_open") = false,
          py::arg("tools_json") = "", py::arg("tool_choice_json") = "", py::arg("parallel_tool_calls") = true,
          py::arg("id_seed") = 0,
          "TEXT (str or UTF-8 bytes) as JSON text {\"content\", \"reasoning_content\", \"tool_calls\"}.")
      .def(
          "reply_message",
          [](const ChatSyntax& s, std::string_view text, std::string reasoning_format, bool thinking_open,
             std::string tools_json, std::string tool_choice_json, bool parallel_tool_calls, uint64_t id_seed) {
            return s.reply_message(text, reply_options(std::move(reasoning_format), thinking_open,
                                                       std::move(tools_json), std::move(tool_choice_json),
                                                       parallel_tool_calls, id_seed));
          },
          py::arg("text"), py::kw_only(), py::arg("reasoning_format") = "auto", py::arg("thinking_open") = false,
          py::arg("tools_json") = "", py::arg("tool_choice_json") = "", py::arg("parallel_tool_calls") = true,
          py::arg("id_seed") = 0,
          "TEXT parsed as parse_reply does, as OpenAI's assistant message (JSON text): the server's message.")
      .def(
          "stream",
          [](const ChatSyntax& s, std::string reasoning_format, bool thinking_open, std::string tools_json,
             std::string tool_choice_json, bool parallel_tool_calls, uint64_t id_seed) {
            return s.stream(reply_options(std::move(reasoning_format), thinking_open, std::move(tools_json),
                                          std::move(tool_choice_json), parallel_tool_calls, id_seed));
          },
          py::kw_only(), py::arg("reasoning_format") = "auto", py::arg("thinking_open") = false,
          py::arg("tools_json") = "", py::arg("tool_choice_json") = "", py::arg("parallel_tool_calls") = true,
          py::arg("id_seed") = 0, "a streaming parser of one reply (ChatReplyStream)");

  py::class_<ChatReplyStream>(m, "ChatReplyStream", "One reply's streaming parser (synapse::ChatReplyStream).")
      .def("feed", &ChatReplyStream::feed, py::arg("piece"),
           "the OpenAI deltas PIECE decides, as a JSON array of objects")
      .def("finish", &ChatReplyStream::finish, "the deltas of what is still held at the end of the reply");

  py::class_<JinjaChatTemplate>(m, "JinjaChatTemplate",
                                "A model's Jinja chat template rendered by the library's engine, as llama-server\n"
                                "renders it (synapse::JinjaChatTemplate).")
      .def(py::init<std::string, std::string, std::string, std::string_view>(), py::arg("source"),
           py::arg("bos_token"), py::arg("eos_token"), py::arg("architecture") = "",
           "InvalidArgumentError \"template: line L: ...\" when SOURCE does not parse.")
      .def_static(
          "for_model",
          [](const Model& mo, std::optional<std::string> source) {
            return JinjaChatTemplate::for_model(mo.gguf(), mo.tokenizer(), std::move(source));
          },
          py::arg("model"), py::arg("source") = py::none(),
          "The model's template (or SOURCE), None when the file has no tokenizer.chat_template.")
      .def(
          "apply",
          [](const JinjaChatTemplate& t, std::string messages_json, bool add_generation_prompt, std::string tools_json,
             std::string kwargs_json) {
            py::gil_scoped_release nogil;
            return t.apply(messages_json, add_generation_prompt, tools_json, kwargs_json);
          },
          py::arg("messages_json"), py::arg("add_generation_prompt") = true, py::arg("tools_json") = "",
          py::arg("kwargs_json") = "",
          "The prompt text (BOS text removed: tokenize with add_bos and special). InvalidArgumentError\n"
          "naming the field for bad messages/tools, or with the template's own message.")
      .def_property_readonly("source", &JinjaChatTemplate::source)
      .def("syntax", &JinjaChatTemplate::syntax, "the ChatSyntax of this template and the model's architecture");

  m.def(
      "validate_chat_tools", [](std::string_view tools_json) { validate_chat_tools(tools_json); },
      py::arg("tools_json"), "InvalidArgumentError naming the field (tools[i]...) for a bad tools array.");
  m.def(
      "validate_chat_messages", [](std::string_view messages_json) { validate_chat_messages(messages_json); },
      py::arg("messages_json"),
      "InvalidArgumentError naming the field for malformed tool_calls or tool messages in a history.");
}

}  // namespace synapse::python
