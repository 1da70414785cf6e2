// The methods of str, list and dict that templates call (Python's, as
// Jinja2's SandboxedEnvironment allows them), and the globals: range, dict,
// namespace, cycler, joiner, raise_exception, strftime_now.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "template/builtins.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace synapse::jinja {

namespace {

const std::optional<Value> kNone = Value::none();
constexpr std::nullopt_t kRequired = std::nullopt;

using Method = Value (*)(Interp&, Function&, Args&);

const std::string& self_str(const Function& f) { return f.self.str(); }
List& self_list(const Function& f) { return *f.self.list; }
Dict& self_dict(const Function& f) { return *f.self.dict; }

Value str_result(Interp& in, std::string s, bool markup = false) {
  in.charge_string(s.size());
  return Value::string(std::move(s), markup);
}

const std::string& need_str(const Value& v, const char* what) {
  if (!v.is_string()) fault(std::string(what) + " must be str, not " + type_name(v));
  return v.str();
}

// Python's start/end arguments of find, count, startswith, ...: a range of
// code points [b, e) of a string of n.
void index_range(const Value& start, const Value& end, int64_t n, int64_t& b, int64_t& e) {
  auto clamp = [n](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    if (!v.is_int()) fault("slice indices must be integers or None");
    int64_t x = v.as_int();
    if (x < 0) x = std::max<int64_t>(0, x + n);
    return std::min(x, n);
  };
  b = clamp(start, 0);
  e = clamp(end, n);
}

// ------------------------------------------------------------- str methods

Value strip_impl(Interp& in, Function& f, Args& a, bool left, bool right, const char* name) {
  const auto p = bind(name, a, {{"chars", kNone}});
  if (!p[0].is_none() && !p[0].is_string()) fault(std::string(name) + " arg must be None or str");
  return str_result(in, py_strip(self_str(f), p[0].is_string() ? &p[0].str() : nullptr, left, right), f.self.markup);
}
Value m_strip(Interp& in, Function& f, Args& a) { return strip_impl(in, f, a, true, true, "strip"); }
Value m_lstrip(Interp& in, Function& f, Args& a) { return strip_impl(in, f, a, true, false, "lstrip"); }
Value m_rstrip(Interp& in, Function& f, Args& a) { return strip_impl(in, f, a, false, true, "rstrip"); }

std::vector<std::string> split_impl(const std::string& s, const Value& sepv, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sepv.is_none()) {  // runs of whitespace; none at the ends
    const std::u32string u = decode_utf8(s);
    if (!from_right) {
      size_t k = 0;
      while (true) {
        while (k < u.size() && is_space(u[k])) ++k;
        if (k >= u.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
          out.push_back(encode_utf8(u.substr(k)));  // the rest, trailing whitespace and all
          break;
        }
        size_t e = k;
        while (e < u.size() && !is_space(u[e])) ++e;
        out.push_back(encode_utf8(u.substr(k, e - k)));
        k = e;
      }
    } else {
      size_t k = u.size();
      while (true) {
        while (k > 0 && is_space(u[k - 1])) --k;
        if (k == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
          out.push_back(encode_utf8(u.substr(0, k)));  // the rest, leading whitespace and all
          break;
        }
        size_t b = k;
        while (b > 0 && !is_space(u[b - 1])) --b;
        out.push_back(encode_utf8(u.substr(b, k - b)));
        k = b;
      }
      std::reverse(out.begin(), out.end());
    }
    return out;
  }
  const std::string& sep = need_str(sepv, "separator");
  if (sep.empty()) fault("empty separator");
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t hit = s.find(sep, pos);
      if (hit == std::string::npos) break;
      out.push_back(s.substr(pos, hit - pos));
      pos = hit + sep.size();
    }
    out.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep.size()) break;
      const size_t hit = s.rfind(sep, end - sep.size());
      if (hit == std::string::npos) break;
      out.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
      end = hit;
    }
    out.push_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
  }
  return out;
}

