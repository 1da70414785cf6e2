// The values templates compute with: Python's (None, bool, int, float, str,
// list, tuple, dict with insertion order) plus Jinja2's Undefined, markupsafe's
// Markup (a str flag) and objects (macros, functions, namespace(), loop).
//
// Lists, dicts and objects live in a Heap owned by one render and are freed
// with it, all at once: values point at them without reference counts, so a
// list appended to itself or a macro closing over its own scope leaks nothing.
// Strings are immutable and shared (std::shared_ptr<const std::string>).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace synapse::jinja {

class Interp;
struct List;
struct Dict;
struct Object;

// A runtime error of the template, without its line: the evaluator adds the
// line of the node it was evaluating (synapse::Error "template: line L: ...").
struct Fault {
  std::string message;
};
[[noreturn]] void fault(std::string message);

enum class Kind : uint8_t { undefined, none, boolean, integer, real, string, list, dict, object };

using Str = std::shared_ptr<const std::string>;

struct Value {
  Kind kind = Kind::undefined;
  bool markup = false;  // a string that is markupsafe.Markup (|safe, |e): what is added to it is escaped
  union {
    bool b;
    int64_t i;
    double f;
    List* list;
    Dict* dict;
    Object* obj;
  };
  Str s;  // string: the text; undefined: why it is undefined (for the error message)

  Value() : i(0) {}
  static Value undefined(std::string why = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value real(double v);
  static Value string(std::string v, bool markup = false);
  static Value string(Str v, bool markup = false);
  static Value of(List* l);
  static Value of(Dict* d);
  static Value of(Object* o);

  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_none() const { return kind == Kind::none; }
  bool is_string() const { return kind == Kind::string; }
  // int or bool (Python's bool is an int) / int, bool or float.
  bool is_int() const { return kind == Kind::integer || kind == Kind::boolean; }
  bool is_number() const { return is_int() || kind == Kind::real; }
  const std::string& str() const { return *s; }
  int64_t as_int() const { return kind == Kind::boolean ? int64_t{b} : i; }
  double as_real() const { return kind == Kind::real ? f : static_cast<double>(as_int()); }
};

// Everything a Heap owns.
struct Heaped {
  virtual ~Heaped() = default;
};

// A list; a tuple (immutable; printed in parentheses); a range (immutable,
// printed range(start, stop[, step]), no JSON); or a generator: what Jinja2's
// map, select, items, ... return, truthy even when empty, without len(), not
// subscriptable, used up by iterating it. The items are always there.
struct List : Heaped {
  std::vector<Value> items;
  bool tuple = false;
  bool generator = false;
  bool range = false;
  int64_t range_start = 0, range_stop = 0, range_step = 1;
};

// A dict in insertion order (Python 3.7+). Keys are what Python can hash
// and templates write: str, int, float, bool, None and tuples of them; 1,
// 1.0 and True are one key, as in Python.
struct Dict : Heaped {
  std::vector<std::pair<Value, Value>> items;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  Value* find(const Value& key) { return const_cast<Value*>(std::as_const(*this).find(key)); }
  Value* find(std::string_view key) { return const_cast<Value*>(std::as_const(*this).find(key)); }
  void set(Value key, Value v);  // a Fault for a key Python cannot hash (list, dict)
  void set(std::string_view key, Value v);
  bool erase(const Value& key);
  void clear() {
    items.clear();
    indexed_ = false;
  }

 private:
  // Past 8 items, a hash index by canonical key (key_text): str keys and the
  // others alike, so that no lookup scans the dict.
  mutable std::unordered_map<std::string, size_t> index_;
  mutable bool indexed_ = false;
  void build_index() const;
};
// Whether two hashable values are the same dict key (Python's hash and ==).
bool same_key(const Value& a, const Value& b, int depth = 0);
// A Fault unless Python can hash the value (str, numbers, None, tuples of those).
void check_hashable(const Value& v);

// Call arguments: positional, then keyword (in the order written).
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* kwarg(std::string_view name) const;
};

// A callable or attribute-bearing object: a macro, a function or method,
// namespace(), a loop.
struct Object : Heaped {
  virtual const char* type_name() const = 0;
  virtual Value attr(Interp& in, std::string_view name);  // undefined by default
  virtual bool callable() const { return false; }
  virtual Value call(Interp& in, Args& args);  // a Fault by default
  virtual std::string repr(Interp& in);         // "<type_name object>"
};

// namespace(): attributes set with {% set ns.x = ... %}.
struct Namespace : Object {
  Dict attrs;
  const char* type_name() const override { return "Namespace"; }
  Value attr(Interp& in, std::string_view name) override;
  std::string repr(Interp& in) override;
};

// Owns a render's lists, dicts and objects; counts them against the step limit.
class Heap {
 public:
  template <typename T, typename... A>
  T* make(A&&... a) {
    auto p = std::make_unique<T>(std::forward<A>(a)...);
    T* raw = p.get();
    all_.push_back(std::move(p));
    return raw;
  }
  size_t size() const { return all_.size(); }

 private:
  std::vector<std::unique_ptr<Heaped>> all_;
};

// Python semantics, given the interpreter for limits (depth of nested values)
// and the heap.
bool truthy(const Value& v);
const char* type_name(const Value& v);  // Python's type name: 'str', 'NoneType', 'Undefined', ...
std::string to_str(Interp& in, const Value& v);   // str()
std::string to_repr(Interp& in, const Value& v);  // repr()
bool equals(Interp& in, const Value& a, const Value& b);  // ==
// <: numbers, strings, lists and tuples (element by element); else a Fault
// (TypeError), an undefined operand an UndefinedError.
bool less(Interp& in, const Value& a, const Value& b);
[[noreturn]] void undefined_error(const Value& v);

// json.dumps as transformers' tojson calls it.
struct JsonOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // one level
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string to_json(Interp& in, const Value& v, const JsonOptions& opt);

}  // namespace synapse::jinja
