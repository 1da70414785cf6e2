// Jinja2's built-in filters (jinja2/filters.py) and tests (jinja2/tests.py),
// with transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "template/builtins.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace synapse::jinja {

std::vector<Value> bind(std::string_view fname, const Args& args,
                        std::initializer_list<std::pair<const char*, std::optional<Value>>> params) {
  std::vector<Value> out;
  std::vector<bool> set(params.size(), false);
  out.reserve(params.size());
  for (const auto& p : params) out.push_back(p.second ? *p.second : Value());
  if (args.pos.size() > params.size())
    fault(std::string(fname) + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
          std::to_string(args.pos.size()) + " given)");
  for (size_t k = 0; k < args.pos.size(); ++k) {
    out[k] = args.pos[k];
    set[k] = true;
  }
  for (const auto& kv : args.kw) {
    size_t k = 0;
    for (const auto& p : params) {
      if (kv.first == p.first) break;
      ++k;
    }
    if (k == params.size()) fault(std::string(fname) + "() got an unexpected keyword argument '" + kv.first + "'");
    if (set[k]) fault(std::string(fname) + "() got multiple values for argument '" + kv.first + "'");
    out[k] = kv.second;
    set[k] = true;
  }
  size_t k = 0;
  for (const auto& p : params) {
    if (!set[k] && !p.second)
      fault(std::string(fname) + "() missing required argument '" + p.first + "'");
    ++k;
  }
  return out;
}

Value soft_str(Interp& in, const Value& v) {
  if (v.is_string()) return v;
  return Value::string(to_str(in, v));
}

namespace {

const std::optional<Value> kNone = Value::none();
std::optional<Value> dflt(Value v) { return v; }
constexpr std::nullopt_t kRequired = std::nullopt;

// Python's len().
int64_t length_of(const Value& v) {
  switch (v.kind) {
    case Kind::undefined: return 0;
    case Kind::string: return static_cast<int64_t>(count_code_points(v.str()));
    case Kind::list:
      if (!v.list->generator) return static_cast<int64_t>(v.list->items.size());
      break;
    case Kind::dict: return static_cast<int64_t>(v.dict->items.size());
    default: break;
  }
  fault(std::string("object of type '") + type_name(v) + "' has no len()");
}

std::string map_code_points(const std::string& s, char32_t (*f)(char32_t)) {
  std::u32string u = decode_utf8(s);
  for (char32_t& c : u) c = f(c);
  return encode_utf8(u);
}

Value lower_if_string(const Value& v) {
  if (!v.is_string()) return v;
  return Value::string(map_code_points(v.str(), to_lower), v.markup);
}

// Jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
struct AttrGetter {
  std::vector<Value> parts;
  std::optional<Value> default_value;
  bool ignore_case = false;

  AttrGetter(const Value& attribute, bool lower, std::optional<Value> dflt = std::nullopt)
      : default_value(std::move(dflt)), ignore_case(lower) {
    if (attribute.is_none() || attribute.is_undefined()) return;
    if (!attribute.is_string()) {
      parts.push_back(attribute);
      return;
    }
    const std::string& a = attribute.str();
    size_t start = 0;
    while (true) {
      const size_t dot = a.find('.', start);
      std::string part = a.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      int64_t n = 0;
      if (digits && part.size() < 18 && parse_python_int(part, 10, n))
        parts.push_back(Value::integer(n));
      else
        parts.push_back(Value::string(std::move(part)));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  Value operator()(Interp& in, Value item) const {
    for (const Value& p : parts) {
      item = in.getitem(item, p);
      if (default_value && !default_value->is_none() && item.is_undefined()) item = *default_value;
    }
    return ignore_case ? lower_if_string(item) : item;
  }
};

Value generator(Interp& in, std::vector<Value> items) {
  Value g = in.new_list(std::move(items));
  g.list->generator = true;
  return g;
}

void stable_sort_by_key(Interp& in, std::vector<Value>& items, std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  in.step(items.size() * 8);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? less(in, keys[b], keys[a]) : less(in, keys[a], keys[b]);
  });
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (const size_t k : order) sorted.push_back(items[k]);
  items = std::move(sorted);
}

// ------------------------------------------------------------------ filters

Value f_abs(Interp&, Value& v, Args& a) {
  bind("abs", a, {});
  if (v.kind == Kind::real) return Value::real(std::fabs(v.f));
  if (v.is_int()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) fault("integer overflow");
    return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is_undefined()) undefined_error(v);
  fault(std::string("bad operand type for abs(): '") + type_name(v) + "'");
}

Value f_attr(Interp& in, Value& v, Args& a) {
  const auto p = bind("attr", a, {{"name", kRequired}});
  if (v.is_undefined()) undefined_error(v);
  if (!p[0].is_string()) fault("attribute name must be a string");
  const std::string& name = p[0].str();
  if (name.empty() || name[0] == '_') return Value::undefined("'" + name + "' is undefined");
  if (v.kind == Kind::string || v.kind == Kind::list || v.kind == Kind::dict) return bind_method(in, v, name);
  if (v.kind == Kind::object) return v.obj->attr(in, name);
  return Value::undefined("'" + name + "' is undefined");
}

