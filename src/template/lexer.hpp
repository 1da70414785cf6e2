// The template lexer: Jinja2's (jinja2/lexer.py) rules, whitespace control
// included. Template data, {{ }} and {% %} delimiters, and inside them names,
// strings (Python's escapes), integers, floats and operators.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace synapse::jinja {

struct Options;

enum class Tok : uint8_t {
  data, variable_begin, variable_end, block_begin, block_end, name, string, integer, real, op, eof,
};

struct Token {
  Tok type;
  int line;
  std::string text;  // data, name, string (unescaped), operator
  int64_t ival = 0;
  double fval = 0;
};

// The tokens of `source`, ending with Tok::eof. Newlines are normalized to
// \n and one trailing newline is dropped (keep_trailing_newline=False).
// Comments and whitespace inside tags produce no token. Throws
// synapse::Error ("template: line L: ...") on a lexical error.
std::vector<Token> tokenize(std::string_view source, const Options& options);

// "template: line L: " + message, as a synapse::Error.
[[noreturn]] void syntax_error(int line, const std::string& message);

}  // namespace synapse::jinja