Value split_method(Interp& in, Function& f, Args& a, bool right) {
  const auto p = bind(right ? "rsplit" : "split", a, {{"sep", kNone}, {"maxsplit", Value::integer(-1)}});
  if (!p[1].is_int()) fault("maxsplit must be an integer");
  std::vector<Value> items;
  for (auto& s : split_impl(self_str(f), p[0], p[1].as_int(), right))
    items.push_back(Value::string(std::move(s), f.self.markup));
  in.step(items.size());
  return in.new_list(std::move(items));
}
Value m_split(Interp& in, Function& f, Args& a) { return split_method(in, f, a, false); }
Value m_rsplit(Interp& in, Function& f, Args& a) { return split_method(in, f, a, true); }

Value m_splitlines(Interp& in, Function& f, Args& a) {
  const auto p = bind("splitlines", a, {{"keepends", Value::boolean(false)}});
  const std::u32string u = decode_utf8(self_str(f));
  std::vector<Value> items;
  size_t start = 0;
  for (size_t k = 0; k < u.size(); ++k) {
    const char32_t c = u[k];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
        c == 0x2028 || c == 0x2029) {
      size_t end = k;
      if (c == '\r' && k + 1 < u.size() && u[k + 1] == '\n') ++k;
      items.push_back(Value::string(encode_utf8(u.substr(start, (truthy(p[0]) ? k + 1 : end) - start)), f.self.markup));
      start = k + 1;
    }
  }
  if (start < u.size()) items.push_back(Value::string(encode_utf8(u.substr(start)), f.self.markup));
  return in.new_list(std::move(items));
}

Value affix_test(Interp& in, Function& f, Args& a, bool prefix) {
  const auto p = bind(prefix ? "startswith" : "endswith", a, {{"prefix", kRequired}, {"start", kNone}, {"end", kNone}});
  const std::u32string u = decode_utf8(self_str(f));
  int64_t b, e;
  index_range(p[1], p[2], static_cast<int64_t>(u.size()), b, e);
  std::vector<Value> options;
  if (p[0].kind == Kind::list && p[0].list->tuple)
    options = p[0].list->items;
  else if (p[0].is_string())
    options.push_back(p[0]);
  else
    fault(std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " +
          type_name(p[0]));
  const std::u32string_view window =
      b <= e ? std::u32string_view(u).substr(static_cast<size_t>(b), static_cast<size_t>(e - b)) : std::u32string_view();
  for (const Value& o : options) {
    const std::u32string x = decode_utf8(need_str(o, "tuple for startswith"));
    if (b > e) continue;
    if (x.size() > window.size()) continue;
    if (prefix ? window.substr(0, x.size()) == x : window.substr(window.size() - x.size()) == x) return Value::boolean(true);
  }
  in.step();
  return Value::boolean(false);
}
Value m_startswith(Interp& in, Function& f, Args& a) { return affix_test(in, f, a, true); }
Value m_endswith(Interp& in, Function& f, Args& a) { return affix_test(in, f, a, false); }

Value m_replace(Interp& in, Function& f, Args& a) {
  const auto p = bind("replace", a, {{"old", kRequired}, {"new", kRequired}, {"count", Value::integer(-1)}});
  Args fa;
  fa.pos = {p[0], p[1]};
  if (p[2].as_int() >= 0) fa.pos.push_back(p[2]);
  need_str(p[0], "replace() argument 1");
  need_str(p[1], "replace() argument 2");
  Value self = f.self;
  return in.call_filter("replace", self, fa);
}