Value f_batch(Interp& in, Value& v, Args& a) {
  const auto p = bind("batch", a, {{"linecount", kRequired}, {"fill_with", kNone}});
  if (!p[0].is_int()) fault("batch() linecount must be an integer");
  const int64_t n = p[0].as_int();
  std::vector<Value> out, tmp;
  for (Value& x : in.iterate(v)) {
    if (static_cast<int64_t>(tmp.size()) == n) {
      out.push_back(in.new_list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(std::move(x));
  }
  if (!tmp.empty()) {
    if (!p[1].is_none()) {
      in.step(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 40)));
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(p[1]);
    }
    out.push_back(in.new_list(std::move(tmp)));
  }
  return generator(in, std::move(out));
}

std::string capitalize(const std::string& s) {
  std::u32string u = decode_utf8(s);
  for (size_t k = 0; k < u.size(); ++k) u[k] = k == 0 ? to_upper(u[k]) : to_lower(u[k]);
  return encode_utf8(u);
}

Value f_capitalize(Interp& in, Value& v, Args& a) {
  bind("capitalize", a, {});
  const Value s = soft_str(in, v);
  return Value::string(capitalize(s.str()), s.markup);
}

std::string center(Interp& in, const std::string& s, int64_t width, char32_t fill) {
  const auto n = static_cast<int64_t>(count_code_points(s));
  if (width <= n) return s;
  in.charge_string(static_cast<size_t>(width));
  const int64_t marg = width - n;
  const int64_t left = marg / 2 + (marg & width & 1);
  std::string f;
  append_utf8(f, fill);
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += f;
  out += s;
  for (int64_t k = 0; k < marg - left; ++k) out += f;
  return out;
}

Value f_center(Interp& in, Value& v, Args& a) {
  const auto p = bind("center", a, {{"width", dflt(Value::integer(80))}});
  if (!p[0].is_int()) fault("center() width must be an integer");
  const Value s = soft_str(in, v);
  return Value::string(center(in, s.str(), p[0].as_int(), ' '), s.markup);
}

Value f_length(Interp&, Value& v, Args& a) {
  bind("length", a, {});
  return Value::integer(length_of(v));
}

Value f_default(Interp&, Value& v, Args& a) {
  const auto p = bind("default", a, {{"default_value", dflt(Value::string(""))}, {"boolean", dflt(Value::boolean(false))}});
  if (v.is_undefined() || (truthy(p[1]) && !truthy(v))) return p[0];
  return v;
}

Value f_dictsort(Interp& in, Value& v, Args& a) {
  const auto p = bind("dictsort", a, {{"case_sensitive", dflt(Value::boolean(false))}, {"by", dflt(Value::string("key"))},
                                      {"reverse", dflt(Value::boolean(false))}});
  size_t pos;
  if (p[1].is_string() && p[1].str() == "key")
    pos = 0;
  else if (p[1].is_string() && p[1].str() == "value")
    pos = 1;
  else
    fault("You can only sort by either \"key\" or \"value\"");
  if (v.kind != Kind::dict) {
    if (v.is_undefined()) undefined_error(v);
    fault(std::string("'") + type_name(v) + "' object has no attribute 'items'");
  }
  std::vector<Value> items, keys;
  for (const auto& kv : v.dict->items) {
    items.push_back(in.new_list({kv.first, kv.second}, true));
    const Value k = pos == 0 ? kv.first : kv.second;
    keys.push_back(truthy(p[0]) ? k : lower_if_string(k));
  }
  stable_sort_by_key(in, items, keys, truthy(p[2]));
  return in.new_list(std::move(items));
}

Value f_escape(Interp& in, Value& v, Args& a) {
  bind("escape", a, {});
  if (v.is_string() && v.markup) return v;
  return Value::string(html_escape(to_str(in, v)), true);
}

Value f_forceescape(Interp& in, Value& v, Args& a) {
  bind("forceescape", a, {});
  return Value::string(html_escape(to_str(in, v)), true);
}

