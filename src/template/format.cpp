// Python's str.format (as Jinja2's SandboxedFormatter runs it) and the %
// operator of str (printf-style), and Python's int() and float() of text.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "template/builtins.hpp"
#include "template/interp.hpp"
#include "template/text.hpp"

namespace synapse::jinja {

namespace {

// ------------------------------------------------------- format mini-language

struct Spec {
  char32_t fill = ' ';
  char align = 0;  // < > ^ =
  char sign = 0;
  bool alt = false, zero = false;
  int64_t width = -1, precision = -1;
  char grouping = 0;
  char type = 0;
};

Spec parse_spec(const std::string& s) {
  Spec sp;
  const std::u32string u = decode_utf8(s);
  size_t k = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (u.size() >= 2 && is_align(u[1])) {
    sp.fill = u[0];
    sp.align = static_cast<char>(u[1]);
    k = 2;
  } else if (!u.empty() && is_align(u[0])) {
    sp.align = static_cast<char>(u[0]);
    k = 1;
  }
  if (k < u.size() && (u[k] == '+' || u[k] == '-' || u[k] == ' ')) sp.sign = static_cast<char>(u[k++]);
  if (k < u.size() && u[k] == '#') {
    sp.alt = true;
    ++k;
  }
  if (k < u.size() && u[k] == '0') {
    sp.zero = true;
    ++k;
  }
  auto number = [&]() {
    int64_t n = 0;
    while (k < u.size() && u[k] >= '0' && u[k] <= '9') {
      n = n * 10 + (u[k++] - '0');
      if (n > 100000) fault("Too many decimal digits in format string");
    }
    return n;
  };
  if (k < u.size() && u[k] >= '0' && u[k] <= '9') sp.width = number();
  if (k < u.size() && (u[k] == ',' || u[k] == '_')) sp.grouping = static_cast<char>(u[k++]);
  if (k < u.size() && u[k] == '.') {
    ++k;
    if (k >= u.size() || u[k] < '0' || u[k] > '9') fault("Format specifier missing precision");
    sp.precision = number();
  }
  if (k < u.size()) sp.type = static_cast<char>(u[k++]);
  if (k != u.size()) fault("Invalid format specifier");
  return sp;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  const size_t n = digits.size();
  for (size_t k = 0; k < n; ++k) {
    out.push_back(digits[k]);
    if (sep && (n - k - 1) % 3 == 0 && k + 1 < n) out.push_back(sep);
  }
  return out;
}

std::string apply_width(Interp& in, const Spec& sp, std::string sign, std::string body, char default_align) {
  // "0" pads numbers after the sign, and strings on the right.
  const char align = sp.align ? sp.align : sp.zero && default_align != '<' ? '=' : default_align;
  const char32_t fill = sp.zero && !sp.align ? U'0' : sp.fill;
  const auto len = static_cast<int64_t>(count_code_points(sign) + count_code_points(body));
  if (sp.width <= len) return sign + body;
  in.charge_string(static_cast<size_t>(sp.width));
  const int64_t pad = sp.width - len;
  std::string f;
  append_utf8(f, fill);
  auto rep = [&](int64_t n) {
    std::string s;
    for (int64_t k = 0; k < n; ++k) s += f;
    return s;
  };
  switch (align) {
    case '<': return sign + body + rep(pad);
    case '^': return rep(pad / 2) + sign + body + rep(pad - pad / 2);
    case '=': return sign + rep(pad) + body;
    default: return rep(pad) + sign + body;
  }
}

std::string format_float(double x, const Spec& sp, char type) {
  char buf[512];
  const int prec = static_cast<int>(std::min<int64_t>(sp.precision < 0 ? 6 : sp.precision, 300));
  const double ax = std::fabs(x);
  if (std::isinf(ax)) return (type >= 'A' && type <= 'Z') ? "INF" : "inf";
  if (std::isnan(ax)) return (type >= 'A' && type <= 'Z') ? "NAN" : "nan";
  if (type == 0) {
    if (sp.precision < 0) return float_repr(ax);
    std::snprintf(buf, sizeof buf, "%.*g", std::max(prec, 1), ax);
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
  }
  if (type == '%') {
    std::snprintf(buf, sizeof buf, "%.*f", prec, ax * 100);
    return std::string(buf) + "%";
  }
  const char t = type == 'n' ? 'g' : type;
  const char f[] = {'%', sp.alt ? '#' : '.', sp.alt ? '.' : '*', sp.alt ? '*' : t, sp.alt ? t : '\0', 0};
  std::snprintf(buf, sizeof buf, f, prec, ax);
  return buf;
}

// format(value, spec): Python's __format__ of each type.
std::string format_value(Interp& in, const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(in, v);
  const Spec sp = parse_spec(spec);
  if (v.is_string()) {
    if (sp.type && sp.type != 's') fault(std::string("Unknown format code '") + sp.type + "' for object of type 'str'");
    if (sp.sign) fault("Sign not allowed in string format specifier");
    if (sp.grouping) fault(std::string("Cannot specify '") + sp.grouping + "' with 's'.");
    if (sp.align == '=') fault("'=' alignment not allowed in string format specifier");
    std::string s = v.str();
    if (sp.precision >= 0) {
      const std::u32string u = decode_utf8(s);
      s = encode_utf8(u.substr(0, static_cast<size_t>(std::min<int64_t>(sp.precision, static_cast<int64_t>(u.size())))));
    }
    return apply_width(in, sp, "", s, '<');
  }
  if (v.is_number()) {
    const bool is_float_type = sp.type == 'e' || sp.type == 'E' || sp.type == 'f' || sp.type == 'F' || sp.type == 'g' ||
                               sp.type == 'G' || sp.type == '%' || (v.kind == Kind::real && (sp.type == 0 || sp.type == 'n'));
    const bool neg = v.kind == Kind::real ? std::signbit(v.f) && !std::isnan(v.f) : v.as_int() < 0;
    const std::string sign = neg ? "-" : sp.sign == '+' ? "+" : sp.sign == ' ' ? " " : "";
    std::string body;
    if (is_float_type) {
      body = format_float(v.as_real(), sp, sp.type);
      if (sp.grouping) {
        const size_t end = body.find_first_not_of("0123456789");
        body = group_digits(body.substr(0, end), sp.grouping) + (end == std::string::npos ? "" : body.substr(end));
      }
    } else {
      if (v.kind == Kind::real) fault(std::string("Unknown format code '") + sp.type + "' for object of type 'float'");
      if (sp.precision >= 0) fault("Precision not allowed in integer format specifier");
      const int64_t x = v.as_int();
      const uint64_t ax = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
      char buf[80];
      switch (sp.type) {
        case 0:
        case 'd':
        case 'n':
          std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(ax));
          body = group_digits(buf, sp.grouping);
          break;
        case 'x':
        case 'X':
          std::snprintf(buf, sizeof buf, sp.type == 'x' ? "%llx" : "%llX", static_cast<unsigned long long>(ax));
          body = std::string(sp.alt ? (sp.type == 'x' ? "0x" : "0X") : "") + buf;
          break;
        case 'o':
          std::snprintf(buf, sizeof buf, "%llo", static_cast<unsigned long long>(ax));
          body = std::string(sp.alt ? "0o" : "") + buf;
          break;
        case 'b': {
          std::string bits;
          for (uint64_t y = ax; y; y >>= 1) bits.insert(bits.begin(), static_cast<char>('0' + (y & 1)));
          body = std::string(sp.alt ? "0b" : "") + (bits.empty() ? "0" : bits);
          break;
        }
        case 'c':
          if (x < 0 || x > 0x10FFFF) fault("%c arg not in range(0x110000)");
          append_utf8(body, static_cast<char32_t>(x));
          return apply_width(in, sp, "", body, '<');
        default: fault(std::string("Unknown format code '") + sp.type + "' for object of type 'int'");
      }
    }
    return apply_width(in, sp, sign, body, '>');
  }
  fault(std::string("unsupported format string passed to ") + type_name(v) + ".__format__");
}

}  // namespace

