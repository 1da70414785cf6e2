// The template parser: Jinja2's grammar (jinja2/parser.py) over the lexer's
// tokens, with the loopcontrols extension (break, continue) and
// transformers' {% generation %} tag.
#pragma once

#include <string_view>

#include "template/ast.hpp"

namespace synapse::jinja {

struct Options;

// The template's statements. Throws synapse::Error ("template: line L: ...")
// on a syntax error, a filter or test that does not exist (outside an
// {% if %} or an inline if, where Jinja2 waits until it runs), break or
// continue outside a loop, or nesting deeper than options.max_depth.
Body parse_template(std::string_view source, const Options& options);

}  // namespace synapse::jinja