Value case_method(Interp& in, Function& f, Args& a, const char* name) {
  bind(name, a, {});
  const std::string_view n = name;
  if (n == "upper") return str_result(in, upper_string(self_str(f)), f.self.markup);
  std::u32string u = decode_utf8(self_str(f));
  if (n == "lower" || n == "casefold") {
    for (auto& c : u) c = to_lower(c);
  } else if (n == "swapcase") {
    for (auto& c : u) c = is_lower_case(c) ? to_upper(c) : to_lower(c);
  } else if (n == "capitalize") {
    for (size_t k = 0; k < u.size(); ++k) u[k] = k == 0 ? to_upper(u[k]) : to_lower(u[k]);
  } else {  // title: a cased letter after a cased letter is lower, else upper
    bool prev_cased = false;
    for (auto& c : u) {
      const bool cased = is_lower_case(c) || is_upper_case(c);
      if (cased) c = prev_cased ? to_lower(c) : to_upper(c);
      prev_cased = cased;
    }
  }
  return str_result(in, encode_utf8(u), f.self.markup);
}
Value m_upper(Interp& in, Function& f, Args& a) { return case_method(in, f, a, "upper"); }
Value m_lower(Interp& in, Function& f, Args& a) { return case_method(in, f, a, "lower"); }
Value m_casefold(Interp& in, Function& f, Args& a) { return case_method(in, f, a, "casefold"); }
Value m_swapcase(Interp& in, Function& f, Args& a) { return case_method(in, f, a, "swapcase"); }
Value m_capitalize(Interp& in, Function& f, Args& a) { return case_method(in, f, a, "capitalize"); }
Value m_title(Interp& in, Function& f, Args& a) { return case_method(in, f, a, "title"); }

// find, rfind, index, rindex, count: positions in code points.
Value search(Interp& in, Function& f, Args& a, const char* name) {
  const auto p = bind(name, a, {{"sub", kRequired}, {"start", kNone}, {"end", kNone}});
  const std::u32string u = decode_utf8(self_str(f));
  const std::u32string sub = decode_utf8(need_str(p[0], "must be str"));
  int64_t b, e;
  index_range(p[1], p[2], static_cast<int64_t>(u.size()), b, e);
  in.step(u.size() / 64);
  const std::string_view n = name;
  if (n == "count") {
    if (b > e) return Value::integer(0);
    if (sub.empty()) return Value::integer(e - b + 1);
    int64_t c = 0;
    for (size_t k = static_cast<size_t>(b); k + sub.size() <= static_cast<size_t>(e);) {
      if (u.compare(k, sub.size(), sub) == 0) {
        ++c;
        k += sub.size();
      } else {
        ++k;
      }
    }
    return Value::integer(c);
  }
  const bool right = n == "rfind" || n == "rindex";
  int64_t found = -1;
  if (b <= e && static_cast<int64_t>(sub.size()) <= e - b) {
    const std::u32string_view w = std::u32string_view(u).substr(static_cast<size_t>(b), static_cast<size_t>(e - b));
    const size_t hit = right ? w.rfind(sub) : w.find(sub);
    if (hit != std::u32string_view::npos) found = b + static_cast<int64_t>(hit);
  }
  if (found < 0 && (n == "index" || n == "rindex")) fault("substring not found");
  return Value::integer(found);
}
Value m_find(Interp& in, Function& f, Args& a) { return search(in, f, a, "find"); }
Value m_rfind(Interp& in, Function& f, Args& a) { return search(in, f, a, "rfind"); }
Value m_index(Interp& in, Function& f, Args& a) { return search(in, f, a, "index"); }
Value m_rindex(Interp& in, Function& f, Args& a) { return search(in, f, a, "rindex"); }
Value m_count(Interp& in, Function& f, Args& a) { return search(in, f, a, "count"); }

Value m_join(Interp& in, Function& f, Args& a) {
  const auto p = bind("join", a, {{"iterable", kRequired}});
  std::string out;
  const std::vector<Value> items = in.iterate(p[0]);
  for (size_t k = 0; k < items.size(); ++k) {
    if (!items[k].is_string())
      fault("sequence item " + std::to_string(k) + ": expected str instance, " + type_name(items[k]) + " found");
    if (k) out += self_str(f);
    out += f.self.markup && !items[k].markup ? html_escape(items[k].str()) : items[k].str();
    in.check_size(out.size());
  }
  return str_result(in, std::move(out), f.self.markup);
}

Value m_format(Interp& in, Function& f, Args& a) {
  return str_result(in, python_format(in, self_str(f), a), f.self.markup);
}