Value f_first(Interp& in, Value& v, Args& a) {
  bind("first", a, {});
  if (v.kind == Kind::list && v.list->generator) {
    if (v.list->items.empty()) return Value::undefined("No first item, sequence was empty.");
    Value x = v.list->items.front();
    v.list->items.erase(v.list->items.begin());
    return x;
  }
  if (v.kind == Kind::list) {
    if (v.list->items.empty()) return Value::undefined("No first item, sequence was empty.");
    return v.list->items.front();
  }
  const std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interp& in, Value& v, Args& a) {
  bind("last", a, {});
  if (v.kind == Kind::list && v.list->generator) fault("'generator' object is not reversible");
  if (v.kind == Kind::list) {
    if (v.list->items.empty()) return Value::undefined("No last item, sequence was empty.");
    return v.list->items.back();
  }
  if (v.kind != Kind::string && v.kind != Kind::dict && v.kind != Kind::undefined)
    fault(std::string("'") + type_name(v) + "' object is not reversible");
  const std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

bool python_int_of(const Value& v, int base, int64_t& out) {
  if (v.is_string()) {
    if (parse_python_int(v.str(), base, out)) return true;
    double d;
    if (!parse_python_float(v.str(), d)) return false;
    if (std::isinf(d)) fault("cannot convert float infinity to integer");
    if (std::isnan(d)) return false;
    if (std::fabs(d) >= 9.2e18) fault("integer too large for synapse's 64-bit template integers");
    out = static_cast<int64_t>(d);
    return true;
  }
  if (v.is_int()) {
    out = v.as_int();
    return true;
  }
  if (v.kind == Kind::real) {
    if (std::isinf(v.f)) fault("cannot convert float infinity to integer");
    if (std::isnan(v.f)) return false;
    if (std::fabs(v.f) >= 9.2e18) fault("integer too large for synapse's 64-bit template integers");
    out = static_cast<int64_t>(v.f);
    return true;
  }
  if (v.is_undefined()) undefined_error(v);
  return false;
}

Value f_int(Interp&, Value& v, Args& a) {
  const auto p = bind("int", a, {{"default", dflt(Value::integer(0))}, {"base", dflt(Value::integer(10))}});
  int64_t n;
  if (python_int_of(v, p[1].is_int() ? static_cast<int>(p[1].as_int()) : 10, n)) return Value::integer(n);
  return p[0];
}

Value f_float(Interp&, Value& v, Args& a) {
  const auto p = bind("float", a, {{"default", dflt(Value::real(0.0))}});
  if (v.is_number()) return Value::real(v.as_real());
  double d;
  if (v.is_string() && parse_python_float(v.str(), d)) return Value::real(d);
  if (v.is_undefined()) undefined_error(v);
  return p[0];
}

Value f_format(Interp& in, Value& v, Args& a) {
  if (!a.pos.empty() && !a.kw.empty()) fault("can't handle positional and keyword arguments at the same time");
  const Value s = soft_str(in, v);
  Value args;
  if (!a.kw.empty()) {
    args = in.new_dict();
    for (const auto& kv : a.kw) args.dict->set(kv.first, kv.second);
  } else {
    args = in.new_list(a.pos, true);
  }
  std::string r = percent_format(in, s.str(), args);
  in.charge_string(r.size());
  return Value::string(std::move(r), s.markup);
}

// Python's str.splitlines().
std::vector<std::string> splitlines(const std::string& s) {
  std::vector<std::string> out;
  const std::u32string u = decode_utf8(s);
  size_t start = 0;
  for (size_t k = 0; k < u.size(); ++k) {
    const char32_t c = u[k];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
        c == 0x2028 || c == 0x2029) {
      out.push_back(encode_utf8(std::u32string_view(u).substr(start, k - start)));
      if (c == '\r' && k + 1 < u.size() && u[k + 1] == '\n') ++k;
      start = k + 1;
    }
  }
  if (start < u.size()) out.push_back(encode_utf8(std::u32string_view(u).substr(start)));
  return out;
}

Value f_indent(Interp& in, Value& v, Args& a) {
  const auto p = bind("indent", a, {{"width", dflt(Value::integer(4))}, {"first", dflt(Value::boolean(false))},
                                    {"blank", dflt(Value::boolean(false))}});
  std::string indention;
  if (p[0].is_string()) {
    indention = p[0].str();
  } else if (p[0].is_int()) {
    in.charge_string(static_cast<size_t>(std::max<int64_t>(0, p[0].as_int())));
    indention.assign(static_cast<size_t>(std::max<int64_t>(0, p[0].as_int())), ' ');
  } else {
    fault(std::string("can't multiply sequence by non-int of type '") + type_name(p[0]) + "'");
  }
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_string()) fault(std::string("unsupported operand type(s) for +=: '") + type_name(v) + "' and 'str'");
  const std::vector<std::string> lines = splitlines(v.str() + "\n");
  std::string rv;
  if (truthy(p[2])) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + indention;
      rv += lines[k];
      in.check_size(rv.size());
    }
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      rv += "\n";
      if (!lines[k].empty()) rv += indention;
      rv += lines[k];
      in.check_size(rv.size());
    }
  }
  if (truthy(p[1])) rv = indention + rv;
  in.charge_string(rv.size());
  return Value::string(std::move(rv), v.markup);
}

Value f_items(Interp& in, Value& v, Args& a) {
  bind("items", a, {});
  if (v.is_undefined()) return generator(in, {});
  if (v.kind != Kind::dict) fault("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& kv : v.dict->items) out.push_back(in.new_list({kv.first, kv.second}, true));
  return generator(in, std::move(out));
}

Value f_join(Interp& in, Value& v, Args& a) {
  const auto p = bind("join", a, {{"d", dflt(Value::string(""))}, {"attribute", kNone}});
  const std::string sep = to_str(in, p[0]);
  std::vector<Value> items = in.iterate(v);
  const AttrGetter get(p[1], false);
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += sep;
    const Value x = p[1].is_none() ? items[k] : get(in, items[k]);
    out += x.is_string() ? x.str() : to_str(in, x);
    in.check_size(out.size());
  }
  in.charge_string(out.size());
  return Value::string(std::move(out));
}

