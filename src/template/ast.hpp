// The parsed template: Jinja2's node types (jinja2/nodes.py), those the
// parser (parser.cpp) makes and the evaluator (interp.cpp) runs.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.hpp"

namespace synapse::jinja {

enum class NodeKind : uint8_t {
  // expressions
  constant, name, getattr, getitem, slice, call, filter, test, not_, neg, pos, binop, and_, or_, concat, compare,
  condexpr, list, tuple, dict, nsref,
  // statements
  text, output, for_, if_, macro, call_block, filter_block, set, set_block, with, break_, continue_, scope,
};

struct Node {
  NodeKind kind;
  int line;
  Node(NodeKind k, int l) : kind(k), line(l) {}
  virtual ~Node() = default;
};
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

using FilterFn = Value (*)(Interp&, Value&, Args&);
using TestFn = bool (*)(Interp&, const Value&, Args&);

struct Constant : Node {
  Value value;  // none, bool, int, float or string
  Constant(int l, Value v) : Node(NodeKind::constant, l), value(std::move(v)) {}
};
struct Name : Node {
  std::string name;
  Name(int l, std::string n) : Node(NodeKind::name, l), name(std::move(n)) {}
};
struct Getattr : Node {  // obj.attr
  NodePtr obj;
  std::string attr;
  Getattr(int l, NodePtr o, std::string a) : Node(NodeKind::getattr, l), obj(std::move(o)), attr(std::move(a)) {}
};
struct Getitem : Node {  // obj[arg]; arg may be a Slice
  NodePtr obj, arg;
  Getitem(int l, NodePtr o, NodePtr a) : Node(NodeKind::getitem, l), obj(std::move(o)), arg(std::move(a)) {}
};
struct Slice : Node {  // start:stop:step, each may be null
  NodePtr start, stop, step;
  explicit Slice(int l) : Node(NodeKind::slice, l) {}
};
struct CallArgs {
  std::vector<NodePtr> args;
  std::vector<std::pair<std::string, NodePtr>> kwargs;
  NodePtr dyn_args, dyn_kwargs;  // *args, **kwargs
};
struct Call : Node {
  NodePtr fn;
  CallArgs a;
  Call(int l, NodePtr f) : Node(NodeKind::call, l), fn(std::move(f)) {}
};
// obj|name(args); obj is null in a filter block (the block's body is the
// input). fn is null for a filter unknown when parsed inside an {% if %}
// (Jinja2 reports it only if it runs).
struct Filter : Node {
  NodePtr obj;
  std::string name;
  CallArgs a;
  FilterFn fn = nullptr;
  Filter(int l, NodePtr o, std::string n) : Node(NodeKind::filter, l), obj(std::move(o)), name(std::move(n)) {}
};
struct Test : Node {  // obj is name(args)
  NodePtr obj;
  std::string name;
  CallArgs a;
  TestFn fn = nullptr;
  Test(int l, NodePtr o, std::string n) : Node(NodeKind::test, l), obj(std::move(o)), name(std::move(n)) {}
};
struct Unary : Node {  // not, -, +
  NodePtr operand;
  Unary(NodeKind k, int l, NodePtr o) : Node(k, l), operand(std::move(o)) {}
};
enum class BinOp : uint8_t { add, sub, mul, div, floordiv, mod, pow };
struct Binary : Node {  // binop (op), and_, or_
  BinOp op = BinOp::add;
  NodePtr left, right;
  Binary(NodeKind k, int l, NodePtr a, NodePtr b) : Node(k, l), left(std::move(a)), right(std::move(b)) {}
};
struct Concat : Node {  // a ~ b ~ c
  std::vector<NodePtr> parts;
  explicit Concat(int l) : Node(NodeKind::concat, l) {}
};
enum class CmpOp : uint8_t { eq, ne, lt, le, gt, ge, in, notin };
struct Compare : Node {  // first op1 x1 op2 x2 ... (chained, as Python)
  NodePtr first;
  std::vector<std::pair<CmpOp, NodePtr>> rest;
  Compare(int l, NodePtr f) : Node(NodeKind::compare, l), first(std::move(f)) {}
};
struct CondExpr : Node {  // then if test else otherwise (otherwise may be null)
  NodePtr test, then, otherwise;
  explicit CondExpr(int l) : Node(NodeKind::condexpr, l) {}
};
struct Seq : Node {  // list or tuple literal, or a tuple assignment target
  std::vector<NodePtr> items;
  Seq(NodeKind k, int l) : Node(k, l) {}
};
struct DictLit : Node {
  std::vector<std::pair<NodePtr, NodePtr>> items;
  explicit DictLit(int l) : Node(NodeKind::dict, l) {}
};
struct NSRef : Node {  // assignment target ns.attr
  std::string name, attr;
  NSRef(int l, std::string n, std::string a) : Node(NodeKind::nsref, l), name(std::move(n)), attr(std::move(a)) {}
};

// Statements.
struct Text : Node {
  std::string text;
  Text(int l, std::string t) : Node(NodeKind::text, l), text(std::move(t)) {}
};
struct Output : Node {  // template data and {{ expressions }}
  std::vector<NodePtr> parts;
  explicit Output(int l) : Node(NodeKind::output, l) {}
};
struct For : Node {
  NodePtr target, iter, test;  // test: for x in y if test (may be null)
  Body body, otherwise;
  bool recursive = false;
  explicit For(int l) : Node(NodeKind::for_, l) {}
};
struct If : Node {
  std::vector<std::pair<NodePtr, Body>> branches;  // if, elif, ...
  Body otherwise;
  explicit If(int l) : Node(NodeKind::if_, l) {}
};
// A macro, or the body of a call block (the caller). defaults[i] belongs to
// params[params.size() - defaults.size() + i].
struct Macro : Node {
  std::string name;
  std::vector<std::string> params;
  std::vector<NodePtr> defaults;
  Body body;
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
  Macro(int l, std::string n) : Node(NodeKind::macro, l), name(std::move(n)) {}
};
struct CallBlock : Node {  // {% call(params) fn(args) %}body{% endcall %}
  NodePtr call;
  Macro caller;
  explicit CallBlock(int l) : Node(NodeKind::call_block, l), caller(l, "caller") {}
};
struct FilterBlock : Node {  // {% filter f|g %}body{% endfilter %}
  NodePtr filter;  // Filter nodes; the innermost has a null obj
  Body body;
  explicit FilterBlock(int l) : Node(NodeKind::filter_block, l) {}
};
struct Set : Node {  // {% set target = value %}
  NodePtr target, value;
  explicit Set(int l) : Node(NodeKind::set, l) {}
};
struct SetBlock : Node {  // {% set target | filter %}body{% endset %}
  NodePtr target, filter;
  Body body;
  explicit SetBlock(int l) : Node(NodeKind::set_block, l) {}
};
struct With : Node {
  std::vector<NodePtr> targets, values;
  Body body;
  explicit With(int l) : Node(NodeKind::with, l) {}
};
// A body with a scope of its own: {% generation %}, and {% block %}, whose
// body sees the template's top-level names only, unless it is "scoped".
struct ScopeBlock : Node {
  Body body;
  bool top_level = false;
  explicit ScopeBlock(int l) : Node(NodeKind::scope, l) {}
};

}  // namespace synapse::jinja