Value char_class(Function& f, Args& a, const char* name, bool (*pred)(char32_t)) {
  bind(name, a, {});
  const std::u32string u = decode_utf8(self_str(f));
  if (u.empty()) return Value::boolean(false);
  return Value::boolean(std::all_of(u.begin(), u.end(), pred));
}
bool digit(char32_t c) { return c >= '0' && c <= '9'; }
Value m_isdigit(Interp&, Function& f, Args& a) { return char_class(f, a, "isdigit", digit); }
Value m_isdecimal(Interp&, Function& f, Args& a) { return char_class(f, a, "isdecimal", digit); }
Value m_isnumeric(Interp&, Function& f, Args& a) { return char_class(f, a, "isnumeric", digit); }
Value m_isalpha(Interp&, Function& f, Args& a) { return char_class(f, a, "isalpha", is_alpha); }
Value m_isalnum(Interp&, Function& f, Args& a) { return char_class(f, a, "isalnum", is_alnum); }
Value m_isspace(Interp&, Function& f, Args& a) { return char_class(f, a, "isspace", is_space); }
Value cased(Function& f, Args& a, const char* name, bool want_lower) {
  bind(name, a, {});
  bool any = false;
  for (const char32_t c : decode_utf8(self_str(f))) {
    if (is_lower_case(c)) {
      if (!want_lower) return Value::boolean(false);
      any = true;
    } else if (is_upper_case(c)) {
      if (want_lower) return Value::boolean(false);
      any = true;
    }
  }
  return Value::boolean(any);
}
Value m_islower(Interp&, Function& f, Args& a) { return cased(f, a, "islower", true); }
Value m_isupper(Interp&, Function& f, Args& a) { return cased(f, a, "isupper", false); }

Value pad(Interp& in, Function& f, Args& a, const char* name) {
  const auto p = bind(name, a, {{"width", kRequired}, {"fillchar", Value::string(" ")}});
  if (!p[0].is_int()) fault(std::string(name) + "() width must be an integer");
  const std::u32string fill = decode_utf8(need_str(p[1], "fillchar"));
  if (fill.size() != 1) fault("The fill character must be exactly one character long");
  const std::u32string u = decode_utf8(self_str(f));
  const int64_t width = p[0].as_int();
  const auto n = static_cast<int64_t>(u.size());
  if (width <= n) return f.self;
  in.charge_string(static_cast<size_t>(width));
  const int64_t marg = width - n;
  const std::string_view nm = name;
  int64_t left = nm == "ljust" ? 0 : nm == "rjust" ? marg : marg / 2 + (marg & width & 1);
  std::u32string out(static_cast<size_t>(left), fill[0]);
  out += u;
  out.append(static_cast<size_t>(marg - left), fill[0]);
  return Value::string(encode_utf8(out), f.self.markup);
}
Value m_center(Interp& in, Function& f, Args& a) { return pad(in, f, a, "center"); }
Value m_ljust(Interp& in, Function& f, Args& a) { return pad(in, f, a, "ljust"); }
Value m_rjust(Interp& in, Function& f, Args& a) { return pad(in, f, a, "rjust"); }

Value m_zfill(Interp& in, Function& f, Args& a) {
  const auto p = bind("zfill", a, {{"width", kRequired}});
  if (!p[0].is_int()) fault("zfill() width must be an integer");
  std::u32string u = decode_utf8(self_str(f));
  const int64_t width = p[0].as_int();
  if (width <= static_cast<int64_t>(u.size())) return f.self;
  in.charge_string(static_cast<size_t>(width));
  const size_t fill = static_cast<size_t>(width) - u.size();
  const size_t at = !u.empty() && (u[0] == '+' || u[0] == '-') ? 1 : 0;
  u.insert(at, fill, U'0');
  return Value::string(encode_utf8(u));
}

Value partition(Interp& in, Function& f, Args& a, bool right) {
  const auto p = bind(right ? "rpartition" : "partition", a, {{"sep", kRequired}});
  const std::string& sep = need_str(p[0], "separator");
  if (sep.empty()) fault("empty separator");
  const std::string& s = self_str(f);
  const size_t hit = right ? s.rfind(sep) : s.find(sep);
  const bool m = f.self.markup;
  std::vector<Value> parts;
  if (hit == std::string::npos) {
    parts = right ? std::vector<Value>{Value::string("", m), Value::string("", m), f.self}
                  : std::vector<Value>{f.self, Value::string("", m), Value::string("", m)};
  } else {
    parts = {Value::string(s.substr(0, hit), m), Value::string(sep, m), Value::string(s.substr(hit + sep.size()), m)};
  }
  return in.new_list(std::move(parts), true);
}
Value m_partition(Interp& in, Function& f, Args& a) { return partition(in, f, a, false); }
Value m_rpartition(Interp& in, Function& f, Args& a) { return partition(in, f, a, true); }

