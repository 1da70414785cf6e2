// The evaluator: statements (jinja2/compiler.py's semantics) and expressions.
#include "template/interp.hpp"

#include <limits>

#include <nlohmann/json.hpp>

#include "synapse/error.hpp"
#include "template/builtins.hpp"
#include "template/text.hpp"

namespace synapse::jinja {

Value* Scope::find(std::string_view name) {
  for (Scope* s = this; s; s = s->parent_)
    for (auto& kv : s->vars_)
      if (kv.first == name) return &kv.second;
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  for (auto& kv : vars_) {
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(v));
}

std::string Function::repr(Interp&) { return "<built-in function " + name + ">"; }

Interp::Deeper::Deeper(Interp& interp) : in(interp) {
  if (++in.depth_ > in.opt_.max_depth) {
    --in.depth_;
    fault("nesting deeper than " + std::to_string(in.opt_.max_depth) + " levels (recursion, or nested values)");
  }
}

void Interp::too_many_steps() {
  fault("the template ran more than " + std::to_string(opt_.max_steps) + " steps (a runaway loop?)");
}

void Interp::check_size(size_t bytes) {
  if (bytes > opt_.max_output)
    fault("a string or the output grew past " + std::to_string(opt_.max_output) + " bytes");
}

void Interp::charge_size(const Value& v) {
  if (v.kind == Kind::string)
    step(v.s->size() / 64);
  else if (v.kind == Kind::list)
    step(v.list->items.size());
  else if (v.kind == Kind::dict)
    step(v.dict->items.size());
}

void Interp::charge_string(size_t bytes) {
  check_size(bytes);
  step(bytes / 64);
}

Value Interp::new_list(std::vector<Value> items, bool tuple) {
  step();
  List* l = heap_.make<List>();
  l->items = std::move(items);
  l->tuple = tuple;
  return Value::of(l);
}

Value Interp::new_dict() {
  step();
  return Value::of(heap_.make<Dict>());
}

Value Interp::new_function(const char* name, Value (*fn)(Interp&, Function&, Args&), Value self) {
  step();
  Function* f = heap_.make<Function>();
  f->name = name;
  f->fn = fn;
  f->self = std::move(self);
  return Value::of(f);
}

void Interp::write(std::string_view s) {
  out_->append(s);
  check_size(out_->size());
  step(s.size() / 64);
}

// A macro, or the caller of a call block, with the scope it was defined in.
struct MacroObject : Object {
  const Macro* def;
  Scope* closure;
  MacroObject(const Macro* d, Scope* c) : def(d), closure(c) {}
  const char* type_name() const override { return "Macro"; }
  bool callable() const override { return true; }
  Value call(Interp& in, Args& args) override { return in.call_macro(*def, closure, args); }
  std::string repr(Interp&) override { return "<Macro " + string_repr(def->name) + ">"; }
  Value attr(Interp& in, std::string_view name) override {
    if (name == "name") return Value::string(def->name);
    if (name == "arguments") {
      std::vector<Value> ps;
      for (const auto& p : def->params) ps.push_back(Value::string(p));
      return in.new_list(std::move(ps), true);
    }
    if (name == "catch_kwargs") return Value::boolean(def->uses_kwargs);
    if (name == "catch_varargs") return Value::boolean(def->uses_varargs);
    if (name == "caller") return Value::boolean(def->uses_caller);
    return Object::attr(in, name);
  }
};

// The `loop` of a for loop (Jinja2's LoopContext).
struct LoopObject : Object {
  const For* node;
  Scope* outer;  // where the loop is, for loop(...) of a recursive loop
  std::vector<Value> items;
  size_t index0 = 0;
  size_t depth0 = 0;
  bool changed_before = false;
  std::vector<Value> last_changed;

