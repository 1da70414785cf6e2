#include "template/value.hpp"

#include <algorithm>
#include <cmath>

#include "template/interp.hpp"
#include "template/text.hpp"

namespace synapse::jinja {

void fault(std::string message) { throw Fault{std::move(message)}; }

Value Value::undefined(std::string why) {
  Value v;
  if (!why.empty()) v.s = std::make_shared<const std::string>(std::move(why));
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::none;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::boolean;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::integer;
  v.i = x;
  return v;
}
Value Value::real(double x) {
  Value v;
  v.kind = Kind::real;
  v.f = x;
  return v;
}
Value Value::string(std::string x, bool markup) {
  return string(std::make_shared<const std::string>(std::move(x)), markup);
}
Value Value::string(Str x, bool markup) {
  Value v;
  v.kind = Kind::string;
  v.markup = markup;
  v.s = std::move(x);
  return v;
}
Value Value::of(List* l) {
  Value v;
  v.kind = Kind::list;
  v.list = l;
  return v;
}
Value Value::of(Dict* d) {
  Value v;
  v.kind = Kind::dict;
  v.dict = d;
  return v;
}
Value Value::of(Object* o) {
  Value v;
  v.kind = Kind::object;
  v.obj = o;
  return v;
}

bool same_key(const Value& a, const Value& b, int depth) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::real || b.kind == Kind::real) return a.as_real() == b.as_real();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::none: return true;
    case Kind::string: return *a.s == *b.s;
    case Kind::list: {
      if (depth > 64) fault("a dict key nested too deeply");
      if (a.list->items.size() != b.list->items.size()) return false;
      for (size_t k = 0; k < a.list->items.size(); ++k)
        if (!same_key(a.list->items[k], b.list->items[k], depth + 1)) return false;
      return true;
    }
    default: return false;
  }
}

void check_hashable(const Value& v) {
  switch (v.kind) {
    case Kind::none:
    case Kind::boolean:
    case Kind::integer:
    case Kind::real:
    case Kind::string: return;
    case Kind::list:
      if (v.list->tuple) {
        for (const Value& x : v.list->items) check_hashable(x);
        return;
      }
      break;
    default: break;
  }
  fault(std::string("unhashable type: '") + type_name(v) + "' (as a dict key)");
}

namespace {

// A text equal for keys that are the same dict key (same_key): 1, 1.0 and
// True all give "i1".
void key_text(const Value& v, std::string& out, int depth = 0) {
  switch (v.kind) {
    case Kind::string: out += 's'; out += *v.s; return;
    case Kind::none: out += 'n'; return;
    case Kind::boolean:
    case Kind::integer: out += 'i'; out += std::to_string(v.as_int()); return;
    case Kind::real:
      if (std::floor(v.f) == v.f && std::fabs(v.f) < 9.2e18) {
        out += 'i';
        out += std::to_string(static_cast<int64_t>(v.f));
      } else {
        out += 'f';
        out += float_repr(v.f);
      }
      return;
    case Kind::list: {  // a tuple
      if (depth > 64) fault("a dict key nested too deeply");
      out += 't';
      out += std::to_string(v.list->items.size());
      for (const Value& x : v.list->items) {
        std::string k;
        key_text(x, k, depth + 1);
        out += ':' + std::to_string(k.size()) + ':' + k;
      }
      return;
    }
    default: out += '?'; return;
  }
}

std::string key_text(const Value& v) {
  std::string s;
  key_text(v, s);
  return s;
}

}  // namespace

void Dict::build_index() const {
  index_.clear();
  for (size_t k = 0; k < items.size(); ++k) index_.emplace(key_text(items[k].first), k);
  indexed_ = true;
}

const Value* Dict::find(std::string_view key) const {
  if (items.size() > 8) {
    if (!indexed_) build_index();
    std::string k(1, 's');
    k += key;
    const auto it = index_.find(k);
    return it == index_.end() ? nullptr : &items[it->second].second;
  }
  for (const auto& kv : items)
    if (kv.first.is_string() && kv.first.str() == key) return &kv.second;
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  if (!key.is_number() && !key.is_none() && !(key.kind == Kind::list && key.list->tuple)) return nullptr;
  if (items.size() > 8) {
    if (!indexed_) build_index();
    const auto it = index_.find(key_text(key));
    return it == index_.end() ? nullptr : &items[it->second].second;
  }
  for (const auto& kv : items)
    if (same_key(kv.first, key)) return &kv.second;
  return nullptr;
}

void Dict::set(Value key, Value v) {
  check_hashable(key);
  if (Value* p = find(key)) {
    *p = std::move(v);
    return;
  }
  items.emplace_back(std::move(key), std::move(v));
  if (indexed_) index_.emplace(key_text(items.back().first), items.size() - 1);
}