std::string python_format(Interp& in, const std::string& fmt, Args& args) {
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '}') {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}') {
        out.push_back('}');
        ++k;
        continue;
      }
      fault("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out.push_back('{');
      ++k;
      continue;
    }
    // {field_name!conversion:format_spec}
    size_t e = k + 1;
    int nest = 0;
    while (e < fmt.size() && (fmt[e] != '}' || nest > 0)) {
      if (fmt[e] == '{') ++nest;
      if (fmt[e] == '}') --nest;
      ++e;
    }
    if (e >= fmt.size()) fault("expected '}' before end of string");
    const std::string field = fmt.substr(k + 1, e - k - 1);
    k = e;
    std::string name = field, conversion, spec;
    const size_t colon = name.find(':');
    if (colon != std::string::npos) {
      spec = name.substr(colon + 1);
      name = name.substr(0, colon);
    }
    const size_t bang = name.find('!');
    if (bang != std::string::npos) {
      conversion = name.substr(bang + 1);
      name = name.substr(0, bang);
      if (conversion.size() != 1 || (conversion[0] != 's' && conversion[0] != 'r' && conversion[0] != 'a'))
        fault("Unknown conversion specifier " + conversion);
    }
    if (spec.find('{') != std::string::npos) fault("nested replacement fields in a format spec are not supported");
    // The first part of the name: an index, a keyword, or empty (auto numbering).
    size_t p = 0;
    while (p < name.size() && name[p] != '.' && name[p] != '[') ++p;
    const std::string first = name.substr(0, p);
    Value obj;
    if (first.empty() || std::all_of(first.begin(), first.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      size_t idx;
      if (first.empty()) {
        if (used_manual) fault("cannot switch from manual field specification to automatic field numbering");
        used_auto = true;
        idx = auto_index++;
      } else {
        if (used_auto) fault("cannot switch from automatic field numbering to manual field specification");
        used_manual = true;
        if (first.size() > 9) fault("Too many decimal digits in format string");
        idx = std::stoul(first);
      }
      if (idx >= args.pos.size())
        fault("Replacement index " + std::to_string(idx) + " out of range for positional args tuple");
      obj = args.pos[idx];
    } else {
      const Value* v = args.kwarg(first);
      if (!v) fault("KeyError: '" + first + "'");
      obj = *v;
    }
    while (p < name.size()) {
      if (name[p] == '.') {
        size_t q = p + 1;
        while (q < name.size() && name[q] != '.' && name[q] != '[') ++q;
        obj = in.getattr(obj, name.substr(p + 1, q - p - 1));
        p = q;
      } else {
        const size_t q = name.find(']', p);
        if (q == std::string::npos) fault("Missing ']' in format string");
        const std::string key = name.substr(p + 1, q - p - 1);
        int64_t n;
        const bool digits =
            !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        obj = in.getitem(obj, digits && parse_python_int(key, 10, n) ? Value::integer(n) : Value::string(key));
        p = q + 1;
      }
    }
    if (conversion == "s")
      obj = Value::string(to_str(in, obj));
    else if (conversion == "r" || conversion == "a")
      obj = Value::string(to_repr(in, obj));
    out += format_value(in, obj, spec);
    in.check_size(out.size());
  }
  return out;
}

