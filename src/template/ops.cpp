// Python's operators on template values, and Jinja2's attribute and item
// lookup (jinja2/sandbox.py: SandboxedEnvironment.getattr/getitem).
#include <cmath>
#include <limits>

#include "template/builtins.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace synapse::jinja {

namespace {

// Jinja2's object_type_repr, for the messages of undefined values.
std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return std::string(type_name(v)) + " object";
}

bool ascii_only(std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

[[noreturn]] void overflow() { fault("integer overflow (synapse's template integers are 64-bit)"); }

// Python's floor division and modulo of ints.
int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) fault("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) fault("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t pymod(int64_t a, int64_t b) {
  if (b == 0) fault("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  fault(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) + "' and '" + type_name(b) +
        "'");
}

}  // namespace

bool slice_range(const Value& start, const Value& stop, const Value& step, int64_t length, SliceRange& out) {
  auto bound = [](const Value& v, int64_t& x) {
    if (v.is_none()) return true;
    if (!v.is_int()) return false;
    x = v.as_int();
    return true;
  };
  int64_t st = 1;
  if (!bound(step, st)) return false;
  if (st == 0) fault("slice step cannot be zero");
  int64_t a = st < 0 ? std::numeric_limits<int64_t>::max() : 0;
  int64_t b = st < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  if (!bound(start, a) || !bound(stop, b)) return false;
  auto adjust = [&](int64_t& x) {
    if (x < 0) {
      x = x < -length ? (st < 0 ? -1 : 0) : x + length;
    } else if (x >= length) {
      x = st < 0 ? length - 1 : length;
    }
  };
  adjust(a);
  adjust(b);
  int64_t count = 0;
  if (st < 0) {
    if (b < a) count = (a - b - 1) / (-st) + 1;
  } else if (a < b) {
    count = (b - a - 1) / st + 1;
  }
  out = {a, b, st, count};
  return true;
}

Value Interp::getattr(const Value& obj, std::string_view name) {
  switch (obj.kind) {
    case Kind::undefined: undefined_error(obj);
    case Kind::string:
    case Kind::list:
    case Kind::dict: {
      if (!name.empty() && name[0] == '_')
        return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) +
                                "' object is unsafe.");
      Value m = bind_method(*this, obj, name);
      if (!m.is_undefined()) return m;
      if (obj.kind == Kind::dict)
        if (const Value* v = obj.dict->find(name)) return *v;
      break;
    }
    case Kind::object:
      if (!name.empty() && name[0] == '_') break;
      return obj.obj->attr(*this, name);
    default: break;
  }
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + std::string(name) + "'");
}