Value f_list(Interp& in, Value& v, Args& a) {
  bind("list", a, {});
  return in.new_list(in.iterate(v));
}

Value f_lower(Interp& in, Value& v, Args& a) {
  bind("lower", a, {});
  const Value s = soft_str(in, v);
  return Value::string(map_code_points(s.str(), to_lower), s.markup);
}

Value f_upper(Interp& in, Value& v, Args& a) {
  bind("upper", a, {});
  const Value s = soft_str(in, v);
  return Value::string(upper_string(s.str()), s.markup);
}

Value f_map(Interp& in, Value& v, Args& a) {
  if (!truthy(v)) return generator(in, {});
  std::vector<Value> items = in.iterate(v);
  std::vector<Value> out;
  if (a.pos.empty() && a.kwarg("attribute")) {
    std::optional<Value> def;
    for (const auto& kv : a.kw) {
      if (kv.first == "default")
        def = kv.second;
      else if (kv.first != "attribute")
        fault("Unexpected keyword argument '" + kv.first + "'");
    }
    const AttrGetter get(*a.kwarg("attribute"), false, def);
    for (const Value& x : items) out.push_back(get(in, x));
    return generator(in, std::move(out));
  }
  if (a.pos.empty()) fault("map requires a filter argument");
  if (!a.pos[0].is_string()) fault("map's filter name must be a string");
  const std::string name = a.pos[0].str();
  Args rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& x : items) {
    Args each = rest;
    out.push_back(in.call_filter(name, x, each));
  }
  return generator(in, std::move(out));
}

Value min_max(Interp& in, Value& v, Args& a, const char* name, bool want_max) {
  const auto p = bind(name, a, {{"case_sensitive", dflt(Value::boolean(false))}, {"attribute", kNone}});
  const std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const AttrGetter get(p[1], !truthy(p[0]));
  size_t best = 0;
  Value best_key = get(in, items[0]);
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = get(in, items[k]);
    if (want_max ? less(in, best_key, key) : less(in, key, best_key)) {
      best = k;
      best_key = std::move(key);
    }
  }
  return items[best];
}
Value f_max(Interp& in, Value& v, Args& a) { return min_max(in, v, a, "max", true); }
Value f_min(Interp& in, Value& v, Args& a) { return min_max(in, v, a, "min", false); }

// select, reject, selectattr, rejectattr.
Value select_or_reject(Interp& in, Value& v, Args& a, bool keep_if, bool lookup_attr) {
  if (!truthy(v)) return generator(in, {});
  const std::vector<Value> items = in.iterate(v);
  size_t off = 0;
  std::optional<AttrGetter> get;
  if (lookup_attr) {
    if (a.pos.empty()) fault("Missing parameter for attribute name");
    get.emplace(a.pos[0], false);
    off = 1;
  }
  std::string test;
  Args rest;
  const bool has_test = a.pos.size() > off;
  if (has_test) {
    if (!a.pos[off].is_string()) fault("the test name must be a string");
    test = a.pos[off].str();
    rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), a.pos.end());
    rest.kw = a.kw;
  }
  std::vector<Value> out;
  for (const Value& x : items) {
    const Value t = get ? (*get)(in, x) : x;
    bool r;
    if (has_test) {
      Args each = rest;
      r = in.call_test(test, t, each);
    } else {
      r = truthy(t);
    }
    if (r == keep_if) out.push_back(x);
  }
  return generator(in, std::move(out));
}
Value f_select(Interp& in, Value& v, Args& a) { return select_or_reject(in, v, a, true, false); }
Value f_reject(Interp& in, Value& v, Args& a) { return select_or_reject(in, v, a, false, false); }
Value f_selectattr(Interp& in, Value& v, Args& a) { return select_or_reject(in, v, a, true, true); }
Value f_rejectattr(Interp& in, Value& v, Args& a) { return select_or_reject(in, v, a, false, true); }

// Python's str.replace(old, new, count).
std::string replace_all(Interp& in, const std::string& s, const std::string& old, const std::string& rep,
                        int64_t count) {
  std::string out;
  if (old.empty()) {
    const std::u32string u = decode_utf8(s);
    int64_t done = 0;
    for (size_t k = 0; k <= u.size(); ++k) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (k < u.size()) append_utf8(out, u[k]);
      in.check_size(out.size());
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += rep;
    in.check_size(out.size());
    pos = hit + old.size();
    ++done;
  }
  out.append(s, pos);
  in.check_size(out.size());
  return out;
}

Value f_replace(Interp& in, Value& v, Args& a) {
  const auto p = bind("replace", a, {{"old", kRequired}, {"new", kRequired}, {"count", kNone}});
  int64_t count = -1;
  if (!p[2].is_none()) {
    if (!p[2].is_int()) fault("replace() count must be an integer");
    count = p[2].as_int();
  }
  std::string r = replace_all(in, to_str(in, v), to_str(in, p[0]), to_str(in, p[1]), count);
  in.charge_string(r.size());
  return Value::string(std::move(r));
}