  const char* type_name() const override { return "LoopContext"; }
  bool callable() const override { return true; }
  Value call(Interp& in, Args& args) override {
    if (!node->recursive) fault("The loop must have the 'recursive' marker to be called recursively.");
    if (args.pos.size() != 1 || !args.kw.empty()) fault("loop() takes one iterable");
    return in.call_loop(*this, args.pos[0]);
  }
  std::string repr(Interp&) override {
    return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items.size()) + ">";
  }
  Value attr(Interp& in, std::string_view name) override {
    const auto n = static_cast<int64_t>(items.size());
    const auto i = static_cast<int64_t>(index0);
    if (name == "index") return Value::integer(i + 1);
    if (name == "index0") return Value::integer(i);
    if (name == "revindex") return Value::integer(n - i);
    if (name == "revindex0") return Value::integer(n - i - 1);
    if (name == "first") return Value::boolean(i == 0);
    if (name == "last") return Value::boolean(i + 1 == n);
    if (name == "length") return Value::integer(n);
    if (name == "depth") return Value::integer(static_cast<int64_t>(depth0) + 1);
    if (name == "depth0") return Value::integer(static_cast<int64_t>(depth0));
    if (name == "previtem") return i > 0 ? items[index0 - 1] : Value::undefined("there is no previous item");
    if (name == "nextitem") return i + 1 < n ? items[index0 + 1] : Value::undefined("there is no next item");
    if (name == "cycle")
      return in.new_function("cycle", [](Interp&, Function& f, Args& a) -> Value {
        auto* loop = static_cast<LoopObject*>(f.self.obj);
        if (a.pos.empty()) fault("no items for cycling given");
        return a.pos[loop->index0 % a.pos.size()];
      }, Value::of(this));
    if (name == "changed")
      return in.new_function("changed", [](Interp& in2, Function& f, Args& a) -> Value {
        auto* loop = static_cast<LoopObject*>(f.self.obj);
        bool same = loop->changed_before && loop->last_changed.size() == a.pos.size();
        for (size_t k = 0; same && k < a.pos.size(); ++k) same = equals(in2, loop->last_changed[k], a.pos[k]);
        loop->changed_before = true;
        loop->last_changed = a.pos;
        return Value::boolean(!same);
      }, Value::of(this));
    return Object::attr(in, name);
  }
};

Value Interp::from_json(const nlohmann::ordered_json& j, size_t depth) {
  if (depth > opt_.max_depth) fault("the context nests deeper than " + std::to_string(opt_.max_depth) + " levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Value::real(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::real(j.get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      List* l = heap_.make<List>();
      l->items.reserve(j.size());
      for (const auto& x : j) l->items.push_back(from_json(x, depth + 1));
      return Value::of(l);
    }
    case nlohmann::json::value_t::object: {
      Dict* d = heap_.make<Dict>();
      for (const auto& kv : j.items()) d->set(kv.key(), from_json(kv.value(), depth + 1));
      return Value::of(d);
    }
    default: return Value::none();  // binary, discarded
  }
}

std::string Interp::render(const nlohmann::ordered_json& context) {
  if (!context.is_object() && !context.is_null())
    throw Error(Errc::invalid_argument, "template: the context must be a JSON object, not " +
                                            std::string(context.type_name()));
  std::string out;
  out_ = &out;
  try {
    Scope* globals = heap_.make<Scope>(nullptr);
    define_globals(*this, *globals);
    Scope* root = root_ = heap_.make<Scope>(globals);
    if (context.is_object())
      for (const auto& kv : context.items()) root->set(kv.key(), from_json(kv.value(), 1));
    exec(t_.body, root);
  } catch (const Fault& f) {
    throw Error(Errc::invalid_argument, "template: line " + std::to_string(line_) + ": " + f.message);
  } catch (const Raised& r) {
    throw Error(Errc::invalid_argument, r.message);
  }
  return out;
}

// ---------------------------------------------------------------- statements

