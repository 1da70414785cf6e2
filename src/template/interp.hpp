// The evaluator: runs a parsed template against one context. One Interp per
// render; it owns the render's heap, scopes and limits.
//
// Scopes follow Jinja2's frames: a for loop, a macro call, a call, filter or
// set block, and {% with %} have their own; {% if %} has none. A scope sees
// its parent's names as they are when looked up (a macro sees the variables
// of the scope it was defined in, at call time). Top-level names are the
// context's, above them the globals.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "template/ast.hpp"
#include "template/jinja.hpp"
#include "template/value.hpp"

namespace synapse::jinja {

// raise_exception(message): ends the render with the template's message.
struct Raised {
  std::string message;
};

struct TemplateImpl {
  Body body;
  Options options;
};

class Scope : public Heaped {
 public:
  explicit Scope(Scope* parent) : parent_(parent) {}
  Value* find(std::string_view name);  // here or in a parent
  void set(std::string_view name, Value v);

 private:
  Scope* parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

// A function of the engine (a global, a bound method, loop.cycle, ...).
struct Function : Object {
  std::string name;
  Value (*fn)(Interp&, Function&, Args&) = nullptr;
  Value self;  // the bound object, for methods
  const char* type_name() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Value call(Interp& in, Args& args) override { return fn(in, *this, args); }
  std::string repr(Interp& in) override;
};

class Interp {
 public:
  explicit Interp(const TemplateImpl& t) : t_(t), opt_(t.options) {}

  std::string render(const nlohmann::ordered_json& context);

  // For the built-ins.
  const Options& options() const { return opt_; }
  Heap& heap() { return heap_; }
  void step(size_t n = 1) {
    steps_ += n;
    if (steps_ > opt_.max_steps) too_many_steps();
  }
  // A string of `bytes` is being built: within max_output, and one step per 64 bytes.
  void charge_string(size_t bytes);
  // Only the max_output bound (for strings built piece by piece).
  void check_size(size_t bytes);
  // Work in proportion to a value's size (a scan of a string, a copy of a
  // list): one step per 64 bytes or per item, so that a loop repeating it
  // on a large value ends at max_steps instead of running for hours.
  void charge_size(const Value& v);
  Value new_list(std::vector<Value> items = {}, bool tuple = false);
  Value new_dict();
  Value new_function(const char* name, Value (*fn)(Interp&, Function&, Args&), Value self = {});

  // Jinja2's sandboxed getattr (attribute first, then item) and getitem
  // (item first, then attribute).
  Value getattr(const Value& obj, std::string_view name);
  Value getitem(const Value& obj, const Value& key);
  // Python's iter() as a list; a generator is used up.
  std::vector<Value> iterate(const Value& v);
  bool contains(const Value& container, const Value& item);  // item in container
  Value call(const Value& fn, Args& args);
  Value call_filter(std::string_view name, Value input, Args& args);
  bool call_test(std::string_view name, const Value& v, Args& args);
  Value arith(BinOp op, const Value& a, const Value& b);
  // obj[start:stop:step]: Python's subscript (Jinja2 does not route slices
  // through its getitem, so a slice of a non-sequence is an error).
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

  // Nesting of values (printing, comparing) and of macro calls.
  struct Deeper {
    Interp& in;
    explicit Deeper(Interp& interp);
    ~Deeper() { --in.depth_; }
  };

  // repr() of a list or dict inside itself is [...] or {...}, as in Python:
  // printing(p) says whether p is being printed; a Printing marks it.
  bool printing(const void* p) const {
    for (const void* q : printing_)
      if (q == p) return true;
    return false;
  }
  struct Printing {
    Interp& in;
    Printing(Interp& interp, const void* p) : in(interp) { in.printing_.push_back(p); }
    ~Printing() { in.printing_.pop_back(); }
  };

  Value call_macro(const Macro& m, Scope* closure, Args& args);
  Value call_loop(struct LoopObject& loop, const Value& iterable);

 private:
  enum class Flow { normal, break_, continue_ };

  [[noreturn]] void too_many_steps();
  void write(std::string_view s);
  Value from_json(const nlohmann::ordered_json& j, size_t depth);

  Flow exec(const Body& body, Scope* scope);
  Flow exec(const Node& n, Scope* scope);
  // Renders `body` into a string; the flow (break/continue) comes back in `flow`.
  std::string capture(const Body& body, Scope* scope, Flow* flow = nullptr);
  Flow exec_for(const For& f, Scope* scope);
  Flow run_loop(const For& f, Scope* scope, const Value& iterable, size_t depth0);
  void exec_call_block(const CallBlock& c, Scope* scope);
  void assign(const Node& target, const Value& v, Scope* scope);

  Value eval(const Node& n, Scope* scope);
  void eval_args(const CallArgs& a, Scope* scope, Args& out);
  Value eval_filter(const Filter& f, Scope* scope, const Value* block_input);
  Value eval_call(const Call& c, Scope* scope, const Value* caller);

  const TemplateImpl& t_;
  const Options& opt_;
  Heap heap_;
  size_t steps_ = 0;
  size_t depth_ = 0;
  std::string* out_ = nullptr;
  int line_ = 0;  // of the node being evaluated, for errors
  Scope* root_ = nullptr;  // the template's top-level scope
  std::vector<const void*> printing_;

  friend struct LoopObject;
};

// Slicing: Python's slice.indices for a sequence of `length` items.
struct SliceRange {
  int64_t start, stop, step, count;
};
bool slice_range(const Value& start, const Value& stop, const Value& step, int64_t length, SliceRange& out);

}  // namespace synapse::jinja