Value m_removeprefix(Interp&, Function& f, Args& a) {
  const std::string& x = need_str(bind("removeprefix", a, {{"prefix", kRequired}})[0], "removeprefix() argument");
  const std::string& s = self_str(f);
  if (s.compare(0, x.size(), x) == 0) return Value::string(s.substr(x.size()));
  return f.self;
}
Value m_removesuffix(Interp&, Function& f, Args& a) {
  const std::string& x = need_str(bind("removesuffix", a, {{"suffix", kRequired}})[0], "removesuffix() argument");
  const std::string& s = self_str(f);
  if (!x.empty() && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
    return Value::string(s.substr(0, s.size() - x.size()));
  return f.self;
}

// ------------------------------------------------------------ list methods

Value m_append(Interp& in, Function& f, Args& a) {
  const auto p = bind("append", a, {{"object", kRequired}});
  in.step();
  self_list(f).items.push_back(p[0]);
  return Value::none();
}
Value m_extend(Interp& in, Function& f, Args& a) {
  const auto p = bind("extend", a, {{"iterable", kRequired}});
  std::vector<Value> items = in.iterate(p[0]);
  in.step(items.size());
  auto& dst = self_list(f).items;
  dst.insert(dst.end(), items.begin(), items.end());
  return Value::none();
}
Value m_insert(Interp& in, Function& f, Args& a) {
  const auto p = bind("insert", a, {{"index", kRequired}, {"object", kRequired}});
  if (!p[0].is_int()) fault("'" + std::string(type_name(p[0])) + "' object cannot be interpreted as an integer");
  auto& items = self_list(f).items;
  const auto n = static_cast<int64_t>(items.size());
  int64_t k = p[0].as_int();
  if (k < 0) k = std::max<int64_t>(0, k + n);
  k = std::min(k, n);
  in.step();
  items.insert(items.begin() + k, p[1]);
  return Value::none();
}
Value m_pop_list(Interp&, Function& f, Args& a) {
  const auto p = bind("pop", a, {{"index", Value::integer(-1)}});
  if (!p[0].is_int()) fault("'" + std::string(type_name(p[0])) + "' object cannot be interpreted as an integer");
  auto& items = self_list(f).items;
  if (items.empty()) fault("pop from empty list");
  const auto n = static_cast<int64_t>(items.size());
  int64_t k = p[0].as_int();
  if (k < 0) k += n;
  if (k < 0 || k >= n) fault("pop index out of range");
  Value v = items[static_cast<size_t>(k)];
  items.erase(items.begin() + k);
  return v;
}
Value m_remove(Interp& in, Function& f, Args& a) {
  const auto p = bind("remove", a, {{"value", kRequired}});
  auto& items = self_list(f).items;
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (equals(in, *it, p[0])) {
      items.erase(it);
      return Value::none();
    }
  }
  fault("list.remove(x): x not in list");
}
Value m_list_index(Interp& in, Function& f, Args& a) {
  const auto p = bind("index", a, {{"value", kRequired}, {"start", kNone}, {"stop", kNone}});
  const auto& items = self_list(f).items;
  int64_t b, e;
  index_range(p[1], p[2], static_cast<int64_t>(items.size()), b, e);
  for (int64_t k = b; k < e; ++k)
    if (equals(in, items[static_cast<size_t>(k)], p[0])) return Value::integer(k);
  fault(to_repr(in, p[0]) + " is not in list");
}
Value m_list_count(Interp& in, Function& f, Args& a) {
  const auto p = bind("count", a, {{"value", kRequired}});
  int64_t c = 0;
  for (const Value& x : self_list(f).items) c += equals(in, x, p[0]) ? 1 : 0;
  return Value::integer(c);
}
Value m_reverse(Interp&, Function& f, Args& a) {
  bind("reverse", a, {});
  std::reverse(self_list(f).items.begin(), self_list(f).items.end());
  return Value::none();
}
Value m_sort(Interp& in, Function& f, Args& a) {
  const auto p = bind("sort", a, {{"reverse", Value::boolean(false)}});
  auto& items = self_list(f).items;
  in.step(items.size() * 8);
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value& x, const Value& y) { return truthy(p[0]) ? less(in, y, x) : less(in, x, y); });
  return Value::none();
}
Value m_clear(Interp&, Function& f, Args& a) {
  bind("clear", a, {});
  if (f.self.kind == Kind::list)
    self_list(f).items.clear();
  else
    self_dict(f).clear();
  return Value::none();
}
Value m_copy(Interp& in, Function& f, Args& a) {
  bind("copy", a, {});
  if (f.self.kind == Kind::list) return in.new_list(self_list(f).items);
  Value d = in.new_dict();
  for (const auto& kv : self_dict(f).items) d.dict->set(kv.first, kv.second);
  return d;
}