std::string percent_format(Interp& in, const std::string& fmt, const Value& args) {
  // Python: a tuple gives the arguments; any other value is one argument,
  // and one with __getitem__ (dict, list, Undefined) is also a mapping that
  // may go unused.
  const bool tuple = args.kind == Kind::list && args.list->tuple && !args.list->range;
  std::vector<Value> pos;
  if (tuple)
    pos = args.list->items;
  else
    pos.push_back(args);
  const Value* mapping = args.kind == Kind::dict ? &args : nullptr;
  const bool mapping_like = !tuple && (args.kind == Kind::dict || args.kind == Kind::list || args.is_undefined());
  size_t next = 0;
  auto take = [&]() -> Value {
    if (next >= pos.size()) fault("not enough arguments for format string");
    return pos[next++];
  };
  std::string out;
  bool used_key = false;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out.push_back(fmt[k]);
      continue;
    }
    if (++k >= fmt.size()) fault("incomplete format");
    Value v;
    bool have = false;
    if (fmt[k] == '(') {
      const size_t e = fmt.find(')', k);
      if (e == std::string::npos) fault("incomplete format key");
      if (!mapping) fault("format requires a mapping");
      const std::string key = fmt.substr(k + 1, e - k - 1);
      const Value* x = mapping->dict->find(key);
      if (!x) fault("KeyError: '" + key + "'");
      v = *x;
      have = used_key = true;
      k = e + 1;
    }
    Spec sp;
    bool left = false;
    for (; k < fmt.size() && std::strchr("#0- +", fmt[k]); ++k) {
      if (fmt[k] == '-') left = true;
      if (fmt[k] == '0') sp.zero = true;
      if (fmt[k] == '+') sp.sign = '+';
      if (fmt[k] == ' ' && sp.sign != '+') sp.sign = ' ';
      if (fmt[k] == '#') sp.alt = true;
    }
    auto number = [&]() -> int64_t {
      if (k < fmt.size() && fmt[k] == '*') {
        ++k;
        const Value n = take();
        if (!n.is_int()) fault("* wants int");
        return n.as_int();
      }
      int64_t n = 0;
      while (k < fmt.size() && fmt[k] >= '0' && fmt[k] <= '9') {
        n = n * 10 + (fmt[k++] - '0');
        if (n > 100000) fault("width too big");
      }
      return n;
    };
    sp.width = number();
    if (sp.width < 0) {  // a negative * width left-justifies
      left = true;
      sp.width = -sp.width;
    }
    if (k < fmt.size() && fmt[k] == '.') {
      ++k;
      sp.precision = number();
    }
    while (k < fmt.size() && (fmt[k] == 'h' || fmt[k] == 'l' || fmt[k] == 'L')) ++k;
    if (k >= fmt.size()) fault("incomplete format");
    const char type = fmt[k];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (!have) v = take();
    if (left) sp.align = '<';
    if (left) sp.zero = false;
    if (!sp.zero && !left) sp.align = '>';
    std::string piece;
    switch (type) {
      case 's': {
        const std::u32string text = decode_utf8(to_str(in, v));
        const size_t keep = sp.precision >= 0 ? static_cast<size_t>(sp.precision) : std::u32string::npos;
        piece = apply_width(in, sp, "", encode_utf8(std::u32string_view(text).substr(0, keep)), '>');
        break;
      }
      case 'r':
      case 'a': piece = apply_width(in, sp, "", to_repr(in, v), '>'); break;
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number()) fault(std::string("%") + type + " format: a real number is required, not " + type_name(v));
        if (v.kind == Kind::real && (type == 'x' || type == 'X' || type == 'o'))
          fault(std::string("%") + type + " format: an integer is required, not float");
        if (v.kind == Kind::real && !(std::fabs(v.f) < 9.2e18))
          fault("integer too large for synapse's 64-bit template integers");
        const Value iv = v.kind == Kind::real ? Value::integer(static_cast<int64_t>(v.f)) : Value::integer(v.as_int());
        Spec s2 = sp;
        s2.type = type == 'i' || type == 'u' ? 'd' : type;
        s2.precision = -1;
        std::string spec_text;
        piece = format_value(in, iv, "");  // digits, then the flags by hand
        const bool neg = iv.i < 0;
        std::string digits = neg ? piece.substr(1) : piece;
        if (type == 'x' || type == 'X' || type == 'o') {
          char buf[80];
          const uint64_t ax = neg ? 0 - static_cast<uint64_t>(iv.i) : static_cast<uint64_t>(iv.i);
          std::snprintf(buf, sizeof buf, type == 'x' ? "%llx" : type == 'X' ? "%llX" : "%llo",
                        static_cast<unsigned long long>(ax));
          digits = std::string(sp.alt ? (type == 'o' ? "0o" : type == 'x' ? "0x" : "0X") : "") + buf;
        }
        if (sp.precision > static_cast<int64_t>(digits.size())) {
          in.charge_string(static_cast<size_t>(sp.precision));
          digits.insert(0, static_cast<size_t>(sp.precision) - digits.size(), '0');
        }
        s2.fill = ' ';
        if (sp.zero && !left) s2.align = '=', s2.fill = '0';
        s2.zero = false;
        piece = apply_width(in, s2, neg ? "-" : sp.sign == '+' ? "+" : sp.sign == ' ' ? " " : "", digits, '>');
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (!v.is_number()) fault(std::string("must be real number, not ") + type_name(v));
        Spec s2 = sp;
        const double x = v.as_real();
        const bool neg = std::signbit(x) && !std::isnan(x);
        std::string body = format_float(x, sp, type);
        s2.fill = ' ';
        if (sp.zero && !left) s2.align = '=', s2.fill = '0';
        s2.zero = false;
        piece = apply_width(in, s2, neg ? "-" : sp.sign == '+' ? "+" : sp.sign == ' ' ? " " : "", body, '>');
        break;
      }
      case 'c': {
        std::string ch;
        if (v.is_string() && count_code_points(v.str()) == 1)
          ch = v.str();
        else if (v.is_int() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF)
          append_utf8(ch, static_cast<char32_t>(v.as_int()));
        else
          fault("%c requires int or char");
        piece = apply_width(in, sp, "", ch, '>');
        break;
      }
      default: fault(std::string("unsupported format character '") + type + "'");
    }
    out += piece;
    in.check_size(out.size());
  }
  if (!used_key && !mapping_like && next < pos.size()) fault("not all arguments converted during string formatting");
  return out;
}

