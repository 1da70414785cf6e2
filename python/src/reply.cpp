// Reply formatting bindings: the library's one formatter of OpenAI-shaped
// replies (synapse/reply_format.hpp) in its llama_cpp_python dialect, so the
// package's completion and chat dicts come from the same code as the
// server's replies. Each function returns JSON text (keys in
// llama-cpp-python's order) that synapse/__init__.py loads with json.loads.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "synapse/reply_format.hpp"

namespace py = pybind11;

namespace synapse::python {

namespace {

// The tokens whose logprobs a choice carries, from `source`: None (logprobs
// null), a GenerationResult (a whole reply), or a list of Stream.poll()'s step
// tuples (id, eog, text, logprob, [(id, logprob)], finish) of one chunk.
// `steps` keeps the candidates the views point into.
ReplyChoice choice_of(const py::object& source, std::vector<GeneratedToken>& steps, std::string text,
                      size_t text_offset, const std::optional<std::string>& finish) {
  ReplyChoice c;
  c.text = std::move(text);
  c.text_offset = text_offset;
  c.finish_reason = finish.value_or("");
  if (source.is_none()) return c;
  if (py::isinstance<GenerationResult>(source)) {
    c.tokens = token_probs(source.cast<const GenerationResult&>());
  } else {
    for (const py::handle step : source.cast<py::list>()) {
      const auto t = step.cast<py::tuple>();
      GeneratedToken g;
      g.id = t[0].cast<token_id>();
      g.eog = t[1].cast<bool>();
      g.logprob = t[3].cast<float>();
      for (const py::handle p : t[4].cast<py::list>()) {
        const auto pair = p.cast<py::tuple>();
        g.top_logprobs.push_back({pair[0].cast<token_id>(), pair[1].cast<float>()});
      }
      steps.push_back(std::move(g));
    }
    c.tokens = token_probs(steps);
  }
  // A chunk whose steps put no token in the reply carries no logprobs.
  c.logprobs = py::isinstance<GenerationResult>(source) || !c.tokens.empty();
  return c;
}

ReplyHead head_of(std::string id, int64_t created, std::string model) {
  return ReplyHead{std::move(id), created, std::move(model), {}};
}

}  // namespace

void bind_reply(py::module_& m) {
  m.def(
      "completion_json",
      [](const Model& model, std::string id, int64_t created, std::string name, std::string text,
         const py::object& logprobs, size_t text_offset, std::optional<std::string> finish, int64_t n_prompt,
         int64_t n_completion, bool chunk) {
        std::vector<GeneratedToken> steps;
        const ReplyChoice c = choice_of(logprobs, steps, std::move(text), text_offset, finish);
        return completion_json(ReplyDialect::llama_cpp_python, head_of(std::move(id), created, std::move(name)), c,
                               {n_prompt, n_completion, 0}, model.tokenizer(), chunk);
      },
      py::arg("model"), py::arg("id"), py::arg("created"), py::arg("name"), py::arg("text"), py::arg("logprobs"),
      py::arg("text_offset"), py::arg("finish_reason"), py::arg("n_prompt"), py::arg("n_completion"),
      py::arg("chunk"),
      "A text_completion reply (chunk: one streamed chunk, no usage) as JSON text. LOGPROBS: None (null),\n"
      "a GenerationResult, or a list of Stream.poll() steps; TEXT_OFFSET: the first token's, in characters.");
  m.def(
      "chat_json",
      [](const Model& model, std::string id, int64_t created, std::string name, std::string body_json,
         const py::object& logprobs, std::optional<std::string> finish, int64_t n_prompt, int64_t n_completion,
         bool chunk) {
        std::vector<GeneratedToken> steps;
        const ReplyChoice c = choice_of(logprobs, steps, std::move(body_json), 0, finish);
        return chat_json(ReplyDialect::llama_cpp_python, head_of(std::move(id), created, std::move(name)), c,
                         {n_prompt, n_completion, 0}, model.tokenizer(), chunk);
      },
      py::arg("model"), py::arg("id"), py::arg("created"), py::arg("name"), py::arg("body_json"), py::arg("logprobs"),
      py::arg("finish_reason"), py::arg("n_prompt"), py::arg("n_completion"), py::arg("chunk"),
      "A chat.completion reply (BODY_JSON: the message) or chat.completion.chunk (chunk: BODY_JSON the\n"
      "delta, no usage) as JSON text; LOGPROBS as completion_json's.");
}

}  // namespace synapse::python