Value f_reverse(Interp& in, Value& v, Args& a) {
  bind("reverse", a, {});
  if (v.is_string()) {
    std::u32string u = decode_utf8(v.str());
    std::reverse(u.begin(), u.end());
    return Value::string(encode_utf8(u), v.markup);
  }
  if (v.kind == Kind::list && v.list->generator) {  // list(value), reversed
    std::vector<Value> items = in.iterate(v);
    std::reverse(items.begin(), items.end());
    return in.new_list(std::move(items));
  }
  if (v.kind == Kind::list || v.kind == Kind::dict || v.kind == Kind::undefined) {  // reversed(): an iterator
    std::vector<Value> items = in.iterate(v);
    std::reverse(items.begin(), items.end());
    return generator(in, std::move(items));
  }
  fault("argument must be iterable");
}

// Python's round(x, ndigits) of a float: correctly rounded, half to even.
double round_float(double x, int64_t nd) {
  if (!std::isfinite(x) || nd > 320) return x;
  if (nd >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(nd), x);
    return std::strtod(buf, nullptr);
  }
  if (nd < -320) return std::copysign(0.0, x);
  const double pow1 = std::pow(10.0, static_cast<double>(-nd));
  const double y = x / pow1;
  double z = std::nearbyint(y);
  if (std::fabs(y - z) == 0.5) z = 2.0 * std::nearbyint(y / 2.0);
  return z * pow1;
}

Value f_round(Interp&, Value& v, Args& a) {
  const auto p = bind("round", a, {{"precision", dflt(Value::integer(0))}, {"method", dflt(Value::string("common"))}});
  const std::string method = p[1].is_string() ? p[1].str() : "";
  if (method != "common" && method != "ceil" && method != "floor") fault("method must be common, ceil or floor");
  if (!p[0].is_int()) fault("round() precision must be an integer");
  const int64_t nd = p[0].as_int();
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_number()) fault(std::string("type ") + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_int()) {
      if (nd >= 0) return Value::integer(v.as_int());
      const double r = round_float(static_cast<double>(v.as_int()), nd);
      if (!(std::fabs(r) < 9.2e18)) fault("integer too large for synapse's 64-bit template integers");
      return Value::integer(static_cast<int64_t>(r));
    }
    return Value::real(round_float(v.f, nd));
  }
  const double scale = std::pow(10.0, static_cast<double>(nd));
  double r = method == "ceil" ? std::ceil(v.as_real() * scale) : std::floor(v.as_real() * scale);
  if (r == 0) r = 0;  // math.ceil/floor give an int: no -0.0
  return Value::real(r / scale);
}

Value f_safe(Interp& in, Value& v, Args& a) {
  bind("safe", a, {});
  return Value::string(to_str(in, v), true);
}

Value f_slice(Interp& in, Value& v, Args& a) {
  const auto p = bind("slice", a, {{"slices", kRequired}, {"fill_with", kNone}});
  if (!p[0].is_int() || p[0].as_int() <= 0) fault("slice() slices must be a positive integer");
  const std::vector<Value> seq = in.iterate(v);
  const auto slices = p[0].as_int();
  const auto length = static_cast<int64_t>(seq.size());
  const int64_t per = length / slices, extra = length % slices;
  int64_t offset = 0;
  std::vector<Value> out;
  in.step(static_cast<size_t>(std::min<int64_t>(slices, int64_t{1} << 40)));
  for (int64_t n = 0; n < slices; ++n) {
    const int64_t start = offset + n * per;
    if (n < extra) ++offset;
    const int64_t end = offset + (n + 1) * per;
    std::vector<Value> tmp(seq.begin() + start, seq.begin() + end);
    if (!p[1].is_none() && n >= extra) tmp.push_back(p[1]);
    out.push_back(in.new_list(std::move(tmp)));
  }
  return generator(in, std::move(out));
}

Value f_sort(Interp& in, Value& v, Args& a) {
  const auto p = bind("sort", a, {{"reverse", dflt(Value::boolean(false))}, {"case_sensitive", dflt(Value::boolean(false))},
                                  {"attribute", kNone}});
  std::vector<Value> items = in.iterate(v);
  // make_multi_attrgetter: "a,b" sorts by a, then b; each key is a list.
  std::vector<AttrGetter> getters;
  if (p[2].is_string()) {
    const std::string& s = p[2].str();
    size_t start = 0;
    while (true) {
      const size_t comma = s.find(',', start);
      getters.emplace_back(Value::string(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start)),
                           !truthy(p[1]));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    getters.emplace_back(p[2], !truthy(p[1]));
  }
  std::vector<Value> keys;
  for (const Value& x : items) {
    std::vector<Value> k;
    for (const auto& g : getters) k.push_back(g(in, x));
    keys.push_back(in.new_list(std::move(k)));
  }
  stable_sort_by_key(in, items, keys, truthy(p[0]));
  return in.new_list(std::move(items));
}

Value f_string(Interp& in, Value& v, Args& a) {
  bind("string", a, {});
  return soft_str(in, v);
}