void Dict::set(std::string_view key, Value v) {
  if (Value* p = find(key)) {
    *p = std::move(v);
    return;
  }
  items.emplace_back(Value::string(std::string(key)), std::move(v));
  if (indexed_) index_.emplace(key_text(items.back().first), items.size() - 1);
}

bool Dict::erase(const Value& key) {
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (same_key(it->first, key)) {
      items.erase(it);
      indexed_ = false;
      return true;
    }
  }
  return false;
}

const Value* Args::kwarg(std::string_view name) const {
  for (const auto& kv : kw)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

Value Object::attr(Interp&, std::string_view name) {
  return Value::undefined("'" + std::string(type_name()) + " object' has no attribute '" + std::string(name) + "'");
}
Value Object::call(Interp&, Args&) { fault("'" + std::string(type_name()) + "' object is not callable"); }
std::string Object::repr(Interp&) { return "<" + std::string(type_name()) + " object>"; }

Value Namespace::attr(Interp&, std::string_view name) {
  if (const Value* v = attrs.find(name)) return *v;
  return Value::undefined("'Namespace' object has no attribute '" + std::string(name) + "'");
}

std::string Namespace::repr(Interp& in) {
  Value d;
  d.kind = Kind::dict;
  d.dict = &attrs;
  return "<Namespace " + to_repr(in, d) + ">";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return v.b;
    case Kind::integer: return v.i != 0;
    case Kind::real: return v.f != 0;
    case Kind::string: return !v.s->empty();
    case Kind::list: return v.list->generator || !v.list->items.empty();
    case Kind::dict: return !v.dict->items.empty();
    case Kind::object: return true;
  }
  return false;
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::real: return "float";
    case Kind::string: return v.markup ? "Markup" : "str";
    case Kind::list:
      return v.list->generator ? "generator" : v.list->range ? "range" : v.list->tuple ? "tuple" : "list";
    case Kind::dict: return "dict";
    case Kind::object: return v.obj->type_name();
  }
  return "?";
}

void undefined_error(const Value& v) {
  fault(v.s ? *v.s : std::string("undefined value"));
}

namespace {

void repr_into(Interp& in, const Value& v, std::string& out);

void str_into(Interp& in, const Value& v, std::string& out) {
  switch (v.kind) {
    case Kind::undefined: return;
    case Kind::string: out += *v.s; return;
    default: repr_into(in, v, out);
  }
}

void repr_into(Interp& in, const Value& v, std::string& out) {
  switch (v.kind) {
    case Kind::undefined: out += "Undefined"; return;
    case Kind::none: out += "None"; return;
    case Kind::boolean: out += v.b ? "True" : "False"; return;
    case Kind::integer: out += std::to_string(v.i); return;
    case Kind::real: out += float_repr(v.f); return;
    case Kind::string:
      if (v.markup) out += "Markup(";
      out += string_repr(*v.s);
      if (v.markup) out += ")";
      return;
    case Kind::list: {
      if (v.list->generator) {
        out += "<generator object>";
        return;
      }
      if (v.list->range) {
        out += "range(" + std::to_string(v.list->range_start) + ", " + std::to_string(v.list->range_stop);
        if (v.list->range_step != 1) out += ", " + std::to_string(v.list->range_step);
        out += ")";
        return;
      }
      if (in.printing(v.list)) {
        out += v.list->tuple ? "(...)" : "[...]";
        return;
      }
      Interp::Deeper guard(in);
      Interp::Printing mark(in, v.list);
      const auto& items = v.list->items;
      out += v.list->tuple ? "(" : "[";
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += ", ";
        repr_into(in, items[k], out);
        in.check_size(out.size());
      }
      if (v.list->tuple && items.size() == 1) out += ",";
      out += v.list->tuple ? ")" : "]";
      return;
    }
    case Kind::dict: {
      if (in.printing(v.dict)) {
        out += "{...}";
        return;
      }
      Interp::Deeper guard(in);
      Interp::Printing mark(in, v.dict);
      out += "{";
      bool first = true;
      for (const auto& kv : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        repr_into(in, kv.first, out);
        out += ": ";
        repr_into(in, kv.second, out);
        in.check_size(out.size());
      }
      out += "}";
      return;
    }
    case Kind::object: out += v.obj->repr(in); return;
  }
}