bool parse_python_int(std::string_view s, int base, int64_t& out) {
  const std::u32string u = decode_utf8(s);
  size_t b = 0, e = u.size();
  while (b < e && is_space(u[b])) ++b;
  while (e > b && is_space(u[e - 1])) --e;
  bool neg = false;
  if (b < e && (u[b] == '+' || u[b] == '-')) neg = u[b++] == '-';
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (e - b >= 2 && u[b] == '0') {
      const char32_t x = u[b + 1] | 0x20;
      const int prefixed = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 0;
      if (prefixed && (base == 0 || base == prefixed)) {
        base = prefixed;
        b += 2;
        if (b < e && u[b] == '_') ++b;
      }
    }
    if (base == 0) base = 10;
  }
  if (base < 2 || base > 36 || b >= e) return false;
  uint64_t v = 0;
  bool prev_digit = false;
  for (size_t k = b; k < e; ++k) {
    const char32_t c = u[k];
    if (c == '_') {
      if (!prev_digit || k + 1 >= e) return false;
      prev_digit = false;
      continue;
    }
    const char32_t lc = c | 0x20;
    const int d = c >= '0' && c <= '9' ? static_cast<int>(c - '0')
                : lc >= 'a' && lc <= 'z' ? static_cast<int>(lc - 'a' + 10)
                                         : 99;
    if (d >= base) return false;
    if (v > (static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
      fault("integer too large for synapse's 64-bit template integers");
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    prev_digit = true;
  }
  out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

bool parse_python_float(std::string_view s, double& out) {
  const std::u32string u = decode_utf8(s);
  size_t b = 0, e = u.size();
  while (b < e && is_space(u[b])) ++b;
  while (e > b && is_space(u[e - 1])) --e;
  std::string t;
  for (size_t k = b; k < e; ++k) {
    if (u[k] >= 0x80) return false;
    t.push_back(static_cast<char>(u[k]));
  }
  std::string lower = t;
  for (char& c : lower) c = static_cast<char>(to_lower(static_cast<unsigned char>(c)));
  const std::string body = !lower.empty() && (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  const double sign = !lower.empty() && lower[0] == '-' ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") {
    out = sign * HUGE_VAL;
    return true;
  }
  if (body == "nan") {
    out = std::nan("");
    return true;
  }
  // digits with single underscores between them, a '.', an exponent
  std::string clean;
  bool digit_seen = false;
  for (size_t k = 0; k < body.size(); ++k) {
    const char c = body[k];
    if (c == '_') {
      if (k == 0 || k + 1 >= body.size() || !std::isdigit(static_cast<unsigned char>(body[k - 1])) ||
          !std::isdigit(static_cast<unsigned char>(body[k + 1])))
        return false;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) digit_seen = true;
    else if (c != '.' && c != 'e' && c != '+' && c != '-') return false;
    clean.push_back(c);
  }
  if (!digit_seen) return false;
  char* end = nullptr;
  const std::string full = (sign < 0 ? "-" : "") + clean;
  out = std::strtod(full.c_str(), &end);
  return end && *end == 0;
}

}  // namespace synapse::jinja
