#include "template/parser.hpp"

#include <algorithm>
#include <initializer_list>

#include "template/builtins.hpp"
#include "template/jinja.hpp"
#include "template/lexer.hpp"

namespace synapse::jinja {

namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::data: return "template data / text";
    case Tok::variable_begin: return "begin of print statement";
    case Tok::variable_end: return "end of print statement";
    case Tok::block_begin: return "begin of statement block";
    case Tok::block_end: return "end of statement block";
    case Tok::string: return "string";
    case Tok::integer: return "integer";
    case Tok::real: return "float";
    case Tok::eof: return "end of template";
    case Tok::name:
    case Tok::op: return t.text;
  }
  return "?";
}

// Calls fn(child, soft) for every child node of n, soft telling whether the
// child is in a "soft frame" (Jinja2's compiler: the test and bodies of an
// if, an inline if), where an unknown filter or test is reported only when
// it runs. Blocks with a frame of their own (for bodies, macros, call,
// filter and set blocks) are not soft.
template <typename F>
void for_each_child(Node& n, bool soft, F&& fn) {
  auto each = [&](Body& body, bool s) {
    for (auto& c : body) fn(*c, s);
  };
  auto opt = [&](NodePtr& p, bool s) {
    if (p) fn(*p, s);
  };
  auto args = [&](CallArgs& a, bool s) {
    for (auto& x : a.args) fn(*x, s);
    for (auto& kv : a.kwargs) fn(*kv.second, s);
    opt(a.dyn_args, s);
    opt(a.dyn_kwargs, s);
  };
  switch (n.kind) {
    case NodeKind::constant:
    case NodeKind::name:
    case NodeKind::nsref:
    case NodeKind::text:
    case NodeKind::break_:
    case NodeKind::continue_: break;
    case NodeKind::getattr: fn(*static_cast<Getattr&>(n).obj, soft); break;
    case NodeKind::getitem: {
      auto& g = static_cast<Getitem&>(n);
      fn(*g.obj, soft);
      fn(*g.arg, soft);
      break;
    }
    case NodeKind::slice: {
      auto& s = static_cast<Slice&>(n);
      opt(s.start, soft);
      opt(s.stop, soft);
      opt(s.step, soft);
      break;
    }
    case NodeKind::call: {
      auto& c = static_cast<Call&>(n);
      fn(*c.fn, soft);
      args(c.a, soft);
      break;
    }
    case NodeKind::filter: {
      auto& f = static_cast<Filter&>(n);
      opt(f.obj, soft);
      args(f.a, soft);
      break;
    }
    case NodeKind::test: {
      auto& t = static_cast<Test&>(n);
      fn(*t.obj, soft);
      args(t.a, soft);
      break;
    }
    case NodeKind::not_:
    case NodeKind::neg:
    case NodeKind::pos: fn(*static_cast<Unary&>(n).operand, soft); break;
    case NodeKind::binop:
    case NodeKind::and_:
    case NodeKind::or_: {
      auto& b = static_cast<Binary&>(n);
      fn(*b.left, soft);
      fn(*b.right, soft);
      break;
    }
    case NodeKind::concat:
      for (auto& p : static_cast<Concat&>(n).parts) fn(*p, soft);
      break;
    case NodeKind::compare: {
      auto& c = static_cast<Compare&>(n);
      fn(*c.first, soft);
      for (auto& r : c.rest) fn(*r.second, soft);
      break;
    }
    case NodeKind::condexpr: {
      auto& c = static_cast<CondExpr&>(n);
      fn(*c.test, true);
      fn(*c.then, true);
      opt(c.otherwise, true);
      break;
    }
    case NodeKind::list:
    case NodeKind::tuple:
      for (auto& x : static_cast<Seq&>(n).items) fn(*x, soft);
      break;
    case NodeKind::dict:
      for (auto& kv : static_cast<DictLit&>(n).items) {
        fn(*kv.first, soft);
        fn(*kv.second, soft);
      }
      break;
    case NodeKind::output:
      for (auto& p : static_cast<Output&>(n).parts) fn(*p, soft);
      break;
    case NodeKind::for_: {
      auto& f = static_cast<For&>(n);
      fn(*f.target, false);
      fn(*f.iter, soft);
      opt(f.test, false);
      each(f.body, false);
      each(f.otherwise, false);
      break;
    }
    case NodeKind::if_: {
      auto& i = static_cast<If&>(n);
      for (auto& br : i.branches) {
        fn(*br.first, true);
        each(br.second, true);
      }
      each(i.otherwise, true);
      break;
    }
    case NodeKind::macro: {
      auto& m = static_cast<Macro&>(n);
      for (auto& d : m.defaults) fn(*d, false);
      each(m.body, false);
      break;
    }
    case NodeKind::call_block: {
      auto& c = static_cast<CallBlock&>(n);
      fn(*c.call, soft);
      fn(c.caller, false);
      break;
    }
    case NodeKind::filter_block: {
      auto& f = static_cast<FilterBlock&>(n);
      fn(*f.filter, false);
      each(f.body, false);
      break;
    }
    case NodeKind::set: {
      auto& s = static_cast<Set&>(n);
      fn(*s.target, soft);
      fn(*s.value, soft);
      break;
    }
    case NodeKind::set_block: {
      auto& s = static_cast<SetBlock&>(n);
      fn(*s.target, false);
      opt(s.filter, false);
      each(s.body, false);
      break;
    }
    case NodeKind::with: {
      auto& w = static_cast<With&>(n);
      for (auto& t : w.targets) fn(*t, false);
      for (auto& v : w.values) fn(*v, soft);
      each(w.body, false);
      break;
    }
    case NodeKind::scope: each(static_cast<ScopeBlock&>(n).body, false); break;
  }
}