void json_into(Interp& in, const Value& v, const JsonOptions& opt, int level, std::string& out) {
  auto newline = [&](int lv) {
    if (!opt.has_indent) return;
    out.push_back('\n');
    for (int k = 0; k < lv; ++k) out += opt.indent;
  };
  switch (v.kind) {
    case Kind::none: out += "null"; return;
    case Kind::boolean: out += v.b ? "true" : "false"; return;
    case Kind::integer: out += std::to_string(v.i); return;
    case Kind::real:
      if (std::isnan(v.f))
        out += "NaN";
      else if (std::isinf(v.f))
        out += v.f > 0 ? "Infinity" : "-Infinity";
      else
        out += float_repr(v.f);
      return;
    case Kind::string:
      out.push_back('"');
      json_escape(out, *v.s, opt.ensure_ascii);
      out.push_back('"');
      return;
    case Kind::list: {
      if (v.list->range) fault("Object of type range is not JSON serializable");
      Interp::Deeper guard(in);
      std::vector<Value> items;
      if (v.list->generator)
        items = in.iterate(v);  // llama.cpp's engine: a generator dumps as a list
      const auto& xs = v.list->generator ? items : v.list->items;
      if (xs.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t k = 0; k < xs.size(); ++k) {
        if (k) out += opt.item_sep;
        newline(level + 1);
        json_into(in, xs[k], opt, level + 1, out);
        in.check_size(out.size());
      }
      newline(level);
      out.push_back(']');
      return;
    }
    case Kind::dict: {
      Interp::Deeper guard(in);
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> kvs;
      for (const auto& kv : v.dict->items) kvs.push_back(&kv);
      if (opt.sort_keys)  // Python sorts str keys by code point: UTF-8 byte order is the same
        std::stable_sort(kvs.begin(), kvs.end(), [&](auto* a, auto* b) { return less(in, a->first, b->first); });
      out.push_back('{');
      bool first = true;
      for (const auto* kv : kvs) {
        if (!first) out += opt.item_sep;
        first = false;
        newline(level + 1);
        // json.dumps: keys become str; int, float, bool and None as JSON writes them.
        const Value& key = kv->first;
        std::string text;
        switch (key.kind) {
          case Kind::string: text = key.str(); break;
          case Kind::none: text = "null"; break;
          case Kind::boolean: text = key.b ? "true" : "false"; break;
          case Kind::integer:
          case Kind::real: json_into(in, key, opt, level, text); break;
          default: fault(std::string("keys must be str, int, float, bool or None, not ") + type_name(key));
        }
        out.push_back('"');
        json_escape(out, text, opt.ensure_ascii);
        out.push_back('"');
        out += opt.key_sep;
        json_into(in, kv->second, opt, level + 1, out);
        in.check_size(out.size());
      }
      newline(level);
      out.push_back('}');
      return;
    }
    case Kind::undefined:
    case Kind::object: fault(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_str(Interp& in, const Value& v) {
  if (v.kind == Kind::string) return *v.s;
  std::string out;
  str_into(in, v, out);
  in.charge_string(out.size());
  return out;
}

std::string to_repr(Interp& in, const Value& v) {
  std::string out;
  repr_into(in, v, out);
  in.charge_string(out.size());
  return out;
}

std::string to_json(Interp& in, const Value& v, const JsonOptions& opt) {
  std::string out;
  json_into(in, v, opt, 0, out);
  return out;
}

bool equals(Interp& in, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::real || b.kind == Kind::real) return a.as_real() == b.as_real();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string:
      in.step(std::min(a.s->size(), b.s->size()) / 64);
      return *a.s == *b.s;
    case Kind::list: {
      if (a.list == b.list) return true;
      if (a.list->generator || b.list->generator || a.list->tuple != b.list->tuple || a.list->range != b.list->range)
        return false;
      if (a.list->items.size() != b.list->items.size()) return false;
      Interp::Deeper guard(in);
      in.step(a.list->items.size());
      for (size_t k = 0; k < a.list->items.size(); ++k)
        if (!equals(in, a.list->items[k], b.list->items[k])) return false;
      return true;
    }
    case Kind::dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      Interp::Deeper guard(in);
      in.step(a.dict->items.size());
      for (const auto& kv : a.dict->items) {
        const Value* o = b.dict->find(kv.first);
        if (!o || !equals(in, kv.second, *o)) return false;
      }
      return true;
    }
    case Kind::object: return a.obj == b.obj;
    default: return false;
  }
}

bool less(Interp& in, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::real || b.kind == Kind::real) return a.as_real() < b.as_real();
    return a.as_int() < b.as_int();
  }
  if (a.kind == Kind::string && b.kind == Kind::string) {
    in.step(std::min(a.s->size(), b.s->size()) / 64);
    return *a.s < *b.s;
  }
  if (a.kind == Kind::list && b.kind == Kind::list && !a.list->generator && !b.list->generator && !a.list->range &&
      !b.list->range && a.list->tuple == b.list->tuple) {
    Interp::Deeper guard(in);
    const auto& x = a.list->items;
    const auto& y = b.list->items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equals(in, x[k], y[k])) return less(in, x[k], y[k]);
    }
    return x.size() < y.size();
  }
  fault(std::string("'<' not supported between instances of '") + type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace synapse::jinja
