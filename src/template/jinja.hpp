// A Jinja2 template engine for chat templates: synapse::jinja::Template.
//
// It renders what Hugging Face chat templates use the way Python Jinja2 does
// in transformers' environment (ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks, loopcontrols, tojson as json.dumps with
// ensure_ascii=False, raise_exception, strftime_now, {% generation %}), with
// llama.cpp's two liberties: lists may be changed in place (append, pop, ...)
// and tojson of a map/select result gives a list. The output is byte for
// byte Jinja2's on llama.cpp's template collection
// (tests/template/equivalence_test.cpp).
//
// Left out, or different from Jinja2:
// - {% extends %}, {% include %}, {% import %}, {% from %}, {% autoescape %}
//   are syntax errors (one template, no loader: Jinja2 fails too, when run);
// - the filters groupby, pprint, random, urlencode, urlize, wordwrap,
//   xmlattr and filesizeformat exist but fail when run; no lipsum();
// - case mapping (upper, lower, title, capitalize, isupper, ...) covers the
//   Latin, Greek, Cyrillic and fullwidth letters one to one (and ß to SS);
//   \w (wordcount) and repr()'s printable test use approximate tables;
// - integers are 64-bit (overflow is an error, as is a negative number to a
//   fractional power); dict keys are str, int, float, bool, None or tuples;
// - slicing a literal that is no sequence ({{ none[1:] }}) is an error, as
//   slicing a variable is in Jinja2 (whose constant folding gives Undefined);
//   a function or method prints without its address;
// - generators (map, select, items, ...) are computed when made, so an error
//   inside one comes at the filter, and a loop over a list being appended
//   to sees the list as it was;
// - str.format and % cover the usual conversions (no nested fields in a
//   format spec, no \N{...} escapes); Markup escapes what + adds to it, not
//   the arguments of its format() or %.
//
// Sandboxed: a template sees only the context it is given and the built-in
// globals (range, dict, namespace, raise_exception, strftime_now, cycler,
// joiner); it reads no file and no attribute of the host. Output size,
// evaluation steps and nesting depth are limited (Options).
//
// Errors are synapse::Error(Errc::invalid_argument): "template: line L: ..."
// for syntax errors (from parse) and for runtime errors, including the limits
// (from render); a template's raise_exception("msg") throws with what() ==
// "msg" exactly, the message the template wrote for its user.
//
// Thread-safety: a parsed Template is immutable; render() may run on many
// threads at once (each render has its own state).
#pragma once

#include <cstddef>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace synapse::jinja {

struct Options {
  bool trim_blocks = true;    // drop the newline after a block tag (Jinja2's trim_blocks)
  bool lstrip_blocks = true;  // drop spaces and tabs before a block tag at the start of a line
  // Bytes of output, and of any one string the template builds.
  size_t max_output = size_t{1} << 20;
  // Evaluation steps: nodes evaluated, loop iterations, objects made, and one
  // per 64 bytes of strings built. A loop that runs away ends here.
  size_t max_steps = 10'000'000;
  // Nesting: of macro calls (recursion), of blocks and expressions in the
  // source, of lists and dicts printed or compared. About Python's own
  // recursion limit; at 256 a render needs about 1 MiB of stack.
  size_t max_depth = 256;
  // strftime_now's clock; empty: the local time at the call.
  std::function<std::tm()> now;
};

struct TemplateImpl;

class Template {
 public:
  // Parses `source` (UTF-8). Throws synapse::Error on a syntax error, an
  // unknown filter or test outside an {% if %}, or a template nested deeper
  // than options.max_depth.
  static Template parse(std::string_view source, const Options& options = {});

  // Renders with `context` as the template's variables: a JSON object
  // (messages, tools, add_generation_prompt, bos_token, ...), its key order
  // being the dict order the template sees.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  explicit Template(std::shared_ptr<const TemplateImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const TemplateImpl> impl_;
};

}  // namespace synapse::jinja