// Looks the filters and tests up (see for_each_child for `soft`).
void resolve(Node& n, bool soft) {
  if (n.kind == NodeKind::filter) {
    auto& f = static_cast<Filter&>(n);
    f.fn = find_filter(f.name);
    if (!f.fn && !soft) syntax_error(n.line, "No filter named '" + f.name + "'.");
  } else if (n.kind == NodeKind::test) {
    auto& t = static_cast<Test&>(n);
    t.fn = find_test(t.name);
    if (!t.fn && !soft) syntax_error(n.line, "No test named '" + t.name + "'.");
  }
  for_each_child(n, soft, [](Node& c, bool s) { resolve(c, s); });
}

// Whether the body refers to `name` anywhere (Jinja2's find_undeclared for
// caller, varargs and kwargs of a macro).
bool refers_to(Node& n, const std::string& name) {
  if (n.kind == NodeKind::name && static_cast<Name&>(n).name == name) return true;
  bool found = false;
  for_each_child(n, false, [&](Node& c, bool) { found = found || refers_to(c, name); });
  return found;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const Options& opt) : toks_(std::move(tokens)), opt_(opt) {}

  Body parse() {
    Body body = subparse({});
    for (auto& n : body) resolve(*n, false);
    return body;
  }

 private:
  // Nesting guard: statements and expressions within each other.
  struct Deeper {
    Parser& p;
    explicit Deeper(Parser& parser) : p(parser) {
      if (++p.depth_ > p.opt_.max_depth)
        syntax_error(p.cur().line, "the template nests deeper than " + std::to_string(p.opt_.max_depth) + " levels");
    }
    ~Deeper() { --p.depth_; }
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& look() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
  Token next() {
    Token t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool is_name(const char* v) const { return cur().type == Tok::name && cur().text == v; }
  bool is_op(const char* v) const { return cur().type == Tok::op && cur().text == v; }
  bool skip_name(const char* v) {
    if (!is_name(v)) return false;
    next();
    return true;
  }
  bool skip_op(const char* v) {
    if (!is_op(v)) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const std::string& msg) const { syntax_error(cur().line, msg); }
  [[noreturn]] void unexpected(const std::string& what) const {
    if (cur().type == Tok::eof) fail("unexpected end of template, expected '" + what + "'.");
    fail("expected token '" + what + "', got '" + describe(cur()) + "'");
  }
  Token expect(Tok type, const char* what) {
    if (cur().type != type) unexpected(what);
    return next();
  }
  Token expect_name(const char* v) {
    if (!is_name(v)) unexpected(std::string("name:") + v);
    return next();
  }
  Token expect_op(const char* v) {
    if (!is_op(v)) unexpected(v);
    return next();
  }

  // Statements up to one of `ends` (a name right after "{%"), which is left
  // as the current token.
  Body subparse(std::initializer_list<const char*> ends) {
    Body body;
    std::unique_ptr<Output> out;
    auto flush = [&] {
      if (out) body.push_back(std::move(out));
      out.reset();
    };
    auto add = [&](NodePtr n) {
      if (!out) out = std::make_unique<Output>(n->line);
      out->parts.push_back(std::move(n));
    };
    while (cur().type != Tok::eof) {
      const Token& t = cur();
      if (t.type == Tok::data) {
        add(std::make_unique<Text>(t.line, t.text));
        next();
      } else if (t.type == Tok::variable_begin) {
        next();
        add(parse_tuple(false, true, {}, false));
        expect(Tok::variable_end, "end of print statement");
      } else if (t.type == Tok::block_begin) {
        flush();
        next();
        for (const char* e : ends)
          if (is_name(e)) return body;
        body.push_back(parse_statement());
        expect(Tok::block_end, "end of statement block");
      } else {
        fail("unexpected '" + describe(t) + "'");
      }
    }
    flush();
    return body;
  }

  // The body of a block statement: "%}" then statements up to one of `ends`;
  // drop_needle consumes the end tag's name.
  Body parse_statements(std::initializer_list<const char*> ends, bool drop_needle) {
    skip_op(":");
    expect(Tok::block_end, "end of statement block");
    Body body = subparse(ends);
    if (cur().type == Tok::eof) {
      std::string want;
      for (const char* e : ends) want += std::string(want.empty() ? "" : " or ") + "'" + e + "'";
      fail("Unexpected end of template. Jinja was looking for the following tags: " + want + ".");
    }
    if (drop_needle) next();
    return body;
  }

  NodePtr parse_statement() {
    Deeper guard(*this);
    const Token& t = cur();
    if (t.type != Tok::name) fail("tag name expected");
    const std::string& w = t.text;
    if (w == "for") return parse_for();
    if (w == "if") return parse_if();
    if (w == "set") return parse_set();
    if (w == "macro") return parse_macro();
    if (w == "call") return parse_call_block();
    if (w == "filter") return parse_filter_block();
    if (w == "with") return parse_with();
    if (w == "print") {
      auto out = std::make_unique<Output>(next().line);
      while (cur().type != Tok::block_end) {
        if (!out->parts.empty()) expect_op(",");
        out->parts.push_back(parse_expression(true));
      }
      return out;
    }
    if (w == "break" || w == "continue") {
      if (loops_ == 0) fail("'" + w + "' outside loop");
      const Token k = next();
      return std::make_unique<Node>(k.text == "break" ? NodeKind::break_ : NodeKind::continue_, k.line);
    }
    if (w == "generation") {  // transformers' AssistantTracker: renders its body
      auto s = std::make_unique<ScopeBlock>(next().line);
      const int saved = loops_;
      loops_ = 0;
      s->body = parse_statements({"endgeneration"}, true);
      loops_ = saved;
      return s;
    }
    if (w == "block") {  // a template without a parent renders its blocks in place
      auto s = std::make_unique<ScopeBlock>(next().line);
      const std::string name = expect(Tok::name, "name").text;
      s->top_level = !skip_name("scoped");
      skip_name("required");
      const int saved = loops_;
      loops_ = 0;
      s->body = parse_statements({"endblock"}, true);
      loops_ = saved;
      skip_name(name.c_str());
      return s;
    }
    if (w == "extends" || w == "include" || w == "import" || w == "from" || w == "autoescape")
      fail("the '" + w + "' tag is not supported (a chat template is one file, rendered without a loader)");
    fail("Encountered unknown tag '" + w + "'.");
  }

  NodePtr parse_for() {
    auto f = std::make_unique<For>(expect_name("for").line);
    f->target = parse_assign_target(true, false, {"in"}, false);
    expect_name("in");
    f->iter = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) f->test = parse_expression(true);
    f->recursive = skip_name("recursive");
    ++loops_;
    f->body = parse_statements({"endfor", "else"}, false);
    --loops_;
    if (next().text != "endfor") f->otherwise = parse_statements({"endfor"}, true);
    return f;
  }

  NodePtr parse_if() {
    auto node = std::make_unique<If>(expect_name("if").line);
    while (true) {
      NodePtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      node->branches.emplace_back(std::move(test), std::move(body));
      const Token t = next();
      if (t.text == "elif") continue;
      if (t.text == "else") node->otherwise = parse_statements({"endif"}, true);
      break;
    }
    return node;
  }

  NodePtr parse_set() {
    const int line = next().line;
    NodePtr target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      auto s = std::make_unique<Set>(line);
      s->target = std::move(target);
      s->value = parse_tuple(false, true, {}, false);
      return s;
    }
    auto s = std::make_unique<SetBlock>(line);
    s->target = std::move(target);
    s->filter = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  NodePtr parse_with() {
    auto w = std::make_unique<With>(next().line);
    while (cur().type != Tok::block_end) {
      if (!w->targets.empty()) expect_op(",");
      w->targets.push_back(parse_assign_target(true, false, {}, false));
      expect_op("=");
      w->values.push_back(parse_expression(true));
    }
    w->body = parse_statements({"endwith"}, true);
    return w;
  }

  void parse_signature(Macro& m) {
    expect_op("(");
    while (!is_op(")")) {
      if (!m.params.empty()) expect_op(",");
      const Token name = expect(Tok::name, "name");
      m.params.push_back(name.text);
      if (skip_op("="))
        m.defaults.push_back(parse_expression(true));
      else if (!m.defaults.empty())
        fail("non-default argument follows default argument");
    }
    expect_op(")");
  }

  void parse_macro_body(Macro& m, const char* end) {
    const int saved = loops_;
    loops_ = 0;
    m.body = parse_statements({end}, true);
    loops_ = saved;
    for (auto& n : m.body) {
      m.uses_caller = m.uses_caller || refers_to(*n, "caller");
      m.uses_varargs = m.uses_varargs || refers_to(*n, "varargs");
      m.uses_kwargs = m.uses_kwargs || refers_to(*n, "kwargs");
    }
  }

  NodePtr parse_macro() {
    const int line = next().line;
    const Token name = expect(Tok::name, "name");
    auto m = std::make_unique<Macro>(line, name.text);
    parse_signature(*m);
    parse_macro_body(*m, "endmacro");
    return m;
  }

  NodePtr parse_call_block() {
    auto c = std::make_unique<CallBlock>(next().line);
    if (is_op("(")) parse_signature(c->caller);
    c->call = parse_expression(true);
    if (c->call->kind != NodeKind::call) syntax_error(c->line, "expected call");
    parse_macro_body(c->caller, "endcall");
    return c;
  }

  NodePtr parse_filter_block() {
    auto f = std::make_unique<FilterBlock>(next().line);
    f->filter = parse_filter(nullptr, true);
    f->body = parse_statements({"endfilter"}, true);
    return f;
  }

  // An assignment target: a name, a tuple of targets, or (with_namespace) ns.attr.
  NodePtr parse_assign_target(bool with_tuple, bool name_only, std::initializer_list<const char*> extra_end,
                              bool with_namespace) {
    NodePtr target;
    if (with_namespace && look().type == Tok::op && look().text == ".") {
      const Token name = expect(Tok::name, "name");
      next();
      const Token attr = expect(Tok::name, "name");
      return std::make_unique<NSRef>(name.line, name.text, attr.text);
    }
    if (name_only) {
      const Token name = expect(Tok::name, "name");
      target = std::make_unique<Name>(name.line, name.text);
    } else {
      target = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    }
    check_assignable(*target);
    return target;
  }

  void check_assignable(const Node& n) const {
    if (n.kind == NodeKind::name) return;
    if (n.kind == NodeKind::tuple) {
      for (const auto& x : static_cast<const Seq&>(n).items) check_assignable(*x);
      return;
    }
    const char* what = n.kind == NodeKind::constant ? "const" : n.kind == NodeKind::list ? "list" : "expression";
    syntax_error(n.line, std::string("can't assign to '") + what + "'");
  }

  NodePtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  NodePtr parse_condexpr() {
    Deeper guard(*this);
    int line = cur().line;
    NodePtr expr1 = parse_or();
    while (skip_name("if")) {
      auto c = std::make_unique<CondExpr>(line);
      c->test = parse_or();
      if (skip_name("else")) c->otherwise = parse_condexpr();
      c->then = std::move(expr1);
      expr1 = std::move(c);
      line = cur().line;
    }
    return expr1;
  }

  NodePtr parse_or() {
    int line = cur().line;
    NodePtr left = parse_and();
    while (skip_name("or")) {
      left = std::make_unique<Binary>(NodeKind::or_, line, std::move(left), parse_and());
      line = cur().line;
    }
    return left;
  }

  NodePtr parse_and() {
    int line = cur().line;
    NodePtr left = parse_not();
    while (skip_name("and")) {
      left = std::make_unique<Binary>(NodeKind::and_, line, std::move(left), parse_not());
      line = cur().line;
    }
    return left;
  }

  NodePtr parse_not() {
    if (is_name("not")) {
      Deeper guard(*this);
      const int line = next().line;
      return std::make_unique<Unary>(NodeKind::not_, line, parse_not());
    }
    return parse_compare();
  }

  NodePtr parse_compare() {
    const int line = cur().line;
    NodePtr expr = parse_math1();
    std::unique_ptr<Compare> cmp;
    while (true) {
      CmpOp op;
      if (cur().type == Tok::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = is_op("==") ? CmpOp::eq : is_op("!=") ? CmpOp::ne : is_op("<") ? CmpOp::lt : is_op("<=") ? CmpOp::le
           : is_op(">") ? CmpOp::gt : CmpOp::ge;
        next();
      } else if (skip_name("in")) {
        op = CmpOp::in;
      } else if (is_name("not") && look().type == Tok::name && look().text == "in") {
        next();
        next();
        op = CmpOp::notin;
      } else {
        break;
      }
      if (!cmp) cmp = std::make_unique<Compare>(line, std::move(expr));
      cmp->rest.emplace_back(op, parse_math1());
    }
    if (!cmp) return expr;
    return cmp;
  }

  NodePtr binary(BinOp op, int line, NodePtr a, NodePtr b) {
    auto n = std::make_unique<Binary>(NodeKind::binop, line, std::move(a), std::move(b));
    n->op = op;
    return n;
  }

  NodePtr parse_math1() {
    int line = cur().line;
    NodePtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const BinOp op = is_op("+") ? BinOp::add : BinOp::sub;
      next();
      left = binary(op, line, std::move(left), parse_concat());
      line = cur().line;
    }
    return left;
  }

  NodePtr parse_concat() {
    const int line = cur().line;
    NodePtr first = parse_math2();
    if (!is_op("~")) return first;
    auto c = std::make_unique<Concat>(line);
    c->parts.push_back(std::move(first));
    while (skip_op("~")) c->parts.push_back(parse_math2());
    return c;
  }

  NodePtr parse_math2() {
    int line = cur().line;
    NodePtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const BinOp op = is_op("*") ? BinOp::mul : is_op("/") ? BinOp::div : is_op("//") ? BinOp::floordiv : BinOp::mod;
      next();
      left = binary(op, line, std::move(left), parse_pow());
      line = cur().line;
    }
    return left;
  }

  NodePtr parse_pow() {
    int line = cur().line;
    NodePtr left = parse_unary(true);
    while (skip_op("**")) {
      left = binary(BinOp::pow, line, std::move(left), parse_unary(true));
      line = cur().line;
    }
    return left;
  }

  NodePtr parse_unary(bool with_filter) {
    Deeper guard(*this);
    const int line = cur().line;
    NodePtr node;
    if (skip_op("-"))
      node = std::make_unique<Unary>(NodeKind::neg, line, parse_unary(false));
    else if (skip_op("+"))
      node = std::make_unique<Unary>(NodeKind::pos, line, parse_unary(false));
    else
      node = parse_primary();
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  NodePtr parse_primary() {
    const Token& t = cur();
    if (t.type == Tok::name) {
      const Token n = next();
      if (n.text == "true" || n.text == "True") return std::make_unique<Constant>(n.line, Value::boolean(true));
      if (n.text == "false" || n.text == "False") return std::make_unique<Constant>(n.line, Value::boolean(false));
      if (n.text == "none" || n.text == "None") return std::make_unique<Constant>(n.line, Value::none());
      return std::make_unique<Name>(n.line, n.text);
    }
    if (t.type == Tok::string) {
      const int line = t.line;
      std::string s = next().text;
      while (cur().type == Tok::string) s += next().text;  // adjacent literals concatenate
      return std::make_unique<Constant>(line, Value::string(std::move(s)));
    }
    if (t.type == Tok::integer) return std::make_unique<Constant>(t.line, Value::integer(next().ival));
    if (t.type == Tok::real) return std::make_unique<Constant>(t.line, Value::real(next().fval));
    if (is_op("(")) {
      next();
      NodePtr n = parse_tuple(false, true, {}, true);
      expect_op(")");
      return n;
    }
    if (is_op("[")) {
      auto l = std::make_unique<Seq>(NodeKind::list, next().line);
      while (!is_op("]")) {
        if (!l->items.empty()) expect_op(",");
        if (is_op("]")) break;
        l->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return l;
    }
    if (is_op("{")) {
      auto d = std::make_unique<DictLit>(next().line);
      while (!is_op("}")) {
        if (!d->items.empty()) expect_op(",");
        if (is_op("}")) break;
        NodePtr key = parse_expression(true);
        expect_op(":");
        d->items.emplace_back(std::move(key), parse_expression(true));
      }
      expect_op("}");
      return d;
    }
    fail("unexpected '" + describe(t) + "'");
  }

  bool is_tuple_end(std::initializer_list<const char*> extra_end) const {
    if (cur().type == Tok::variable_end || cur().type == Tok::block_end || is_op(")")) return true;
    for (const char* e : extra_end)
      if (is_name(e)) return true;
    return false;
  }

  // Expressions separated by commas: a tuple if there is a comma.
  // simplified: primaries only (assignment targets).
  NodePtr parse_tuple(bool simplified, bool with_condexpr, std::initializer_list<const char*> extra_end,
                      bool explicit_parentheses) {
    int line = cur().line;
    std::vector<NodePtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
      line = cur().line;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parentheses) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto t = std::make_unique<Seq>(NodeKind::tuple, line);
    t->items = std::move(args);
    return t;
  }

  NodePtr parse_postfix(NodePtr node) {
    while (true) {
      if (is_op(".") || is_op("["))
        node = parse_subscript(std::move(node));
      else if (is_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  NodePtr parse_filter_expr(NodePtr node) {
    while (true) {
      if (is_op("|"))
        node = parse_filter(std::move(node), false);
      else if (is_name("is"))
        node = parse_test(std::move(node));
      else if (is_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  NodePtr parse_subscript(NodePtr node) {
    const Token t = next();
    if (t.text == ".") {
      const Token attr = next();
      if (attr.type == Tok::name) return std::make_unique<Getattr>(t.line, std::move(node), attr.text);
      if (attr.type != Tok::integer) syntax_error(attr.line, "expected name or number");
      return std::make_unique<Getitem>(t.line, std::move(node),
                                       std::make_unique<Constant>(attr.line, Value::integer(attr.ival)));
    }
    std::vector<NodePtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.size() == 1) return std::make_unique<Getitem>(t.line, std::move(node), std::move(args[0]));
    auto tuple = std::make_unique<Seq>(NodeKind::tuple, t.line);
    tuple->items = std::move(args);
    return std::make_unique<Getitem>(t.line, std::move(node), std::move(tuple));
  }

  NodePtr parse_subscribed() {
    const int line = cur().line;
    auto s = std::make_unique<Slice>(line);
    if (is_op(":")) {
      next();
    } else {
      NodePtr n = parse_expression(true);
      if (!is_op(":")) return n;
      next();
      s->start = std::move(n);
    }
    if (!is_op(":") && !is_op("]") && !is_op(",")) s->stop = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) s->step = parse_expression(true);
    }
    return s;
  }

  void parse_call_args(CallArgs& a) {
    const int line = expect_op("(").line;
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) syntax_error(line, "invalid syntax for function call expression");
    };
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;  // a trailing comma
      }
      if (skip_op("*")) {
        ensure(!a.dyn_args && !a.dyn_kwargs);
        a.dyn_args = parse_expression(true);
      } else if (skip_op("**")) {
        ensure(!a.dyn_kwargs);
        a.dyn_kwargs = parse_expression(true);
      } else if (cur().type == Tok::name && look().type == Tok::op && look().text == "=") {
        ensure(!a.dyn_kwargs);
        std::string key = next().text;
        next();
        a.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!a.dyn_args && !a.dyn_kwargs && a.kwargs.empty());
        a.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  NodePtr parse_call(NodePtr node) {
    auto c = std::make_unique<Call>(cur().line, std::move(node));
    parse_call_args(c->a);
    return c;
  }

  std::string dotted_name() {
    std::string name = expect(Tok::name, "name").text;
    while (skip_op(".")) name += "." + expect(Tok::name, "name").text;
    return name;
  }

  NodePtr parse_filter(NodePtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      const int line = cur().line;
      auto f = std::make_unique<Filter>(line, std::move(node), dotted_name());
      if (is_op("(")) parse_call_args(f->a);
      node = std::move(f);
      start_inline = false;
    }
    return node;
  }

  NodePtr parse_test(NodePtr node) {
    const int line = next().line;  // "is"
    const bool negated = skip_name("not");
    auto t = std::make_unique<Test>(line, std::move(node), dotted_name());
    if (is_op("(")) {
      parse_call_args(t->a);
    } else if ((cur().type == Tok::name || cur().type == Tok::string || cur().type == Tok::integer ||
                cur().type == Tok::real || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      t->a.args.push_back(parse_postfix(parse_primary()));
    }
    if (negated) return std::make_unique<Unary>(NodeKind::not_, line, std::move(t));
    return t;
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  const Options& opt_;
  size_t depth_ = 0;
  int loops_ = 0;  // enclosing for loops (break/continue need one)
};

}  // namespace

Body parse_template(std::string_view source, const Options& options) {
  return Parser(tokenize(source, options), options).parse();
}

}  // namespace synapse::jinja