Value Interp::getitem(const Value& obj, const Value& key) {
  if (obj.kind == Kind::string) charge_size(obj);
  switch (obj.kind) {
    case Kind::undefined: undefined_error(obj);
    case Kind::string:
      if (key.is_int()) {
        const std::string& s = obj.str();
        int64_t k = key.as_int();
        if (ascii_only(s)) {
          const auto n = static_cast<int64_t>(s.size());
          if (k < 0) k += n;
          if (k >= 0 && k < n) return Value::string(std::string(1, s[static_cast<size_t>(k)]));
        } else {
          const std::u32string u = decode_utf8(s);
          const auto n = static_cast<int64_t>(u.size());
          if (k < 0) k += n;
          if (k >= 0 && k < n) {
            std::string c;
            append_utf8(c, u[static_cast<size_t>(k)]);
            return Value::string(std::move(c));
          }
        }
      }
      break;
    case Kind::list:
      if (key.is_int() && !obj.list->generator) {
        const auto& items = obj.list->items;
        int64_t k = key.as_int();
        const auto n = static_cast<int64_t>(items.size());
        if (k < 0) k += n;
        if (k >= 0 && k < n) return items[static_cast<size_t>(k)];
      }
      break;
    case Kind::dict:
      if (const Value* v = obj.dict->find(key)) return *v;
      break;
    default: break;
  }
  if (key.is_string()) {  // then the attribute of that name
    const std::string& name = key.str();
    if (!name.empty() && name[0] != '_') {
      if (obj.kind == Kind::string || obj.kind == Kind::list || obj.kind == Kind::dict) {
        Value m = bind_method(*this, obj, name);
        if (!m.is_undefined()) return m;
      } else if (obj.kind == Kind::object) {
        return obj.obj->attr(*this, name);
      }
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
  }
  return Value::undefined(object_type_repr(obj) + " has no element " + to_repr(*this, key));
}

Value Interp::slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.kind == Kind::dict) fault("unhashable type: 'slice'");
  if (obj.kind != Kind::string && !(obj.kind == Kind::list && !obj.list->generator))
    fault(std::string("'") + type_name(obj) + "' object is not subscriptable");
  charge_size(obj);
  SliceRange r;
  const bool is_str = obj.kind == Kind::string;
  const std::u32string u = is_str ? decode_utf8(obj.str()) : std::u32string();
  const auto n = static_cast<int64_t>(is_str ? u.size() : obj.list->items.size());
  if (!slice_range(start, stop, step_v, n, r))
    fault("slice indices must be integers or None or have an __index__ method");
  step(static_cast<size_t>(r.count));
  if (is_str) {
    std::u32string part;
    for (int64_t k = 0, i = r.start; k < r.count; ++k, i += r.step) part.push_back(u[static_cast<size_t>(i)]);
    return Value::string(encode_utf8(part));
  }
  std::vector<Value> part;
  for (int64_t k = 0, i = r.start; k < r.count; ++k, i += r.step) part.push_back(obj.list->items[static_cast<size_t>(i)]);
  Value v = new_list(std::move(part), obj.list->tuple);
  if (obj.list->range) {  // a range's slice is a range
    const List& src = *obj.list;
    v.list->range = true;
    v.list->range_start = src.range_start + r.start * src.range_step;
    v.list->range_stop = src.range_start + r.stop * src.range_step;
    v.list->range_step = src.range_step * r.step;
  }
  return v;
}