Value f_striptags(Interp& in, Value& v, Args& a) {
  bind("striptags", a, {});
  std::string s = to_str(in, v), t;
  // Markup.striptags: comments, then tags, go; whitespace runs become one space; entities are unescaped.
  for (size_t k = 0; k < s.size();) {
    if (s.compare(k, 4, "<!--") == 0) {
      const size_t e = s.find("-->", k + 4);
      if (e != std::string::npos) {
        k = e + 3;
        continue;
      }
    }
    if (s[k] == '<') {
      const size_t e = s.find('>', k + 1);
      if (e != std::string::npos) {
        k = e + 1;
        continue;
      }
    }
    t.push_back(s[k++]);
  }
  std::string words;
  for (const char32_t c : decode_utf8(t)) {
    if (is_space(c)) {
      if (!words.empty() && words.back() != ' ') words.push_back(' ');
    } else {
      append_utf8(words, c);
    }
  }
  if (!words.empty() && words.back() == ' ') words.pop_back();
  static const std::pair<const char*, const char*> entities[] = {
      {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&#39;", "'"}, {"&#34;", "\""}, {"&quot;", "\""}, {"&apos;", "'"}};
  std::string out;
  for (size_t k = 0; k < words.size();) {
    bool hit = false;
    for (const auto& [from, to] : entities) {
      if (words.compare(k, std::char_traits<char>::length(from), from) == 0) {
        out += to;
        k += std::char_traits<char>::length(from);
        hit = true;
        break;
      }
    }
    if (!hit) out.push_back(words[k++]);
  }
  return Value::string(std::move(out));
}

Value f_sum(Interp& in, Value& v, Args& a) {
  const auto p = bind("sum", a, {{"attribute", kNone}, {"start", dflt(Value::integer(0))}});
  if (p[1].is_string()) fault("sum() can't sum strings [use ''.join(seq) instead]");
  const AttrGetter get(p[0], false);
  Value acc = p[1];
  for (const Value& x : in.iterate(v)) acc = in.arith(BinOp::add, acc, p[0].is_none() ? x : get(in, x));
  return acc;
}

Value f_title(Interp& in, Value& v, Args& a) {
  bind("title", a, {});
  const Value s = soft_str(in, v);
  std::u32string u = decode_utf8(s.str());
  auto sep = [](char32_t c) { return is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  for (size_t k = 0; k < u.size(); ++k) {
    const bool start = k == 0 || sep(u[k - 1]) != sep(u[k]);
    u[k] = start ? to_upper(u[k]) : to_lower(u[k]);
  }
  return Value::string(encode_utf8(u), s.markup);
}

Value f_tojson(Interp& in, Value& v, Args& a) {
  const auto p = bind("tojson", a, {{"ensure_ascii", dflt(Value::boolean(false))}, {"indent", kNone},
                                    {"separators", kNone}, {"sort_keys", dflt(Value::boolean(false))}});
  JsonOptions o;
  o.ensure_ascii = truthy(p[0]);
  if (!p[1].is_none()) {
    o.has_indent = true;
    if (p[1].is_string()) {
      o.indent = p[1].str();
    } else if (p[1].is_int()) {
      const int64_t n = std::clamp<int64_t>(p[1].as_int(), 0, 1 << 16);
      o.indent.assign(static_cast<size_t>(n), ' ');
    } else {
      fault(std::string("can't multiply sequence by non-int of type '") + type_name(p[1]) + "'");
    }
    o.item_sep = ",";
  }
  if (!p[2].is_none()) {
    if (p[2].kind != Kind::list || p[2].list->items.size() != 2 || !p[2].list->items[0].is_string() ||
        !p[2].list->items[1].is_string())
      fault("tojson separators must be a pair of strings");
    o.item_sep = p[2].list->items[0].str();
    o.key_sep = p[2].list->items[1].str();
  }
  o.sort_keys = truthy(p[3]);
  std::string s = to_json(in, v, o);
  in.charge_string(s.size());
  return Value::string(std::move(s));
}

Value f_trim(Interp& in, Value& v, Args& a) {
  const auto p = bind("trim", a, {{"chars", kNone}});
  const Value s = soft_str(in, v);
  if (!p[0].is_none() && !p[0].is_string()) fault("strip arg must be None or str");
  const std::string* chars = p[0].is_string() ? &p[0].str() : nullptr;
  return Value::string(py_strip(s.str(), chars, true, true), s.markup);
}

Value f_truncate(Interp& in, Value& v, Args& a) {
  const auto p = bind("truncate", a, {{"length", dflt(Value::integer(255))}, {"killwords", dflt(Value::boolean(false))},
                                      {"end", dflt(Value::string("..."))}, {"leeway", kNone}});
  if (!p[0].is_int() || !p[2].is_string()) fault("truncate() takes an integer length and a string end");
  const int64_t leeway = p[3].is_int() ? p[3].as_int() : 5;
  const std::u32string end = decode_utf8(p[2].str());
  const int64_t length = p[0].as_int();
  if (length < static_cast<int64_t>(end.size())) fault("expected length >= " + std::to_string(end.size()));
  if (leeway < 0) fault("expected leeway >= 0");
  if (length_of(v) <= length + leeway) return v;
  if (!v.is_string()) fault(std::string("'") + type_name(v) + "' object cannot be truncated");
  const std::u32string s = decode_utf8(v.str());
  std::u32string r = s.substr(0, static_cast<size_t>(length) - end.size());
  if (!truthy(p[1])) {
    const size_t sp = r.rfind(U' ');
    if (sp != std::u32string::npos) r = r.substr(0, sp);
  }
  return Value::string(encode_utf8(r + end));
}

Value f_unique(Interp& in, Value& v, Args& a) {
  const auto p = bind("unique", a, {{"case_sensitive", dflt(Value::boolean(false))}, {"attribute", kNone}});
  const AttrGetter get(p[1], !truthy(p[0]));
  std::vector<Value> seen, out;
  for (const Value& x : in.iterate(v)) {
    const Value key = get(in, x);
    if (key.kind == Kind::list || key.kind == Kind::dict) fault(std::string("unhashable type: '") + type_name(key) + "'");
    bool found = false;
    for (const Value& s : seen) {
      in.step();
      if (equals(in, s, key)) {
        found = true;
        break;
      }
    }
    if (!found) {
      seen.push_back(key);
      out.push_back(x);
    }
  }
  return generator(in, std::move(out));
}

Value f_wordcount(Interp& in, Value& v, Args& a) {
  bind("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (const char32_t c : decode_utf8(soft_str(in, v).str())) {
    const bool w = is_alnum(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_unsupported(Interp&, Value&, Args&) { fault("this filter is not supported by synapse's template engine"); }

// -------------------------------------------------------------------- tests

bool t_odd(Interp& in, const Value& v, Args& a) {
  bind("odd", a, {});
  return equals(in, in.arith(BinOp::mod, v, Value::integer(2)), Value::integer(1));
}
bool t_even(Interp& in, const Value& v, Args& a) {
  bind("even", a, {});
  return equals(in, in.arith(BinOp::mod, v, Value::integer(2)), Value::integer(0));
}
bool t_divisibleby(Interp& in, const Value& v, Args& a) {
  const auto p = bind("divisibleby", a, {{"num", kRequired}});
  return equals(in, in.arith(BinOp::mod, v, p[0]), Value::integer(0));
}
bool t_defined(Interp&, const Value& v, Args& a) {
  bind("defined", a, {});
  return !v.is_undefined();
}
bool t_undefined(Interp&, const Value& v, Args& a) {
  bind("undefined", a, {});
  return v.is_undefined();
}
bool t_filter(Interp&, const Value& v, Args& a) {
  bind("filter", a, {});
  if (!v.is_undefined()) check_hashable(v);
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interp&, const Value& v, Args& a) {
  bind("test", a, {});
  if (!v.is_undefined()) check_hashable(v);
  return v.is_string() && find_test(v.str()) != nullptr;
}
bool t_none(Interp&, const Value& v, Args& a) {
  bind("none", a, {});
  return v.is_none();
}
bool t_boolean(Interp&, const Value& v, Args& a) {
  bind("boolean", a, {});
  return v.kind == Kind::boolean;
}
bool t_false(Interp&, const Value& v, Args& a) {
  bind("false", a, {});
  return v.kind == Kind::boolean && !v.b;
}
bool t_true(Interp&, const Value& v, Args& a) {
  bind("true", a, {});
  return v.kind == Kind::boolean && v.b;
}
bool t_integer(Interp&, const Value& v, Args& a) {
  bind("integer", a, {});
  return v.kind == Kind::integer;
}
bool t_float(Interp&, const Value& v, Args& a) {
  bind("float", a, {});
  return v.kind == Kind::real;
}
// str.islower()/isupper(): some cased character, and none of the other case.
bool case_test(Interp& in, const Value& v, bool want_lower) {
  bool cased = false;
  for (const char32_t c : decode_utf8(to_str(in, v))) {
    if (is_lower_case(c)) {
      if (!want_lower) return false;
      cased = true;
    } else if (is_upper_case(c)) {
      if (want_lower) return false;
      cased = true;
    }
  }
  return cased;
}
bool t_lower(Interp& in, const Value& v, Args& a) {
  bind("lower", a, {});
  return case_test(in, v, true);
}
bool t_upper(Interp& in, const Value& v, Args& a) {
  bind("upper", a, {});
  return case_test(in, v, false);
}
bool t_string(Interp&, const Value& v, Args& a) {
  bind("string", a, {});
  return v.is_string();
}
bool t_mapping(Interp&, const Value& v, Args& a) {
  bind("mapping", a, {});
  return v.kind == Kind::dict;
}
bool t_number(Interp&, const Value& v, Args& a) {
  bind("number", a, {});
  return v.is_number();
}
bool t_sequence(Interp&, const Value& v, Args& a) {
  bind("sequence", a, {});
  return v.is_undefined() || v.is_string() || v.kind == Kind::dict || (v.kind == Kind::list && !v.list->generator);
}
bool t_iterable(Interp&, const Value& v, Args& a) {
  bind("iterable", a, {});
  return v.is_undefined() || v.is_string() || v.kind == Kind::dict || v.kind == Kind::list ||
         (v.kind == Kind::object && std::string_view(v.obj->type_name()) == "LoopContext");
}
bool t_callable(Interp&, const Value& v, Args& a) {
  bind("callable", a, {});
  return v.is_undefined() || (v.kind == Kind::object && v.obj->callable());
}
bool t_sameas(Interp&, const Value& v, Args& a) {
  const auto p = bind("sameas", a, {{"other", kRequired}});
  const Value& o = p[0];
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::undefined: return false;  // two Undefined objects
    case Kind::none: return true;
    case Kind::boolean: return v.b == o.b;
    case Kind::integer: return v.i == o.i && v.i >= -5 && v.i <= 256;  // CPython's small ints
    case Kind::real: return false;
    case Kind::string: return v.s == o.s;
    case Kind::list: return v.list == o.list;
    case Kind::dict: return v.dict == o.dict;
    case Kind::object: return v.obj == o.obj;
  }
  return false;
}
bool t_escaped(Interp&, const Value& v, Args& a) {
  bind("escaped", a, {});
  return v.is_string() && v.markup;
}
bool t_in(Interp& in, const Value& v, Args& a) {
  const auto p = bind("in", a, {{"seq", kRequired}});
  return in.contains(p[0], v);
}
bool t_eq(Interp& in, const Value& v, Args& a) { return equals(in, v, bind("eq", a, {{"other", kRequired}})[0]); }
bool t_ne(Interp& in, const Value& v, Args& a) { return !equals(in, v, bind("ne", a, {{"other", kRequired}})[0]); }
bool t_lt(Interp& in, const Value& v, Args& a) { return less(in, v, bind("lt", a, {{"other", kRequired}})[0]); }
bool t_gt(Interp& in, const Value& v, Args& a) { return less(in, bind("gt", a, {{"other", kRequired}})[0], v); }
bool t_le(Interp& in, const Value& v, Args& a) {
  const Value o = bind("le", a, {{"other", kRequired}})[0];
  return less(in, v, o) || equals(in, v, o);
}
bool t_ge(Interp& in, const Value& v, Args& a) {
  const Value o = bind("ge", a, {{"other", kRequired}})[0];
  return less(in, o, v) || equals(in, v, o);
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};
const FilterEntry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},
    {"batch", f_batch},       {"capitalize", f_capitalize},
    {"center", f_center},     {"count", f_length},
    {"d", f_default},         {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape},     {"filesizeformat", f_unsupported},
    {"first", f_first},       {"float", f_float},
    {"forceescape", f_forceescape}, {"format", f_format},
    {"groupby", f_unsupported}, {"indent", f_indent},
    {"int", f_int},           {"items", f_items},
    {"join", f_join},         {"last", f_last},
    {"length", f_length},     {"list", f_list},
    {"lower", f_lower},       {"map", f_map},
    {"max", f_max},           {"min", f_min},
    {"pprint", f_unsupported}, {"random", f_unsupported},
    {"reject", f_reject},     {"rejectattr", f_rejectattr},
    {"replace", f_replace},   {"reverse", f_reverse},
    {"round", f_round},       {"safe", f_safe},
    {"select", f_select},     {"selectattr", f_selectattr},
    {"slice", f_slice},       {"sort", f_sort},
    {"string", f_string},     {"striptags", f_striptags},
    {"sum", f_sum},           {"title", f_title},
    {"tojson", f_tojson},     {"trim", f_trim},
    {"truncate", f_truncate}, {"unique", f_unique},
    {"upper", f_upper},       {"urlencode", f_unsupported},
    {"urlize", f_unsupported}, {"wordcount", f_wordcount},
    {"wordwrap", f_unsupported}, {"xmlattr", f_unsupported},
};

struct TestEntry {
  const char* name;
  TestFn fn;
};
const TestEntry kTests[] = {
    {"odd", t_odd},         {"even", t_even},       {"divisibleby", t_divisibleby},
    {"defined", t_defined}, {"undefined", t_undefined}, {"filter", t_filter},
    {"test", t_test},       {"none", t_none},       {"boolean", t_boolean},
    {"false", t_false},     {"true", t_true},       {"integer", t_integer},
    {"float", t_float},     {"lower", t_lower},     {"upper", t_upper},
    {"string", t_string},   {"mapping", t_mapping}, {"number", t_number},
    {"sequence", t_sequence}, {"iterable", t_iterable}, {"callable", t_callable},
    {"sameas", t_sameas},   {"escaped", t_escaped}, {"in", t_in},
    {"==", t_eq},           {"eq", t_eq},           {"equalto", t_eq},
    {"!=", t_ne},           {"ne", t_ne},           {">", t_gt},
    {"gt", t_gt},           {"greaterthan", t_gt},  {"ge", t_ge},
    {">=", t_ge},           {"<", t_lt},            {"lt", t_lt},
    {"lessthan", t_lt},     {"<=", t_le},           {"le", t_le},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& f : kFilters)
    if (name == f.name) return f.fn;
  return nullptr;
}

TestFn find_test(std::string_view name) {
  for (const auto& t : kTests)
    if (name == t.name) return t.fn;
  return nullptr;
}

}  // namespace synapse::jinja
