// Grammar bindings: GBNF checked by the library's own parser and JSON Schema
// converted to GBNF (synapse/grammar.hpp). The package's LlamaGrammar holds the
// GBNF text these return; SamplerParams.grammar carries it to the generation
// loop, which compiles it once and caches it (the runtime's grammar cache), so
// nothing compiled crosses into Python.
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.hpp"
#include "synapse/grammar.hpp"

namespace py = pybind11;

namespace synapse::python {

void bind_grammar(py::module_& m) {
  m.def(
      "compile_grammar",
      [](const std::string& text) {
        py::gil_scoped_release nogil;
        return Grammar::parse(text)->n_rules();
      },
      py::arg("text"),
      "Parses and compiles GBNF TEXT (rule `root` and what it reaches) and returns the number of\n"
      "rules after compilation. InvalidArgumentError (a ValueError) \"grammar: line L, column C: ...\"\n"
      "for a syntax error, an undefined rule, no root, left recursion or a limit passed.");
  m.def(
      "json_schema_to_gbnf",
      [](const std::string& schema) {
        py::gil_scoped_release nogil;
        return json_schema_to_gbnf(schema);
      },
      py::arg("schema"),
      "Converts a JSON Schema (JSON text) to GBNF whose root accepts exactly the values the schema\n"
      "accepts, with llama.cpp's whitespace rule. InvalidArgumentError (a ValueError) naming the\n"
      "keyword and its JSON pointer for a keyword it cannot enforce or a bad value.");
}

}  // namespace synapse::python