std::vector<Value> Interp::iterate(const Value& v) {
  charge_size(v);
  switch (v.kind) {
    case Kind::undefined: return {};
    case Kind::string: {
      const std::string& s = v.str();
      std::vector<Value> out;
      if (ascii_only(s)) {
        for (const char c : s) out.push_back(Value::string(std::string(1, c)));
      } else {
        for (const char32_t c : decode_utf8(s)) {
          std::string one;
          append_utf8(one, c);
          out.push_back(Value::string(std::move(one)));
        }
      }
      step(out.size());
      return out;
    }
    case Kind::list:
      if (v.list->generator) {
        std::vector<Value> out = std::move(v.list->items);
        v.list->items.clear();
        return out;
      }
      return v.list->items;
    case Kind::dict: {
      std::vector<Value> out;
      out.reserve(v.dict->items.size());
      for (const auto& kv : v.dict->items) out.push_back(kv.first);
      return out;
    }
    default: fault(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

bool Interp::contains(const Value& container, const Value& item) {
  charge_size(container);
  switch (container.kind) {
    case Kind::undefined: return false;
    case Kind::string:
      if (!item.is_string())
        fault(std::string("'in <string>' requires string as left operand, not ") + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::list:
      for (const Value& x : iterate(container))
        if (equals(*this, x, item)) return true;
      return false;
    case Kind::dict:
      if (!item.is_undefined()) check_hashable(item);
      return container.dict->find(item) != nullptr;
    default: fault(std::string("argument of type '") + type_name(container) + "' is not iterable");
  }
}

Value Interp::call(const Value& fn, Args& args) {
  if (fn.is_undefined()) undefined_error(fn);
  if (fn.kind != Kind::object || !fn.obj->callable())
    fault(std::string("'") + type_name(fn) + "' object is not callable");
  return fn.obj->call(*this, args);
}

Value Interp::call_filter(std::string_view name, Value input, Args& args) {
  const FilterFn f = find_filter(name);
  if (!f) fault("No filter named '" + std::string(name) + "' found.");
  return f(*this, input, args);
}

bool Interp::call_test(std::string_view name, const Value& v, Args& args) {
  const TestFn t = find_test(name);
  if (!t) fault("No test named '" + std::string(name) + "' found.");
  return t(*this, v, args);
}

Value Interp::arith(BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (op == BinOp::mod && a.is_string()) {  // str % anything: Python's printf-style formatting
    std::string s = percent_format(*this, a.str(), b);
    charge_string(s.size());
    return Value::string(std::move(s), a.markup);
  }
  if (b.is_undefined()) undefined_error(b);
  const bool seq_a = a.kind == Kind::list && !a.list->generator && !a.list->range;
  const bool seq_b = b.kind == Kind::list && !b.list->generator && !b.list->range;
  const bool ints = a.is_int() && b.is_int();
  const bool nums = a.is_number() && b.is_number();
  int64_t r = 0;
  switch (op) {
    case BinOp::add:
      if (ints) {
        if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (nums) return Value::real(a.as_real() + b.as_real());
      if (a.is_string() && b.is_string()) {
        const bool markup = a.markup || b.markup;  // Markup + str escapes the str
        std::string s = markup && !a.markup ? html_escape(a.str()) : a.str();
        s += markup && !b.markup ? html_escape(b.str()) : b.str();
        charge_string(s.size());
        return Value::string(std::move(s), markup);
      }
      if (seq_a && seq_b && a.list->tuple == b.list->tuple) {
        std::vector<Value> items = a.list->items;
        items.insert(items.end(), b.list->items.begin(), b.list->items.end());
        step(items.size());
        return new_list(std::move(items), a.list->tuple);
      }
      if (a.is_string() || seq_a)
        fault(std::string("can only concatenate ") + type_name(a) + " (not \"" + type_name(b) + "\") to " +
              type_name(a));
      unsupported("+", a, b);
    case BinOp::sub:
      if (ints) {
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (nums) return Value::real(a.as_real() - b.as_real());
      unsupported("-", a, b);
    case BinOp::mul: {
      if (ints) {
        if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (nums) return Value::real(a.as_real() * b.as_real());
      const Value* seq = b.is_int() ? &a : a.is_int() ? &b : nullptr;
      const Value* count = b.is_int() ? &b : &a;
      if (seq && seq->is_string()) {
        const int64_t n = std::max<int64_t>(0, count->as_int());
        if (!seq->str().empty() && static_cast<uint64_t>(n) > opt_.max_output / seq->str().size())
          charge_string(opt_.max_output + 1);  // too long: the limit's error
        std::string s;
        for (int64_t k = 0; k < n; ++k) s += seq->str();
        charge_string(s.size());
        return Value::string(std::move(s), seq->markup);
      }
      if (seq && (seq == &a ? seq_a : seq_b)) {
        const int64_t n = std::max<int64_t>(0, count->as_int());
        const auto& src = seq->list->items;
        if (n > 0 && !src.empty()) step(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 40)) * src.size());
        std::vector<Value> items;
        for (int64_t k = 0; k < n; ++k) items.insert(items.end(), src.begin(), src.end());
        return new_list(std::move(items), seq->list->tuple);
      }
      unsupported("*", a, b);
    }
    case BinOp::div:
      if (!nums) unsupported("/", a, b);
      if (b.as_real() == 0) fault("division by zero");
      return Value::real(a.as_real() / b.as_real());
    case BinOp::floordiv:
      if (ints) return Value::integer(floordiv(a.as_int(), b.as_int()));
      if (!nums) unsupported("//", a, b);
      if (b.as_real() == 0) fault("float floor division by zero");
      return Value::real(std::floor(a.as_real() / b.as_real()));
    case BinOp::mod:
      if (ints) return Value::integer(pymod(a.as_int(), b.as_int()));
      if (nums) {
        const double x = a.as_real(), y = b.as_real();
        if (y == 0) fault("float modulo");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::real(m);
      }
      unsupported("%", a, b);
    case BinOp::pow:
      if (ints && b.as_int() >= 0) {
        int64_t base = a.as_int(), e = b.as_int(), acc = 1;
        while (e > 0) {
          if ((e & 1) && __builtin_mul_overflow(acc, base, &r)) overflow();
          if (e & 1) acc = r;
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &r)) overflow();
          if (e > 0) base = r;
        }
        return Value::integer(acc);
      }
      if (!nums) unsupported("** or pow()", a, b);
      if (a.as_real() == 0 && b.as_real() < 0) fault("0.0 cannot be raised to a negative power");
      if (a.as_real() < 0 && std::floor(b.as_real()) != b.as_real())
        fault("a negative number to a fractional power is complex (not supported)");
      return Value::real(std::pow(a.as_real(), b.as_real()));
  }
  unsupported("?", a, b);
}

}  // namespace synapse::jinja