// ------------------------------------------------------------ dict methods

Value m_get(Interp&, Function& f, Args& a) {
  const auto p = bind("get", a, {{"key", kRequired}, {"default", kNone}});
  if (!p[0].is_undefined()) check_hashable(p[0]);
  if (const Value* v = self_dict(f).find(p[0])) return *v;
  return p[1];
}
Value m_items(Interp& in, Function& f, Args& a) {
  bind("items", a, {});
  std::vector<Value> out;
  for (const auto& kv : self_dict(f).items) out.push_back(in.new_list({kv.first, kv.second}, true));
  return in.new_list(std::move(out));
}
Value m_keys(Interp& in, Function& f, Args& a) {
  bind("keys", a, {});
  std::vector<Value> out;
  for (const auto& kv : self_dict(f).items) out.push_back(kv.first);
  return in.new_list(std::move(out));
}
Value m_values(Interp& in, Function& f, Args& a) {
  bind("values", a, {});
  std::vector<Value> out;
  for (const auto& kv : self_dict(f).items) out.push_back(kv.second);
  return in.new_list(std::move(out));
}
Value m_pop_dict(Interp& in, Function& f, Args& a) {
  if (a.pos.empty() || a.pos.size() > 2 || !a.kw.empty()) fault("pop expected 1 or 2 arguments");
  const Value& key = a.pos[0];
  check_hashable(key);
  if (const Value* v = self_dict(f).find(key)) {
    Value r = *v;
    self_dict(f).erase(key);
    return r;
  }
  if (a.pos.size() == 2) return a.pos[1];
  fault("KeyError: " + to_repr(in, key));
}
Value m_popitem(Interp& in, Function& f, Args& a) {
  bind("popitem", a, {});
  auto& d = self_dict(f);
  if (d.items.empty()) fault("popitem(): dictionary is empty");
  auto kv = d.items.back();
  d.erase(kv.first);
  return in.new_list({kv.first, kv.second}, true);
}
void dict_update(Interp& in, Dict& d, const Value& other) {
  if (other.kind == Kind::dict) {
    for (const auto& kv : other.dict->items) d.set(kv.first, kv.second);
    return;
  }
  for (const Value& pair : in.iterate(other)) {
    const std::vector<Value> kv = in.iterate(pair);
    if (kv.size() != 2)
      fault("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
    d.set(kv[0], kv[1]);
  }
}
Value m_update(Interp& in, Function& f, Args& a) {
  if (a.pos.size() > 1) fault("update expected at most 1 argument");
  if (!a.pos.empty()) dict_update(in, self_dict(f), a.pos[0]);
  for (const auto& kv : a.kw) self_dict(f).set(kv.first, kv.second);
  return Value::none();
}
Value m_setdefault(Interp&, Function& f, Args& a) {
  const auto p = bind("setdefault", a, {{"key", kRequired}, {"default", kNone}});
  if (const Value* v = self_dict(f).find(p[0])) return *v;
  self_dict(f).set(p[0], p[1]);
  return p[1];
}

struct MethodEntry {
  const char* name;
  Method fn;
};
const MethodEntry kStrMethods[] = {
    {"strip", m_strip},           {"lstrip", m_lstrip},         {"rstrip", m_rstrip},
    {"split", m_split},           {"rsplit", m_rsplit},         {"splitlines", m_splitlines},
    {"startswith", m_startswith}, {"endswith", m_endswith},     {"replace", m_replace},
    {"upper", m_upper},           {"lower", m_lower},           {"casefold", m_casefold},
    {"swapcase", m_swapcase},     {"capitalize", m_capitalize}, {"title", m_title},
    {"find", m_find},             {"rfind", m_rfind},           {"index", m_index},
    {"rindex", m_rindex},         {"count", m_count},           {"join", m_join},
    {"format", m_format},         {"isdigit", m_isdigit},       {"isdecimal", m_isdecimal},
    {"isnumeric", m_isnumeric},   {"isalpha", m_isalpha},       {"isalnum", m_isalnum},
    {"isspace", m_isspace},       {"islower", m_islower},       {"isupper", m_isupper},
    {"center", m_center},         {"ljust", m_ljust},           {"rjust", m_rjust},
    {"zfill", m_zfill},           {"partition", m_partition},   {"rpartition", m_rpartition},
    {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix},
};
const MethodEntry kListMethods[] = {
    {"append", m_append}, {"extend", m_extend}, {"insert", m_insert},   {"pop", m_pop_list},
    {"remove", m_remove}, {"index", m_list_index}, {"count", m_list_count}, {"reverse", m_reverse},
    {"sort", m_sort},     {"clear", m_clear},   {"copy", m_copy},
};
const MethodEntry kTupleMethods[] = {{"index", m_list_index}, {"count", m_list_count}};
const MethodEntry kDictMethods[] = {
    {"get", m_get},   {"items", m_items},     {"keys", m_keys},     {"values", m_values},
    {"pop", m_pop_dict}, {"popitem", m_popitem}, {"update", m_update}, {"setdefault", m_setdefault},
    {"copy", m_copy}, {"clear", m_clear},
};

template <size_t N>
Method find_method(const MethodEntry (&table)[N], std::string_view name) {
  for (const auto& m : table)
    if (name == m.name) return m.fn;
  return nullptr;
}

// --------------------------------------------------------------- globals

Value g_range(Interp& in, Function&, Args& a) {
  if (!a.kw.empty()) fault("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) fault("range expected at most 3 arguments, got " + std::to_string(a.pos.size()));
  for (const Value& v : a.pos) {
    if (v.is_undefined()) undefined_error(v);
    if (!v.is_int()) fault(std::string("'") + type_name(v) + "' object cannot be interpreted as an integer");
  }
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) fault("range() arg 3 must not be zero");
  // Jinja2's sandbox: MAX_RANGE = 100000.
  const long double count = step > 0 ? (start < stop ? (static_cast<long double>(stop) - start - 1) / step + 1 : 0)
                                     : (start > stop ? (static_cast<long double>(start) - stop - 1) / -step + 1 : 0);
  if (count > 100000)
    fault("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> out;
  for (int64_t k = 0, x = start; k < static_cast<int64_t>(count); ++k, x += step) out.push_back(Value::integer(x));
  in.step(out.size());
  Value r = in.new_list(std::move(out), true);
  r.list->range = true;
  r.list->range_start = start;
  r.list->range_stop = stop;
  r.list->range_step = step;
  return r;
}

Value g_dict(Interp& in, Function&, Args& a) {
  if (a.pos.size() > 1) fault("dict expected at most 1 argument");
  Value d = in.new_dict();
  if (!a.pos.empty()) dict_update(in, *d.dict, a.pos[0]);
  for (const auto& kv : a.kw) d.dict->set(kv.first, kv.second);
  return d;
}

Value g_namespace(Interp& in, Function&, Args& a) {
  if (a.pos.size() > 1) fault("namespace expected at most 1 argument");
  in.step();
  Namespace* ns = in.heap().make<Namespace>();
  if (!a.pos.empty()) dict_update(in, ns->attrs, a.pos[0]);
  for (const auto& kv : a.kw) ns->attrs.set(kv.first, kv.second);
  return Value::of(ns);
}

Value g_raise_exception(Interp& in, Function&, Args& a) {
  const auto p = bind("raise_exception", a, {{"message", kRequired}});
  throw Raised{to_str(in, p[0])};
}

Value g_strftime_now(Interp& in, Function&, Args& a) {
  const auto p = bind("strftime_now", a, {{"format", kRequired}});
  const std::string& fmt = need_str(p[0], "strftime() argument 1");
  std::tm tm{};
  if (in.options().now) {
    tm = in.options().now();
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  // Python's datetime.strftime handles %f (microseconds), %z and %Z (empty
  // for a naive datetime) itself; the rest is C's strftime.
  std::string f;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] == '%' && k + 1 < fmt.size()) {
      const char c = fmt[k + 1];
      if (c == 'f') {
        f += "000000";
        ++k;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++k;
        continue;
      }
      f.push_back('%');
      f.push_back(c);
      ++k;
      continue;
    }
    f.push_back(fmt[k]);
  }
  if (f.size() > 4096) fault("strftime format too long");
  f.push_back('\x01');  // so that an empty result is told from an error
  std::string out(f.size() * 64 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), f.c_str(), &tm);
  if (n == 0) fault("strftime failed");
  out.resize(n - 1);
  return str_result(in, std::move(out));
}