Interp::Flow Interp::exec(const Body& body, Scope* scope) {
  for (const auto& n : body) {
    const Flow f = exec(*n, scope);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

std::string Interp::capture(const Body& body, Scope* scope, Flow* flow) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    const Flow f = exec(body, scope);
    if (flow) *flow = f;
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

void Interp::assign(const Node& target, const Value& v, Scope* scope) {
  if (target.kind == NodeKind::name) {
    scope->set(static_cast<const Name&>(target).name, v);
    return;
  }
  if (target.kind == NodeKind::nsref) {
    const auto& r = static_cast<const NSRef&>(target);
    Value* ns = scope->find(r.name);
    if (!ns || ns->kind != Kind::object || std::string_view(ns->obj->type_name()) != "Namespace")
      fault("cannot assign attribute on non-namespace object");
    static_cast<Namespace*>(ns->obj)->attrs.set(r.attr, v);
    return;
  }
  // A tuple of targets: unpack.
  const auto& targets = static_cast<const Seq&>(target).items;
  const std::vector<Value> items = iterate(v);
  if (items.size() != targets.size()) {
    if (items.size() > targets.size())
      fault("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
    fault("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
          std::to_string(items.size()) + ")");
  }
  for (size_t k = 0; k < items.size(); ++k) assign(*targets[k], items[k], scope);
}

// Each iteration has a scope of its own (Jinja2: what the body sets lasts
// one iteration); the filter clause sees the loop target only. The else
// block runs when no iteration ran its body to the end (Jinja2 clears its
// flag at the end of the body, so a loop that only broke or continued runs
// it too).
Interp::Flow Interp::run_loop(const For& f, Scope* scope, const Value& iterable, size_t depth0) {
  std::vector<Value> items = iterate(iterable);
  if (f.test) {
    std::vector<Value> kept;
    Scope* test_scope = heap_.make<Scope>(scope);
    for (auto& item : items) {
      step();
      assign(*f.target, item, test_scope);
      if (truthy(eval(*f.test, test_scope))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(f.otherwise, heap_.make<Scope>(scope));
    return Flow::normal;
  }
  bool completed = false;
  LoopObject* loop = heap_.make<LoopObject>();
  loop->node = &f;
  loop->outer = scope;
  loop->items = std::move(items);
  loop->depth0 = depth0;
  for (size_t k = 0; k < loop->items.size(); ++k) {
    step();
    loop->index0 = k;
    Scope* loop_scope = heap_.make<Scope>(scope);
    loop_scope->set("loop", Value::of(loop));
    assign(*f.target, loop->items[k], loop_scope);
    const Flow flow = exec(f.body, loop_scope);
    if (flow == Flow::break_) break;
    completed = completed || flow == Flow::normal;
  }
  if (!completed) exec(f.otherwise, heap_.make<Scope>(scope));
  return Flow::normal;
}

Interp::Flow Interp::exec_for(const For& f, Scope* scope) {
  const Value iterable = eval(*f.iter, scope);
  return run_loop(f, scope, iterable, 0);
}

Value Interp::call_loop(LoopObject& loop, const Value& iterable) {
  Deeper guard(*this);
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    run_loop(*loop.node, loop.outer, iterable, loop.depth0 + 1);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return Value::string(std::move(buf));
}

Value Interp::call_macro(const Macro& m, Scope* closure, Args& args) {
  Deeper guard(*this);
  step();
  Scope* s = heap_.make<Scope>(closure);
  const size_t np = m.params.size();
  const size_t npos = std::min(args.pos.size(), np);
  std::vector<bool> have(np, false);
  for (size_t k = 0; k < npos; ++k) {
    s->set(m.params[k], args.pos[k]);
    have[k] = true;
  }
  std::vector<std::pair<std::string, Value>> rest = args.kw;
  for (size_t k = npos; k < np; ++k) {
    for (auto it = rest.begin(); it != rest.end(); ++it) {
      if (it->first == m.params[k]) {
        s->set(m.params[k], it->second);
        have[k] = true;
        rest.erase(it);
        break;
      }
    }
  }
  if (m.uses_caller) {
    Value caller = Value::undefined("No caller defined");
    for (auto it = rest.begin(); it != rest.end(); ++it) {
      if (it->first == "caller") {
        caller = it->second;
        rest.erase(it);
        break;
      }
    }
    s->set("caller", caller);
  }
  if (m.uses_kwargs) {
    Value kw = new_dict();
    for (auto& kv : rest) kw.dict->set(kv.first, kv.second);
    s->set("kwargs", kw);
  } else if (!rest.empty()) {
    if (rest.front().first == "caller")
      fault("macro '" + m.name + "' was invoked with two values for the special caller argument");
    fault("macro '" + m.name + "' takes no keyword argument '" + rest.front().first + "'");
  }
  if (m.uses_varargs) {
    std::vector<Value> extra;
    for (size_t k = np; k < args.pos.size(); ++k) extra.push_back(args.pos[k]);
    s->set("varargs", new_list(std::move(extra), true));
  } else if (args.pos.size() > np) {
    fault("macro '" + m.name + "' takes not more than " + std::to_string(np) + " argument(s)");
  }
  const size_t first_default = np - m.defaults.size();
  for (size_t k = 0; k < np; ++k) {
    if (have[k]) continue;
    if (k >= first_default)
      s->set(m.params[k], eval(*m.defaults[k - first_default], s));
    else
      s->set(m.params[k], Value::undefined("parameter '" + m.params[k] + "' was not provided"));
  }
  return Value::string(capture(m.body, s));
}

void Interp::exec_call_block(const CallBlock& c, Scope* scope) {
  MacroObject* caller = heap_.make<MacroObject>(&c.caller, scope);
  const Value callerv = Value::of(caller);
  const Value r = eval_call(static_cast<const Call&>(*c.call), scope, &callerv);
  write(to_str(*this, r));
}

Interp::Flow Interp::exec(const Node& n, Scope* scope) {
  step();
  line_ = n.line;
  switch (n.kind) {
    case NodeKind::output:
      for (const auto& part : static_cast<const Output&>(n).parts) {
        if (part->kind == NodeKind::text) {
          write(static_cast<const Text&>(*part).text);
        } else {
          const Value v = eval(*part, scope);
          if (v.kind == Kind::string)
            write(v.str());
          else
            write(to_str(*this, v));
        }
      }
      return Flow::normal;
    case NodeKind::for_: return exec_for(static_cast<const For&>(n), scope);
    case NodeKind::if_: {
      const auto& i = static_cast<const If&>(n);
      for (const auto& br : i.branches) {
        line_ = br.first->line;
        if (truthy(eval(*br.first, scope))) return exec(br.second, scope);
      }
      return exec(i.otherwise, scope);
    }
    case NodeKind::macro: {
      const auto& m = static_cast<const Macro&>(n);
      scope->set(m.name, Value::of(heap_.make<MacroObject>(&m, scope)));
      return Flow::normal;
    }
    case NodeKind::call_block: exec_call_block(static_cast<const CallBlock&>(n), scope); return Flow::normal;
    case NodeKind::filter_block: {
      const auto& f = static_cast<const FilterBlock&>(n);
      Flow flow = Flow::normal;
      const Value body = Value::string(capture(f.body, heap_.make<Scope>(scope), &flow));
      if (flow != Flow::normal) return flow;
      const Value r = eval_filter(static_cast<const Filter&>(*f.filter), scope, &body);
      write(to_str(*this, r));
      return Flow::normal;
    }
    case NodeKind::set: {
      const auto& s = static_cast<const Set&>(n);
      assign(*s.target, eval(*s.value, scope), scope);
      return Flow::normal;
    }
    case NodeKind::set_block: {
      const auto& s = static_cast<const SetBlock&>(n);
      Flow flow = Flow::normal;
      Value v = Value::string(capture(s.body, heap_.make<Scope>(scope), &flow));
      if (flow != Flow::normal) return flow;
      if (s.filter) v = eval_filter(static_cast<const Filter&>(*s.filter), scope, &v);
      assign(*s.target, v, scope);
      return Flow::normal;
    }
    case NodeKind::with: {
      const auto& w = static_cast<const With&>(n);
      std::vector<Value> values;
      for (const auto& v : w.values) values.push_back(eval(*v, scope));
      Scope* inner = heap_.make<Scope>(scope);
      for (size_t k = 0; k < values.size(); ++k) assign(*w.targets[k], values[k], inner);
      return exec(w.body, inner);
    }
    case NodeKind::scope: {
      const auto& b = static_cast<const ScopeBlock&>(n);
      exec(b.body, heap_.make<Scope>(b.top_level ? root_ : scope));
      return Flow::normal;
    }
    case NodeKind::break_: return Flow::break_;
    case NodeKind::continue_: return Flow::continue_;
    default: fault("internal error: not a statement");
  }
}

// --------------------------------------------------------------- expressions

void Interp::eval_args(const CallArgs& a, Scope* scope, Args& out) {
  for (const auto& x : a.args) out.pos.push_back(eval(*x, scope));
  if (a.dyn_args) {
    for (Value& v : iterate(eval(*a.dyn_args, scope))) out.pos.push_back(std::move(v));
  }
  for (const auto& kv : a.kwargs) out.kw.emplace_back(kv.first, eval(*kv.second, scope));
  if (a.dyn_kwargs) {
    const Value d = eval(*a.dyn_kwargs, scope);
    if (d.kind != Kind::dict) fault(std::string("argument after ** must be a mapping, not ") + type_name(d));
    for (const auto& kv : d.dict->items) {
      if (!kv.first.is_string()) fault("keywords must be strings");
      out.kw.emplace_back(kv.first.str(), kv.second);
    }
  }
}

Value Interp::eval_call(const Call& c, Scope* scope, const Value* caller) {
  const Value fn = eval(*c.fn, scope);
  Args args;
  eval_args(c.a, scope, args);
  if (caller) args.kw.emplace_back("caller", *caller);
  line_ = c.line;
  return call(fn, args);
}

Value Interp::eval_filter(const Filter& f, Scope* scope, const Value* block_input) {
  Value input;
  if (!f.obj)
    input = *block_input;
  else if (f.obj->kind == NodeKind::filter)
    input = eval_filter(static_cast<const Filter&>(*f.obj), scope, block_input);
  else
    input = eval(*f.obj, scope);
  Args args;
  eval_args(f.a, scope, args);
  line_ = f.line;
  if (!f.fn) fault("No filter named '" + f.name + "' found.");
  charge_size(input);
  return f.fn(*this, input, args);
}

namespace {

bool compare(Interp& in, CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::eq: return equals(in, a, b);
    case CmpOp::ne: return !equals(in, a, b);
    case CmpOp::lt: return less(in, a, b);
    case CmpOp::le: return less(in, a, b) || equals(in, a, b);
    case CmpOp::gt: return less(in, b, a);
    case CmpOp::ge: return less(in, b, a) || equals(in, a, b);
    case CmpOp::in: return in.contains(b, a);
    case CmpOp::notin: return !in.contains(b, a);
  }
  return false;
}

}  // namespace

Value Interp::eval(const Node& n, Scope* scope) {
  step();
  line_ = n.line;
  switch (n.kind) {
    case NodeKind::constant: return static_cast<const Constant&>(n).value;
    case NodeKind::name: {
      const auto& name = static_cast<const Name&>(n).name;
      if (const Value* v = scope->find(name)) return *v;
      return Value::undefined("'" + name + "' is undefined");
    }
    case NodeKind::getattr: {
      const auto& g = static_cast<const Getattr&>(n);
      const Value obj = eval(*g.obj, scope);
      line_ = n.line;
      return getattr(obj, g.attr);
    }
    case NodeKind::getitem: {
      const auto& g = static_cast<const Getitem&>(n);
      const Value obj = eval(*g.obj, scope);
      if (g.arg->kind != NodeKind::slice) {
        const Value key = eval(*g.arg, scope);
        line_ = n.line;
        return getitem(obj, key);
      }
      const auto& sl = static_cast<const Slice&>(*g.arg);
      const Value a = sl.start ? eval(*sl.start, scope) : Value::none();
      const Value b = sl.stop ? eval(*sl.stop, scope) : Value::none();
      const Value c = sl.step ? eval(*sl.step, scope) : Value::none();
      line_ = n.line;
      return slice(obj, a, b, c);
    }
    case NodeKind::call: return eval_call(static_cast<const Call&>(n), scope, nullptr);
    case NodeKind::filter: return eval_filter(static_cast<const Filter&>(n), scope, nullptr);
    case NodeKind::test: {
      const auto& t = static_cast<const Test&>(n);
      const Value v = eval(*t.obj, scope);
      Args args;
      eval_args(t.a, scope, args);
      line_ = n.line;
      if (!t.fn) fault("No test named '" + t.name + "' found.");
      charge_size(v);
      return Value::boolean(t.fn(*this, v, args));
    }
    case NodeKind::not_: return Value::boolean(!truthy(eval(*static_cast<const Unary&>(n).operand, scope)));
    case NodeKind::neg:
    case NodeKind::pos: {
      const Value v = eval(*static_cast<const Unary&>(n).operand, scope);
      if (v.is_undefined()) undefined_error(v);
      const bool neg = n.kind == NodeKind::neg;
      if (v.kind == Kind::real) return Value::real(neg ? -v.f : v.f);
      if (v.is_int()) {
        if (neg && v.as_int() == std::numeric_limits<int64_t>::min()) fault("integer overflow");
        return Value::integer(neg ? -v.as_int() : v.as_int());
      }
      fault(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" + type_name(v) + "'");
    }
    case NodeKind::binop: {
      const auto& b = static_cast<const Binary&>(n);
      const Value x = eval(*b.left, scope);
      const Value y = eval(*b.right, scope);
      line_ = n.line;
      return arith(b.op, x, y);
    }
    case NodeKind::and_: {
      const auto& b = static_cast<const Binary&>(n);
      Value x = eval(*b.left, scope);
      return truthy(x) ? eval(*b.right, scope) : x;
    }
    case NodeKind::or_: {
      const auto& b = static_cast<const Binary&>(n);
      Value x = eval(*b.left, scope);
      return truthy(x) ? x : eval(*b.right, scope);
    }
    case NodeKind::concat: {
      std::string s;
      for (const auto& p : static_cast<const Concat&>(n).parts) {
        const Value v = eval(*p, scope);
        s += v.kind == Kind::string ? v.str() : to_str(*this, v);
        check_size(s.size());
      }
      charge_string(s.size());
      return Value::string(std::move(s));
    }
    case NodeKind::compare: {
      const auto& c = static_cast<const Compare&>(n);
      Value left = eval(*c.first, scope);
      for (const auto& [op, expr] : c.rest) {
        Value right = eval(*expr, scope);
        line_ = n.line;
        if (!compare(*this, op, left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case NodeKind::condexpr: {
      const auto& c = static_cast<const CondExpr&>(n);
      if (truthy(eval(*c.test, scope))) return eval(*c.then, scope);
      if (c.otherwise) return eval(*c.otherwise, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(n.line) +
                              " evaluated to false and no else section was defined.");
    }
    case NodeKind::list:
    case NodeKind::tuple: {
      std::vector<Value> items;
      for (const auto& x : static_cast<const Seq&>(n).items) items.push_back(eval(*x, scope));
      return new_list(std::move(items), n.kind == NodeKind::tuple);
    }
    case NodeKind::dict: {
      Value d = new_dict();
      for (const auto& [k, v] : static_cast<const DictLit&>(n).items) {
        Value key = eval(*k, scope);
        d.dict->set(std::move(key), eval(*v, scope));
      }
      return d;
    }
    default: fault("internal error: not an expression");
  }
}

}  // namespace synapse::jinja