struct Cycler : Object {
  std::vector<Value> items;
  size_t pos = 0;
  const char* type_name() const override { return "Cycler"; }
  Value attr(Interp& in, std::string_view name) override {
    if (name == "current") return items[pos];
    if (name == "next")
      return in.new_function("next", [](Interp&, Function& f, Args&) -> Value {
        auto* c = static_cast<Cycler*>(f.self.obj);
        Value v = c->items[c->pos];
        c->pos = (c->pos + 1) % c->items.size();
        return v;
      }, Value::of(this));
    if (name == "reset")
      return in.new_function("reset", [](Interp&, Function& f, Args&) -> Value {
        static_cast<Cycler*>(f.self.obj)->pos = 0;
        return Value::none();
      }, Value::of(this));
    return Object::attr(in, name);
  }
};

Value g_cycler(Interp& in, Function&, Args& a) {
  if (a.pos.empty()) fault("at least one item has to be provided");
  in.step();
  Cycler* c = in.heap().make<Cycler>();
  c->items = a.pos;
  return Value::of(c);
}

struct Joiner : Object {
  std::string sep;
  bool used = false;
  const char* type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Interp&, Args&) override {
    if (!used) {
      used = true;
      return Value::string("");
    }
    return Value::string(sep);
  }
};

Value g_joiner(Interp& in, Function&, Args& a) {
  const auto p = bind("joiner", a, {{"sep", Value::string(", ")}});
  in.step();
  Joiner* j = in.heap().make<Joiner>();
  j->sep = to_str(in, p[0]);
  return Value::of(j);
}

}  // namespace

Value bind_method(Interp& in, const Value& self, std::string_view name) {
  Method m = nullptr;
  if (self.kind == Kind::string)
    m = find_method(kStrMethods, name);
  else if (self.kind == Kind::list && !self.list->generator)
    m = self.list->tuple || self.list->range ? find_method(kTupleMethods, name) : find_method(kListMethods, name);
  else if (self.kind == Kind::dict)
    m = find_method(kDictMethods, name);
  if (!m) return Value::undefined();
  in.step();
  in.charge_size(self);  // most methods scan or copy their object
  Function* f = in.heap().make<Function>();
  f->name = std::string(name);
  f->fn = m;
  f->self = self;
  return Value::of(f);
}

void define_globals(Interp& in, Scope& globals) {
  static const std::pair<const char*, Method> fns[] = {
      {"range", g_range},       {"dict", g_dict},       {"namespace", g_namespace},
      {"raise_exception", g_raise_exception}, {"strftime_now", g_strftime_now},
      {"cycler", g_cycler},     {"joiner", g_joiner},
  };
  for (const auto& [name, fn] : fns) globals.set(name, in.new_function(name, fn));
}

}  // namespace synapse::jinja
