#include "grammar/json_schema_text.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "base/strings.hpp"
#include "grammar/class_escapes.hpp"

namespace synapse::grammar::schema {

// ---------------------------------------------------------------------------
// CodepointSet

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  hi = std::min(hi, kMaxCodepoint);
  // Insert in order, then merge what overlaps or touches the new range.
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), std::make_pair(lo, hi));
  it = ranges_.insert(it, {lo, hi});
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  merged.reserve(ranges_.size());
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

void CodepointSet::add(const CodepointSet& other) {
  for (const auto& r : other.ranges_) add(r.first, r.second);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet out;
  uint32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.first > next) out.ranges_.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodepoint) out.ranges_.emplace_back(next, kMaxCodepoint);
  return out;
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
  CodepointSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const uint32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    const uint32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) out.ranges_.emplace_back(lo, hi);
    if (ranges_[i].second < other.ranges_[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

CodepointSet CodepointSet::minus(const CodepointSet& other) const { return intersect(other.complement()); }

bool CodepointSet::contains(uint32_t cp) const {
  for (const auto& r : ranges_)
    if (r.first <= cp && cp <= r.second) return true;
  return false;
}

int64_t CodepointSet::single() const {
  if (ranges_.size() != 1 || ranges_[0].first != ranges_[0].second) return -1;
  return ranges_[0].first;
}

// ---------------------------------------------------------------------------
// UTF-8, GBNF and JSON text

uint32_t next_codepoint(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  size_t len = 1;
  uint32_t cp = b0;
  if (b0 >= 0xF0 && b0 < 0xF8) {
    len = 4;
    cp = b0 & 0x07;
  } else if (b0 >= 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  }
  if (len == 1 || pos + len > s.size()) {
    ++pos;
    return b0;
  }
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  pos += len;
  return cp;
}

size_t codepoint_count(std::string_view utf8) {
  size_t n = 0;
  for (size_t pos = 0; pos < utf8.size(); ++n) next_codepoint(utf8, pos);
  return n;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

std::string identity(const std::string& s) { return s; }

void append_hex(std::string& out, uint32_t v, int digits, bool upper) {
  const char* hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  for (int k = digits - 1; k >= 0; --k) out += hex[(v >> (4 * k)) & 0xF];
}

// One code point inside a GBNF class; GBNF's escapes (llama-grammar.cpp's
// parse_char) are \x \u \U \t \r \n \\ \" \[ \] \-, so '^' is written \x5E.
void append_class_char(std::string& out, uint32_t cp) {
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '-') {
    out += '\\';
    out += static_cast<char>(cp);
  } else if (cp == '^') {
    out += "\\x5E";
  } else if (cp == '\t') {
    out += "\\t";
  } else if (cp == '\n') {
    out += "\\n";
  } else if (cp == '\r') {
    out += "\\r";
  } else if (cp >= 0x20 && cp < 0x7F) {
    out += static_cast<char>(cp);
  } else if (cp <= 0xFF) {
    out += "\\x";
    append_hex(out, cp, 2, true);
  } else if (cp <= 0xFFFF) {
    out += "\\u";
    append_hex(out, cp, 4, true);
  } else {
    out += "\\U";
    append_hex(out, cp, 8, true);
  }
}

std::string class_text(const CodepointSet& set, bool negate) {
  std::string out = negate ? "[^" : "[";
  for (const auto& [lo, hi] : set.ranges()) {
    append_class_char(out, lo);
    if (hi == lo) continue;
    if (hi != lo + 1) out += '-';
    append_class_char(out, hi);
  }
  out += ']';
  return out;
}

}  // namespace

std::string gbnf_literal(std::string_view utf8) {
  std::string out = "\"";
  for (char ch : utf8) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      append_hex(out, c, 2, true);
    } else {
      out += ch;
    }
  }
  out += '"';
  return out;
}

std::string gbnf_class(const CodepointSet& set) {
  const CodepointSet rest = set.complement();
  // "[^]" is not GBNF (it would hold no character at all), so a full set is
  // written as its range.
  if (rest.empty()) return class_text(set, false);
  std::string pos = class_text(set, false);
  std::string neg = class_text(rest, true);
  return neg.size() < pos.size() ? neg : pos;
}

const CodepointSet& json_plain_chars() {
  static const CodepointSet plain = [] {
    CodepointSet s(0x20, kMaxCodepoint);
    CodepointSet out;
    out.add('"', '"');
    out.add('\\', '\\');
    out.add(0x7F, 0x7F);
    out.add(0xD800, 0xDFFF);
    return s.minus(out);
  }();
  return plain;
}

namespace {

// JSON's short escapes: the code point and the letter after the backslash.
constexpr std::pair<uint32_t, char> kShortEscapes[] = {{'"', '"'}, {'\\', '\\'}, {8, 'b'}, {12, 'f'},
                                                       {10, 'n'},  {13, 'r'},    {9, 't'}};

}  // namespace

std::string json_char_text(uint32_t cp) {
  std::string out;
  if (json_plain_chars().contains(cp)) {
    append_utf8(out, cp);
    return out;
  }
  for (const auto& [c, letter] : kShortEscapes) {
    if (c == cp) {
      out += '\\';
      out += letter;
      return out;
    }
  }
  out += "\\u";
  append_hex(out, cp, 4, false);
  return out;
}

std::string json_string_text(std::string_view utf8) {
  std::string out;
  for (size_t pos = 0; pos < utf8.size();) out += json_char_text(next_codepoint(utf8, pos));
  return out;
}

std::string json_char_expr(const CodepointSet& set) {
  std::vector<std::string> parts;
  const CodepointSet plain = set.intersect(json_plain_chars());
  if (const int64_t one = plain.single(); one >= 0) {
    std::string text;
    append_utf8(text, static_cast<uint32_t>(one));
    parts.push_back(gbnf_literal(text));
  } else if (!plain.empty()) {
    parts.push_back(gbnf_class(plain));
  }
  CodepointSet letters;
  CodepointSet shorts;
  for (const auto& [c, letter] : kShortEscapes) {
    shorts.add(c, c);
    if (set.contains(c)) letters.add(static_cast<uint32_t>(letter), static_cast<uint32_t>(letter));
  }
  if (const int64_t one = letters.single(); one >= 0) {
    parts.push_back(gbnf_literal(std::string("\\") + static_cast<char>(one)));
  } else if (!letters.empty()) {
    parts.push_back("\"\\\\\" " + gbnf_class(letters));
  }
  // The other controls and U+007F as \u00xx, grouped by their third hex digit.
  CodepointSet controls(0, 0x1F);
  controls.add(0x7F, 0x7F);
  const CodepointSet escaped = set.intersect(controls).minus(shorts);
  std::vector<std::string> groups;
  for (uint32_t high : {0u, 1u, 7u}) {
    CodepointSet lows;
    for (uint32_t low = 0; low < 16; ++low) {
      if (!escaped.contains(high * 16 + low)) continue;
      const uint32_t digit = low < 10 ? '0' + low : 'a' + low - 10;
      lows.add(digit, digit);
    }
    if (lows.empty()) continue;
    std::string hi_digit(1, static_cast<char>('0' + high));
    if (const int64_t one = lows.single(); one >= 0) {
      groups.push_back(gbnf_literal(hi_digit + static_cast<char>(one)));
    } else {
      groups.push_back(gbnf_literal(hi_digit) + " " + gbnf_class(lows));
    }
  }
  if (groups.size() == 1) {
    parts.push_back("\"\\\\u00\" " + groups[0]);
  } else if (!groups.empty()) {
    parts.push_back(join_in("\"\\\\u00\" (", groups, " | ", ")", [](const std::string& a) { return a; }));
  }
  // A single class or literal is returned as is, anything else in
  // parentheses, so the result always takes a quantifier.
  if (parts.size() == 1 && parts[0].find(' ') == std::string::npos) return parts[0];
  return join_in("(", parts, " | ", ")", [](const std::string& a) { return a; });
}

// ---------------------------------------------------------------------------
// keys and integers

// From a trie of the names' JSON text: at each node, a child's character
// continues a name, and any other character leaves all names behind (then
// anything may follow). Written bottom-up without recursion (names may be
// long): a child's index is above its parent's.
std::string json_key_excluding(const std::vector<std::string>& names, std::string_view char_rule) {
  struct Node {
    std::map<std::string, size_t> kids;  // a character's JSON text -> node
    bool terminal = false;
  };
  const std::string plus = std::string(char_rule) + "+", star = std::string(char_rule) + "*";
  std::vector<Node> nodes(1);
  for (const std::string& name : names) {
    size_t cur = 0;
    for (size_t pos = 0; pos < name.size();) {
      const std::string tok = json_char_text(next_codepoint(name, pos));
      auto it = nodes[cur].kids.find(tok);
      if (it == nodes[cur].kids.end()) {
        const size_t fresh = nodes.size();
        nodes[cur].kids.emplace(tok, fresh);
        nodes.emplace_back();
        cur = fresh;
      } else {
        cur = it->second;
      }
    }
    nodes[cur].terminal = true;
  }
  // text[i]: what may follow node i's prefix (children are after parents).
  std::vector<std::string> text(nodes.size());
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& node = nodes[i];
    if (node.kids.empty()) {
      text[i] = plus;
      continue;
    }
    std::vector<std::string> parts;
    CodepointSet taken;
    std::string letters = "\"\\/bfnrt";
    for (const auto& [tok, child] : node.kids) {
      if (tok[0] == '\\') {
        std::erase(letters, tok[1]);
      } else {
        size_t pos = 0;
        const uint32_t cp = next_codepoint(tok, pos);
        taken.add(cp, cp);
        if (cp == '/') std::erase(letters, '/');
      }
      const Node& c = nodes[child];
      if (c.kids.empty()) {
        parts.push_back(gbnf_literal(tok) + " char+");
      } else {
        parts.push_back(gbnf_literal(tok) + " (" + text[child] + ")" + (c.terminal ? "" : "?"));
      }
      text[child].clear();
    }
    std::string other = gbnf_class(json_plain_chars().minus(taken));
    if (!letters.empty()) {
      CodepointSet ls;
      for (char l : letters) ls.add(static_cast<uint32_t>(l), static_cast<uint32_t>(l));
      other = "(" + other + " | \"\\\\\" " + gbnf_class(ls) + ")";
    }
    parts.push_back(other + " char*");
    text[i] = join(parts, " | ", identity);
  }
  return R"("\"" ()" + text[0] + ")" + (nodes[0].terminal ? "" : "?") + R"( "\"")";
}

namespace {

constexpr int kUnboundedDigits = 16;  // llama.cpp's integral-part: [1-9] [0-9]{0,15}

int n_digits(uint64_t v) {
  int n = 1;
  while (v >= 10) v /= 10, ++n;
  return n;
}
uint64_t pow10(int n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}
uint64_t magnitude(int64_t v) { return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v); }

std::string digit_class(char lo, char hi) {
  std::string s = "[";
  s += lo;
  if (hi != lo) {
    s += '-';
    s += hi;
  }
  s += ']';
  return s;
}
// [0-9] repeated min..max times (both small).
std::string digits(int min, int max) {
  if (max == 0) return "";
  if (min == 1 && max == 1) return "[0-9]";
  std::string s = "[0-9]{" + std::to_string(min);
  if (max != min) s += "," + std::to_string(max);
  return s + "}";
}
std::string group(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  return join_in("(", alts, " | ", ")", identity);
}

// The numerals from x to y, digit strings of one length (x <= y).
void same_length(const std::string& x, const std::string& y, std::vector<std::string>& out) {
  size_t i = 0;
  while (i < x.size() && x[i] == y[i]) ++i;
  const std::string prefix = i ? gbnf_literal(x.substr(0, i)) : "";
  if (i == x.size()) {
    out.push_back(prefix);
    return;
  }
  std::vector<std::string> alts;
  const int tail = static_cast<int>(x.size() - i - 1);
  char lo = x[i];
  const char hi = y[i];
  if (tail == 0) {
    alts.push_back(digit_class(lo, hi));
  } else {
    const std::string xs = x.substr(i + 1), ys = y.substr(i + 1);
    const bool from_zero = xs.find_first_not_of('0') == std::string::npos;
    const bool to_nine = ys.find_first_not_of('9') == std::string::npos;
    if (!from_zero) {  // x[i] followed by xs..99
      std::vector<std::string> sub;
      same_length(xs, std::string(tail, '9'), sub);
      alts.push_back(digit_class(lo, lo) + " " + group(sub));
      ++lo;
    }
    const char mid_hi = to_nine ? hi : static_cast<char>(hi - 1);
    if (lo <= mid_hi) alts.push_back(digit_class(lo, mid_hi) + " " + digits(tail, tail));
    if (!to_nine) {  // y[i] followed by 00..ys
      std::vector<std::string> sub;
      same_length(std::string(tail, '0'), ys, sub);
      alts.push_back(digit_class(hi, hi) + " " + group(sub));
    }
  }
  if (prefix.empty()) {
    out.insert(out.end(), alts.begin(), alts.end());
  } else {
    out.push_back(prefix + " " + group(alts));
  }
}

// The numerals of a..b (a <= b).
void numerals(uint64_t a, uint64_t b, std::vector<std::string>& out) {
  for (int len = n_digits(a); len <= n_digits(b); ++len) {
    const uint64_t lo = std::max(a, len == 1 ? 0 : pow10(len - 1));
    const uint64_t hi = std::min(b, pow10(len) - 1);
    same_length(std::to_string(lo), std::to_string(hi), out);
  }
}

// The numerals of a and above, up to `cap` digits.
void numerals_from(uint64_t a, int cap, std::vector<std::string>& out) {
  if (a == 0) {
    out.push_back("[0]");
    a = 1;
  }
  const int d = n_digits(a);
  if (a == pow10(d - 1)) {  // 1, 10, 100...: every numeral of d digits or more
    std::string s = "[1-9]";
    if (cap > 1) s += " " + digits(d - 1, cap - 1);
    out.push_back(s);
    return;
  }
  numerals(a, pow10(d) - 1, out);
  if (d < cap) out.push_back("[1-9] " + digits(d, cap - 1));
}

}  // namespace

std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {
    const uint64_t m_lo = hi && *hi < 0 ? magnitude(*hi) : 1;
    std::vector<std::string> mags;
    if (lo) {
      numerals(m_lo, magnitude(*lo), mags);
    } else {
      numerals_from(m_lo, std::max(kUnboundedDigits, n_digits(m_lo)), mags);
    }
    alts.push_back("\"-\" " + group(mags));
  }
  if (!hi || *hi >= 0) {
    const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    if (hi) {
      numerals(a, static_cast<uint64_t>(*hi), alts);
    } else {
      numerals_from(a, std::max(kUnboundedDigits, n_digits(a)), alts);
    }
  }
  return join(alts, " | ", identity);
}

namespace {

constexpr int64_t kMaxDecimalInteger = 999999999999999;  // 15 digits: I and I + 1 are exact doubles

// The decimals I.F (I >= 0, no sign) whose values are within lo..hi, as
// number_range describes; alternatives appended to `out`.
void decimals(std::optional<NumberBound> lo, std::optional<NumberBound> hi, std::vector<std::string>& out) {
  if (hi && hi->value < 1) return;  // I + 1 <= hi needs hi >= 1
  const int64_t a = lo ? std::max<int64_t>(lo->value, 0) : 0;
  const int64_t b = hi ? std::min(hi->value - 1, kMaxDecimalInteger) : kMaxDecimalInteger;
  if (a > b) return;
  // The integer part next to an exclusive bound, if in a..b.
  const bool at_lo = lo && lo->exclusive && lo->value >= 0 && lo->value == a;
  const bool at_hi = hi && hi->exclusive && hi->value - 1 == b;
  // Digits of F that keep I.F within 15 significant digits.
  auto fraction_digits = [](int64_t i) { return i == 0 ? 15 : 15 - n_digits(static_cast<uint64_t>(i)); };
  const int64_t first = a + (at_lo ? 1 : 0), last = b - (at_hi ? 1 : 0);
  if (first <= last) {
    std::vector<std::string> ints;
    if (last == kMaxDecimalInteger) {
      numerals_from(static_cast<uint64_t>(first), n_digits(kMaxDecimalInteger), ints);
    } else {
      numerals(static_cast<uint64_t>(first), static_cast<uint64_t>(last), ints);
    }
    out.push_back(group(ints) + " \".\" [0-9]{1,16}");
  }
  if (at_lo) {  // F not zero: above the bound
    const int c = fraction_digits(a);
    if (c >= 1) out.push_back(gbnf_literal(std::to_string(a) + ".") + " " + (c > 1 ? digits(0, c - 1) + " " : "") + "[1-9]");
  }
  if (at_hi && !(at_lo && a == b)) {  // any F: below the bound
    const int c = fraction_digits(b);
    if (c >= 1) out.push_back(gbnf_literal(std::to_string(b) + ".") + " " + digits(1, c));
  }
}

}  // namespace

std::string number_range(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<std::string> alts;
  // Integers: lo and hi made inclusive.
  const std::optional<int64_t> lo_int =
      lo ? std::optional<int64_t>(lo->value + (lo->exclusive ? 1 : 0)) : std::nullopt;
  const std::optional<int64_t> hi_int =
      hi ? std::optional<int64_t>(hi->value - (hi->exclusive ? 1 : 0)) : std::nullopt;
  if (!lo_int || !hi_int || *lo_int <= *hi_int) alts.push_back(integer_range(lo_int, hi_int));
  decimals(lo, hi, alts);
  // -I.F: I.F within -hi..-lo.
  auto mirror = [](std::optional<NumberBound> b) {
    return b ? std::optional<NumberBound>(NumberBound{-b->value, b->exclusive}) : std::nullopt;
  };
  std::vector<std::string> negative;
  decimals(mirror(hi), mirror(lo), negative);
  if (!negative.empty()) alts.push_back("\"-\" " + group(negative));
  return join(alts, " | ", identity);
}

// ---------------------------------------------------------------------------
// pattern

namespace {

constexpr uint32_t kInf = UINT32_MAX;

// A regular expression over code points.
struct Re {
  enum Kind { kEmpty, kChars, kSeq, kAlt, kRepeat, kLook };
  Kind kind = kEmpty;
  CodepointSet chars;    // kChars (never empty)
  std::vector<Re> kids;  // kSeq, kAlt; kRepeat: one, the body; kLook: the body's anchor-free branches
  uint32_t min = 0;      // kRepeat
  uint32_t max = 0;      // kRepeat; kInf for no bound
  // kLook, a lookahead (?=...) or (?!...): matches "" where a branch of the
  // body matches from here (negative: where none does). Per branch, whether
  // it is anchored at the string's start (it can match only at position 0)
  // and end (it must reach the string's end); wide: the body read wide (a
  // negative lookahead's is the other reading's, see parse_atom).
  bool negative = false, look_wide = false;
  std::vector<std::pair<bool, bool>> look_anchors;
  // kEmpty inside PatternParser only: an anchor, '^' (kStart) or '$' (kEnd),
  // before parse() resolves it into its branches' anchored ends.
  enum Anchor : uint8_t { kNone, kStart, kEnd } anchor = kNone;
};

Re chars_node(CodepointSet s) {
  Re r;
  r.kind = Re::kChars;
  r.chars = std::move(s);
  return r;
}

Re list_node(Re::Kind kind, std::vector<Re> kids) {
  if (kids.empty()) return Re{};
  if (kids.size() == 1) return std::move(kids[0]);
  Re r;
  r.kind = kind;
  r.kids = std::move(kids);
  return r;
}

Re repeat_node(Re body, uint32_t min, uint32_t max) {
  Re r;
  r.kind = Re::kRepeat;
  r.kids.push_back(std::move(body));
  r.min = min;
  r.max = max;
  return r;
}

// Character class escapes, read as ECMA-262 (22.2.2.9) and Python's re
// (which python-jsonschema uses) would both accept what the grammar writes.
// Each escape has a narrow set (what both dialects take: \d and \w ASCII
// only, \s ECMA's WhiteSpace and LineTerminator less U+FEFF) and a wide one
// (what either takes: Python's Unicode \d and \w, its U+001C-U+001F and
// U+0085 and ECMA's U+FEFF beside \s). The escape itself is its narrow set;
// its complement (\D, \W, \S) is the complement of the wide one, so both
// dialects agree on every character let through. In a negated class the
// roles swap ([^\d] is the complement of every dialect's \d), so the class's
// atoms take their wide sets there (class_escape). The wide \d and \w take
// every code point above the BMP and \w every unassigned one too
// (class_escapes.hpp): their complements are a subset of the exact ones,
// never a superset.
CodepointSet digit_set() { return CodepointSet('0', '9'); }

CodepointSet word_set() {
  CodepointSet s('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_', '_');
  return s;
}

CodepointSet space_set() {
  CodepointSet s(0x09, 0x0D);  // \t \n \v \f \r
  s.add(0x20, 0x20);
  s.add(0xA0, 0xA0);
  s.add(0x1680, 0x1680);
  s.add(0x2000, 0x200A);
  s.add(0x2028, 0x2029);
  s.add(0x202F, 0x202F);
  s.add(0x205F, 0x205F);
  s.add(0x3000, 0x3000);
  return s;
}

CodepointSet wide_digit_set() {
  CodepointSet s = digit_set();
  for (const auto& [lo, hi] : python_bmp_digits()) s.add(lo, hi);
  s.add(0x10000, kMaxCodepoint);
  return s;
}

// The complement of the code points known to be non-word characters.
CodepointSet wide_word_set() {
  CodepointSet non_word = word_set().complement().intersect(CodepointSet(0, 0x7F));
  for (const auto& [lo, hi] : python_bmp_non_word()) non_word.add(lo, hi);
  return non_word.complement();
}

CodepointSet wide_space_set() {
  CodepointSet s = space_set();
  s.add(0xFEFF, 0xFEFF);
  s.add(0x1C, 0x1F);
  s.add(0x85, 0x85);
  return s;
}

// The set of class escape c (d, D, w, W, s or S): narrow (wide = false)
// outside a negated class, wide inside one (see above).
CodepointSet class_escape(uint32_t c, bool wide) {
  switch (c) {
    case 'd': return wide ? wide_digit_set() : digit_set();
    case 'D': return (wide ? digit_set() : wide_digit_set()).complement();
    case 'w': return wide ? wide_word_set() : word_set();
    case 'W': return (wide ? word_set() : wide_word_set()).complement();
    case 's': return wide ? wide_space_set() : space_set();
    default: return (wide ? space_set() : wide_space_set()).complement();  // 'S'
  }
}

// `.` without the s flag: anything but a LineTerminator (ECMA-262's; Python's
// is anything but '\n', wide_dot_set).
CodepointSet dot_set() {
  CodepointSet s(0x0A, 0x0A);
  s.add(0x0D, 0x0D);
  s.add(0x2028, 0x2029);
  return s.complement();
}

CodepointSet wide_dot_set() {
  CodepointSet s(0x0A, 0x0A);
  return s.complement();
}

int hex_value(uint32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

std::string show_cp(uint32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

bool nullable(const Re& re);

// What pattern_to_gbnf throws for a lookahead: GBNF has no assertions, the
// pattern's automaton (pattern_dfa) does them.
PatternNeedsAutomaton needs_automaton() {
  return PatternNeedsAutomaton("lookaround assertions are written only through the pattern's automaton");
}

bool has_lookahead(const Re& re) {
  if (re.kind == Re::kLook) return true;
  return std::any_of(re.kids.begin(), re.kids.end(), [](const Re& k) { return has_lookahead(k); });
}

class PatternParser {
 public:
  struct Branch {
    Re re;
    bool anchored_start = false;
    bool anchored_end = false;
  };

  // wide: the wide reading (PatternReading::kWide): every set its wide one
  // (class escapes, `.`) and a '$' followed by what cannot be empty refused.
  PatternParser(std::string_view pattern, size_t max_nesting, size_t max_repetition, bool wide = false)
      : max_nesting_(max_nesting), max_repetition_(max_repetition), wide_(wide) {
    for (size_t pos = 0; pos < pattern.size();) p_.push_back(next_codepoint(pattern, pos));
  }

  // The pattern's top-level alternatives, each as the branches its anchors
  // make (anchors resolved: see Variant), in order.
  std::vector<Branch> parse() {
    std::vector<Branch> branches;
    do {
      for (Variant& v : variants(parse_sequence(0), wide_)) {
        branches.push_back({list_node(Re::kSeq, std::move(v.items)), v.start, v.end});
      }
    } while (eat('|'));
    if (i_ < p_.size()) fail("unbalanced ')'");
    if (branches.empty()) {
      throw PatternError("no string matches the pattern (a '^' after what cannot be empty, or a '$' before it)");
    }
    return branches;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw PatternError(what + " (at character " + std::to_string(i_) + ")");
  }
  bool peek(uint32_t c) const { return i_ < p_.size() && p_[i_] == c; }
  bool eat(uint32_t c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }

  Re parse_alternatives(size_t depth) {
    std::vector<Re> alts;
    do {
      alts.push_back(parse_sequence(depth));
    } while (eat('|'));
    return list_node(Re::kAlt, std::move(alts));
  }

  // Anchors are kept as nodes (Re::anchor) wherever they are; parse()
  // resolves them.
  Re parse_sequence(size_t depth) {
    std::vector<Re> items;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '^' || p_[i_] == '$') {
        Re anchor;
        anchor.anchor = p_[i_] == '^' ? Re::kStart : Re::kEnd;
        items.push_back(std::move(anchor));
        ++i_;
        continue;
      }
      Re atom = parse_atom(depth);
      items.push_back(parse_quantifier(std::move(atom)));
    }
    return list_node(Re::kSeq, std::move(items));
  }

  // --- anchors ---
  // A regular expression with anchors inside is, as a search (ECMA-262's and
  // Python's re.search without flags), the union of up to four anchor-free
  // variants: those whose match must start at the string's start (`start`),
  // end at its end (`end`), both or neither. Exactly: in a sequence, what
  // comes before a '^' must match "" (the match is at position 0 there), so
  // it is dropped where it can be empty and the variant is dead where it
  // cannot (a^b matches nothing); what comes after a '$' likewise; an
  // alternation is the union of its alternatives' variants; x? is "" | x;
  // x* and x+ allow one iteration anchored at the start (the first) and one
  // at the end (the last); other counts of anchors are refused
  // (parse_quantifier).
  // So ^$|(^(?:\S+\s+){0,99}\S+$) is "" anchored at both ends or the group
  // anchored at both ends, and ^([^,]|$) is [^,] anchored at the start or ""
  // anchored at both ends.
  struct Variant {
    bool start = false, end = false;
    std::vector<Re> items;  // a sequence
  };
  static bool has_anchor(const Re& re) {
    if (re.anchor != Re::kNone) return true;
    if (re.kind == Re::kLook) return false;  // resolved into its branches (parse_lookahead)
    return std::any_of(re.kids.begin(), re.kids.end(), [](const Re& k) { return has_anchor(k); });
  }
  // Variants of one kind (start, end) made one: an alternation of their sequences.
  static std::vector<Variant> merged(std::vector<Variant> vs) {
    std::vector<Variant> out;
    for (Variant& v : vs) {
      auto same = std::find_if(out.begin(), out.end(), [&](const Variant& o) { return o.start == v.start && o.end == v.end; });
      if (same == out.end()) {
        out.push_back(std::move(v));
        continue;
      }
      std::vector<Re> alts;
      alts.push_back(list_node(Re::kSeq, std::move(same->items)));
      alts.push_back(list_node(Re::kSeq, std::move(v.items)));
      same->items.clear();
      same->items.push_back(list_node(Re::kAlt, std::move(alts)));
    }
    return out;
  }
  // Of items that match "" before a '^' or after a '$', what still asserts
  // there: the lookaheads among them. One inside another item (a group that
  // may match "" several ways) is refused.
  static std::vector<Re> lookaheads(std::vector<Re> items) {
    std::vector<Re> out;
    for (Re& k : items) {
      if (k.kind == Re::kLook) {
        out.push_back(std::move(k));
      } else if (has_lookahead(k)) {
        throw PatternError("a lookaround assertion inside a group before a '^' or after a '$' is not supported");
      }
    }
    return out;
  }
  static bool all_nullable(const std::vector<Re>& items) {
    return std::all_of(items.begin(), items.end(), [](const Re& k) { return nullable(k); });
  }
  // wide: what follows a '$' and cannot be empty throws instead of killing
  // the variant (Python's '$' also matches before a final '\n', which it
  // could match).
  static std::vector<Variant> variants(Re re, bool wide) {
    if (!has_anchor(re)) {
      Variant v;
      v.items.push_back(std::move(re));
      return {std::move(v)};
    }
    switch (re.kind) {
      case Re::kEmpty: {  // an anchor
        Variant v;
        (re.anchor == Re::kStart ? v.start : v.end) = true;
        return {std::move(v)};
      }
      case Re::kAlt: {
        std::vector<Variant> all;
        for (Re& k : re.kids)
          for (Variant& v : variants(std::move(k), wide)) all.push_back(std::move(v));
        return merged(std::move(all));
      }
      case Re::kSeq: {
        std::vector<Variant> acc(1);
        for (Re& k : re.kids) {
          const std::vector<Variant> next = variants(std::move(k), wide);
          std::vector<Variant> out;
          for (const Variant& a : acc)
            for (const Variant& v : next) {
              Variant c{a.start || v.start, a.end || v.end, a.items};
              if (v.start) {  // before it: only "", at position 0
                if (!all_nullable(c.items)) continue;
                c.items = lookaheads(std::move(c.items));
              }
              if (a.end) {  // after it: only "", at the end
                if (!all_nullable(v.items)) {
                  if (wide) throw PatternError("a '$' followed by what cannot match \"\" is not supported here");
                  continue;
                }
                for (Re& k : lookaheads(v.items)) c.items.push_back(std::move(k));
              } else {
                c.items.insert(c.items.end(), v.items.begin(), v.items.end());
              }
              out.push_back(std::move(c));
            }
          acc = merged(std::move(out));
        }
        return acc;
      }
      case Re::kRepeat: {  // x{0}, x?, x{1}, x* or x+ (parse_quantifier refuses others)
        if (re.max == 0) return {Variant{}};
        const uint32_t min = re.min, max = re.max;
        std::vector<Variant> body = variants(std::move(re.kids[0]), wide);
        std::vector<Variant> out;
        if (max == 1) {
          out = std::move(body);
        } else {
          // x* and x+: at most one iteration anchored at the start (the first
          // that is not empty, so the first) and one at the end (the last):
          // F{min,} | S F* | F* E | S F* E | SE, F, S, E, SE being the body's
          // variants (an iteration counts towards min whatever its kind).
          std::optional<Re> f;
          for (Variant& v : body)
            if (!v.start && !v.end) f = list_node(Re::kSeq, std::move(v.items));
          auto f_star = [&] { return f ? std::vector<Re>{repeat_node(*f, 0, kInf)} : std::vector<Re>{}; };
          if (f) out.push_back({false, false, {repeat_node(*f, min, kInf)}});
          for (const Variant& v : body) {
            if (!v.start && !v.end) continue;
            Variant c{v.start, v.end, {}};  // SE alone; F* E; S F*
            if (!v.start) c.items = f_star();
            c.items.insert(c.items.end(), v.items.begin(), v.items.end());
            if (!v.end) {
              for (Re& r : f_star()) c.items.push_back(std::move(r));
            }
            out.push_back(std::move(c));
            if (v.start && !v.end) {
              for (const Variant& e : body) {
                if (!e.end || e.start) continue;
                Variant se{true, true, v.items};
                for (Re& r : f_star()) se.items.push_back(std::move(r));
                se.items.insert(se.items.end(), e.items.begin(), e.items.end());
                out.push_back(std::move(se));
              }
            }
          }
        }
        if (min == 0 && (max == 1 || out.empty() || out[0].start || out[0].end)) out.push_back(Variant{});
        return merged(std::move(out));
      }
      case Re::kChars:
      case Re::kLook: break;  // has_anchor: false
    }
    return {};
  }

  Re parse_atom(size_t depth) {
    const uint32_t c = p_[i_];
    switch (c) {
      case '(': {
        ++i_;
        if (eat('?')) {
          if (eat(':')) {
            // non-capturing group
          } else if (peek('=') || peek('!')) {
            return parse_lookahead(depth);
          } else if (peek('<') && i_ + 1 < p_.size() && (p_[i_ + 1] == '=' || p_[i_ + 1] == '!')) {
            fail("lookbehind assertions are not supported");
          } else if (peek('<')) {
            fail("named groups are not supported (Python's re writes them (?P<name>...))");
          } else {
            fail("unsupported group syntax \"(?\"");
          }
        }
        if (depth + 1 > max_nesting_) {
          fail("groups nested deeper than limits.max_nesting (" + std::to_string(max_nesting_) + ")");
        }
        Re inner = parse_alternatives(depth + 1);
        if (!eat(')')) fail("missing ')'");
        return inner;
      }
      case '[': {
        CodepointSet set = parse_class();
        if (set.empty()) fail("a character class that matches no character");
        return chars_node(std::move(set));
      }
      case '.': ++i_; return chars_node(wide_ ? wide_dot_set() : dot_set());
      case '\\': return chars_node(parse_escape(false, wide_));
      case '*':
      case '+':
      case '?':
      case '{': fail("nothing to repeat before '" + show_cp(c) + "'");
      // A ']' or '}' that closes nothing stands for itself in Python's re
      // and in ECMA-262 without the u flag (Annex B); with it the pattern is
      // a syntax error, so such a validator refuses the schema, not a string.
      default: ++i_; return chars_node(CodepointSet(c, c));
    }
  }

  // (?=X) or (?!X); i_ is at '=' or '!'. ECMA-262 and Python's re agree on
  // what one asserts: whether X matches from this position (any way, to any
  // length), which reads only what follows. The narrow reading (the strings
  // both dialects match) needs X matched in both dialects for (?=X), so
  // narrow, and in neither for (?!X), so wide; the wide reading the other
  // way round. The body's anchors are resolved into its own branches
  // (variants). Inside a lookahead another is refused, and so is a
  // quantifier after one (ECMA-262 with the u flag refuses it too).
  Re parse_lookahead(size_t depth) {
    const bool negative = p_[i_++] == '!';
    if (in_look_) fail("a lookaround assertion inside another is not supported");
    if (depth + 1 > max_nesting_) {
      fail("groups nested deeper than limits.max_nesting (" + std::to_string(max_nesting_) + ")");
    }
    const bool outer_wide = wide_;
    wide_ = negative ? !outer_wide : outer_wide;
    in_look_ = true;
    Re body = parse_alternatives(depth + 1);
    in_look_ = false;
    if (!eat(')')) fail("missing ')'");
    Re look;
    look.kind = Re::kLook;
    look.negative = negative;
    look.look_wide = wide_;
    for (Variant& v : variants(std::move(body), wide_)) {
      look.kids.push_back(list_node(Re::kSeq, std::move(v.items)));
      look.look_anchors.emplace_back(v.start, v.end);
    }
    wide_ = outer_wide;
    if (i_ < p_.size() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '?' || p_[i_] == '{')) {
      fail("a quantifier after a lookaround assertion is not supported");
    }
    return look;
  }

  Re parse_quantifier(Re atom) {
    if (i_ >= p_.size()) return atom;
    uint32_t min = 0, max = 0;
    switch (p_[i_]) {
      case '*': min = 0, max = kInf, ++i_; break;
      case '+': min = 1, max = kInf, ++i_; break;
      case '?': min = 0, max = 1, ++i_; break;
      case '{': parse_braces(min, max); break;
      default: return atom;
    }
    eat('?');  // lazy: the same strings match a whole-string pattern
    if (i_ < p_.size() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '?' || p_[i_] == '{')) {
      fail("nothing to repeat before '" + show_cp(p_[i_]) + "'");
    }
    if (max != kInf && min > max)
      fail("repetition {" + std::to_string(min) + "," + std::to_string(max) + "} out of order");
    if (max > 1 && !(max == kInf && min <= 1) && has_anchor(atom))
      fail("'^' or '$' inside a group repeated a bounded number of times or at least twice is not supported");
    const uint32_t biggest = max == kInf ? min : max;
    if (biggest > max_repetition_) {
      fail("repetition count " + std::to_string(biggest) + " over limits.max_repetition (" +
           std::to_string(max_repetition_) + ")");
    }
    return repeat_node(std::move(atom), min, max);
  }

  // {n}, {n,} or {n,m}; i_ is at '{'.
  void parse_braces(uint32_t& min, uint32_t& max) {
    ++i_;
    auto number = [&](uint32_t& out) {
      const size_t start = i_;
      uint64_t v = 0;
      while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
        v = std::min<uint64_t>(v * 10 + (p_[i_] - '0'), uint64_t{1} << 32);
        ++i_;
      }
      out = static_cast<uint32_t>(std::min<uint64_t>(v, kInf - 1));
      return i_ > start;
    };
    if (!number(min)) fail("'{' that does not start a quantifier {n}, {n,} or {n,m}");
    max = min;
    if (eat(',')) {
      if (!number(max)) max = kInf;
    }
    if (!eat('}')) fail("'{' that does not start a quantifier {n}, {n,} or {n,m}");
  }

  CodepointSet parse_class() {
    ++i_;  // '['
    const bool negate = eat('^');
    CodepointSet set;
    for (;;) {
      if (i_ >= p_.size()) fail("unterminated character class");
      if (eat(']')) break;
      const CodepointSet lo = class_atom(negate);
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (i_ >= p_.size()) fail("unterminated character class");
        const CodepointSet hi = class_atom(negate);
        if (lo.single() < 0 || hi.single() < 0) fail("a class escape as the end of a range");
        if (lo.single() > hi.single()) fail("range out of order in character class");
        set.add(static_cast<uint32_t>(lo.single()), static_cast<uint32_t>(hi.single()));
      } else {
        set.add(lo);
      }
    }
    return negate ? set.complement() : set;
  }

  CodepointSet class_atom(bool negated) {
    if (peek('\\')) return parse_escape(true, negated != wide_);
    const uint32_t c = p_[i_++];
    return CodepointSet(c, c);
  }

  uint32_t hex_digits(size_t n) {
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      const int h = i_ < p_.size() ? hex_value(p_[i_]) : -1;
      if (h < 0) fail("invalid hexadecimal escape");
      v = v * 16 + static_cast<uint32_t>(h);
      ++i_;
    }
    return v;
  }

  // i_ is at the backslash. wide: a class escape's wide set (in a negated
  // class of the narrow reading, or outside one of the wide: class_escape).
  CodepointSet parse_escape(bool in_class, bool wide = false) {
    ++i_;
    if (i_ >= p_.size()) fail("'\\' at the end of the pattern");
    const uint32_t c = p_[i_++];
    auto one = [](uint32_t cp) { return CodepointSet(cp, cp); };
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S': return class_escape(c, wide);
      case 't': return one('\t');
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0':
        if (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') fail("octal escapes are not supported");
        return one(0);
      case 'b':
        if (in_class) return one('\b');
        fail("word boundaries (\\b) are not supported");
      case 'B': fail("word boundaries (\\B) are not supported");
      case 'x': return one(hex_digits(2));
      case 'u': {
        const uint32_t cp = hex_digits(4);
        // Python's re reads \uD83D\uDE00 as two surrogates, ECMA-262 (with
        // the u flag) as one character: neither is taken.
        if (cp >= 0xD800 && cp <= 0xDFFF) fail("surrogate escapes are not supported (write the character itself)");
        return one(cp);
      }
      case 'k': fail("backreferences are not supported");
      case 'p':
      case 'P': fail("Unicode property escapes are not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') fail("backreferences are not supported");
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (c < 0x20 || c >= 0x7F || alnum) fail("unknown escape \"\\" + show_cp(c) + "\"");
    return one(c);  // escaped punctuation stands for itself
  }

  std::vector<uint32_t> p_;
  size_t i_ = 0;
  size_t max_nesting_;
  size_t max_repetition_;
  bool wide_;
  bool in_look_ = false;
};

// --- rewriting repetitions of what can match the empty string ---------------
// GBNF's x* is the rule r ::= x r | (empty); with x able to match nothing
// that rule is left-recursive, which the GBNF parser rejects, and even x{m,n}
// makes the matcher track the same position many ways. So every repeated
// body is first replaced by its language without the empty string, which
// leaves the language of the repetition unchanged: (x){m,n} = (x - "")^{0..n}
// when x matches "".

bool nullable(const Re& re) {
  switch (re.kind) {
    case Re::kEmpty: return true;
    case Re::kChars: return false;
    case Re::kSeq: return std::all_of(re.kids.begin(), re.kids.end(), [](const Re& k) { return nullable(k); });
    case Re::kAlt: return std::any_of(re.kids.begin(), re.kids.end(), [](const Re& k) { return nullable(k); });
    case Re::kRepeat: return re.min == 0 || nullable(re.kids[0]);
    case Re::kLook: return true;  // it reads nothing
  }
  return false;
}

class Rewriter {
 public:
  explicit Rewriter(size_t budget) : budget_(budget) {}

  // The same language, with every repeated body unable to match "".
  Re normalize(Re re) {
    switch (re.kind) {
      case Re::kEmpty:
      case Re::kChars: return re;
      case Re::kLook: throw needs_automaton();
      case Re::kSeq:
      case Re::kAlt: {
        std::vector<Re> kids;
        for (Re& k : re.kids) {
          Re n = normalize(std::move(k));
          if (re.kind == Re::kSeq && n.kind == Re::kEmpty) continue;
          if (n.kind == re.kind) {  // flatten (a b) c and (a | b) | c
            for (Re& g : n.kids) kids.push_back(std::move(g));
          } else {
            kids.push_back(std::move(n));
          }
        }
        return list_node(re.kind, std::move(kids));
      }
      case Re::kRepeat: {
        Re body = normalize(std::move(re.kids[0]));
        if (re.max == 0) return Re{};
        if (nullable(body)) {
          std::optional<Re> solid = without_empty(body);
          if (!solid) return Re{};
          body = std::move(*solid);
          re.min = 0;
        }
        if (re.min == 1 && re.max == 1) return body;
        return repeat_node(std::move(body), re.min, re.max);
      }
    }
    return re;
  }

 private:
  // The language of `re` (normalized) less the empty string; nullopt when
  // nothing is left.
  std::optional<Re> without_empty(const Re& re) {
    switch (re.kind) {
      case Re::kEmpty: return std::nullopt;
      case Re::kChars: return re;
      case Re::kLook: throw needs_automaton();
      case Re::kAlt: {
        std::vector<Re> alts;
        for (const Re& k : re.kids)
          if (auto s = without_empty(k)) alts.push_back(std::move(*s));
        if (alts.empty()) return std::nullopt;
        return list_node(Re::kAlt, std::move(alts));
      }
      case Re::kSeq: {
        if (!nullable(re)) return re;
        // Every part can be empty: split on the first part that is not.
        std::vector<Re> alts;
        for (size_t k = 0; k < re.kids.size(); ++k) {
          std::optional<Re> head = without_empty(re.kids[k]);
          if (!head) continue;
          std::vector<Re> seq;
          seq.push_back(std::move(*head));
          for (size_t j = k + 1; j < re.kids.size(); ++j) {
            charge(re.kids[j]);
            seq.push_back(re.kids[j]);
          }
          alts.push_back(list_node(Re::kSeq, std::move(seq)));
        }
        if (alts.empty()) return std::nullopt;
        return list_node(Re::kAlt, std::move(alts));
      }
      case Re::kRepeat:
        // normalized: the body cannot match "", so only min == 0 lets it.
        if (re.min == 0) return re.max == 1 ? re.kids[0] : repeat_node(re.kids[0], 1, re.max);
        return re;
    }
    return std::nullopt;
  }

  void charge(const Re& re) {
    const size_t n = count(re);
    if (n > budget_) throw PatternError("the pattern is too complex to translate");
    budget_ -= n;
  }
  static size_t count(const Re& re) {
    size_t n = 1;
    for (const Re& k : re.kids) n += count(k);
    return n;
  }

  size_t budget_;
};

// --- rendering ----------------------------------------------------------------

std::string quantifier(uint32_t min, uint32_t max) {
  if (min == 0 && max == 1) return "?";
  if (min == 0 && max == kInf) return "*";
  if (min == 1 && max == kInf) return "+";
  std::string q = "{";
  q += std::to_string(min);
  if (max != min) {
    q += ',';
    if (max != kInf) q += std::to_string(max);
  }
  q += '}';
  return q;
}

struct Text {
  std::string s;
  bool alternation = false;  // has a top-level '|': needs parentheses inside a sequence
  bool atom = false;         // a class, a one-character literal or a group: takes a quantifier as is
};

bool one_char_literal(const std::string& s) {
  if (s.size() < 3 || s.front() != '"' || s.back() != '"') return false;
  std::string_view body(s.data() + 1, s.size() - 2);
  if (body.size() == 2 && body[0] == '\\') return true;
  size_t pos = 0;
  next_codepoint(body, pos);
  return pos == body.size() && body[0] != '\\';
}

Text render(const Re& re) {
  switch (re.kind) {
    case Re::kEmpty: return {};
    case Re::kLook: throw needs_automaton();
    case Re::kChars: {
      if (const int64_t one = re.chars.single(); one >= 0) {
        std::string lit = gbnf_literal(json_char_text(static_cast<uint32_t>(one)));
        return {lit, false, one_char_literal(lit)};
      }
      return {json_char_expr(re.chars), false, true};
    }
    case Re::kSeq: {
      // Runs of single code points become one literal.
      std::vector<Text> parts;
      std::string run;
      auto flush = [&] {
        if (run.empty()) return;
        std::string lit = gbnf_literal(run);
        const bool one = one_char_literal(lit);
        parts.push_back({std::move(lit), false, one});
        run.clear();
      };
      for (const Re& k : re.kids) {
        if (k.kind == Re::kChars && k.chars.single() >= 0) {
          run += json_char_text(static_cast<uint32_t>(k.chars.single()));
          continue;
        }
        flush();
        Text t = render(k);
        if (!t.s.empty()) parts.push_back(std::move(t));
      }
      flush();
      if (parts.size() == 1) return parts[0];
      std::string s = join(parts, " ", [](const Text& t) { return t.alternation ? "(" + t.s + ")" : t.s; });
      return {s, false, false};
    }
    case Re::kAlt: {
      std::vector<std::string> alts;
      bool empty_alt = false;
      for (const Re& k : re.kids) {
        Text t = render(k);
        if (t.s.empty()) {
          empty_alt = true;
        } else if (std::find(alts.begin(), alts.end(), t.s) == alts.end()) {
          alts.push_back(t.s);
        }
      }
      if (alts.empty()) return {};
      std::string s = join(alts, " | ", [](const std::string& a) { return a; });
      if (empty_alt) return {"(" + s + ")?", false, false};
      return {s, alts.size() > 1, false};
    }
    case Re::kRepeat: {
      Text body = render(re.kids[0]);
      const std::string atom = body.atom ? body.s : "(" + body.s + ")";
      return {atom + quantifier(re.min, re.max), false, false};
    }
  }
  return {};
}

}  // namespace

namespace {

// Lengths in code points, kInf64 for no bound.
constexpr uint64_t kInf64 = UINT64_MAX;
struct Span {
  uint64_t lo = 0, hi = 0;
};
uint64_t add(uint64_t a, uint64_t b) { return a > kInf64 - b ? kInf64 : a + b; }
uint64_t mul(uint64_t a, uint64_t b) { return a != 0 && b > kInf64 / a ? kInf64 : a * b; }
Span lengths(const Re& re) {
  switch (re.kind) {
    case Re::kEmpty:
    case Re::kLook: return {0, 0};
    case Re::kChars: return {1, 1};
    case Re::kSeq: {
      Span s;
      for (const Re& k : re.kids) {
        const Span l = lengths(k);
        s = {add(s.lo, l.lo), add(s.hi, l.hi)};
      }
      return s;
    }
    case Re::kAlt: {
      Span s{kInf64, 0};
      for (const Re& k : re.kids) {
        const Span l = lengths(k);
        s = {std::min(s.lo, l.lo), std::max(s.hi, l.hi)};
      }
      return s;
    }
    case Re::kRepeat: {
      const Span l = lengths(re.kids[0]);
      return {mul(l.lo, re.min), re.max == kInf ? (l.hi == 0 ? 0 : kInf64) : mul(l.hi, re.max)};
    }
  }
  return {};
}

// One top-level alternative's parts: `front` and `back` are its unanchored
// ends (any code points: nullopt when anchored), `items` the sequence between.
struct Parts {
  std::optional<Span> front, back;
  std::vector<Re> items;
};

// A repetition with new counts: nothing for none, the body for one.
Re counted(Re rep, uint32_t min, uint32_t max) {
  if (max == 0) return Re{};
  if (min == 1 && max == 1) return std::move(rep.kids[0]);
  rep.min = min;
  rep.max = max;
  return rep;
}

// Narrows `parts` to its strings of min_len..max_len code points where that
// is exact and cheap: lengths already within; else one variable part (an
// unanchored end, or a repetition of one code point class) takes the slack
// the fixed-length parts leave; or, when max_len is the least length, every
// variable part its least. kNone when no string is left, kUnsupported where
// none of these applies; PatternError for a count over max_repetition.
enum class Narrowed { kKept, kNone, kUnsupported };
Narrowed narrow(Parts& parts, uint64_t min_len, uint64_t max_len, size_t max_repetition) {
  // A repetition next to an unanchored end takes its least: R{m,n} any* is
  // R{m} any* (what more it takes, any* takes).
  auto least = [](Re& r) {
    const uint32_t m = r.min;
    r = counted(std::move(r), m, m);
  };
  if (parts.back && !parts.items.empty() && parts.items.back().kind == Re::kRepeat) least(parts.items.back());
  if (parts.front && !parts.items.empty() && parts.items.front().kind == Re::kRepeat) least(parts.items.front());
  auto one_char_repeat = [](const Re& r) { return r.kind == Re::kRepeat && r.kids[0].kind == Re::kChars; };
  uint64_t shortest = 0, most = 0, fixed = 0;
  size_t n_variable = 0;
  bool narrowable = true;
  for (const Re& item : parts.items) {
    const Span l = lengths(item);
    shortest = add(shortest, l.lo);
    most = add(most, l.hi);
    if (l.lo == l.hi) {
      fixed = add(fixed, l.lo);
    } else {
      ++n_variable;
      narrowable = narrowable && one_char_repeat(item);
    }
  }
  for (const std::optional<Span>* end : {&parts.front, &parts.back}) {
    if (*end) ++n_variable, most = kInf64;
  }
  if (shortest >= min_len && most <= max_len) return Narrowed::kKept;
  if (shortest > max_len || most < min_len) return Narrowed::kNone;
  if (shortest == max_len) {  // every variable part at its least: ends empty, repetitions at their minimum
    for (const Re& item : parts.items) {
      const Span l = lengths(item);
      const Span body = item.kind == Re::kRepeat ? lengths(item.kids[0]) : Span{0, 1};
      if (l.lo != l.hi && body.lo != body.hi) return Narrowed::kUnsupported;
    }
    for (Re& item : parts.items)
      if (lengths(item).lo != lengths(item).hi) least(item);
    if (parts.front) parts.front = Span{0, 0};
    if (parts.back) parts.back = Span{0, 0};
    return Narrowed::kKept;
  }
  if (n_variable != 1 || !narrowable) return Narrowed::kUnsupported;
  // The variable part takes lo..hi code points, within what it takes already.
  const uint64_t need = min_len > fixed ? min_len - fixed : 0;
  const uint64_t room = max_len == kInf64 ? kInf64 : max_len - fixed;
  auto within = [&](uint64_t lo, uint64_t hi) -> std::optional<Span> {
    const Span s{std::max(lo, need), std::min(hi, room)};
    if (s.lo > s.hi) return std::nullopt;
    if (s.lo > max_repetition || (s.hi != kInf64 && s.hi > max_repetition)) {
      // (the automaton of the lengths may still write it: its counted tails
      // take any count)
      throw PatternUnbounded("a length bound over limits.max_repetition (" + std::to_string(max_repetition) +
                             ") with it");
    }
    return s;
  };
  for (std::optional<Span>* end : {&parts.front, &parts.back}) {
    if (!*end) continue;
    const auto s = within(0, kInf64);
    if (!s) return Narrowed::kNone;
    *end = s;
  }
  for (Re& item : parts.items) {
    if (!one_char_repeat(item) || item.min == item.max) continue;
    const auto s = within(item.min, item.max == kInf ? kInf64 : item.max);
    if (!s) return Narrowed::kNone;
    item = counted(std::move(item), static_cast<uint32_t>(s->lo),
                   s->hi == kInf64 ? kInf : static_cast<uint32_t>(s->hi));
  }
  return Narrowed::kKept;
}

// `parts` with its first alternation (a group such as (http|https)) taken
// apart: one Parts per alternative; empty when it has none.
std::vector<Parts> distribute(const Parts& parts) {
  std::vector<Parts> out;
  for (size_t i = 0; i < parts.items.size(); ++i) {
    if (parts.items[i].kind != Re::kAlt) continue;
    for (const Re& alt : parts.items[i].kids) {
      Parts p{parts.front, parts.back, {}};
      p.items.insert(p.items.end(), parts.items.begin(), parts.items.begin() + static_cast<std::ptrdiff_t>(i));
      if (alt.kind == Re::kSeq) {
        p.items.insert(p.items.end(), alt.kids.begin(), alt.kids.end());
      } else if (alt.kind != Re::kEmpty) {
        p.items.push_back(alt);
      }
      p.items.insert(p.items.end(), parts.items.begin() + static_cast<std::ptrdiff_t>(i) + 1, parts.items.end());
      out.push_back(std::move(p));
    }
    break;
  }
  return out;
}

std::optional<std::string> translate(std::string_view pattern, std::string_view char_rule, size_t max_nesting,
                                     size_t max_repetition, bool& uses_char_rule, uint64_t min_len,
                                     uint64_t max_len) {
  uses_char_rule = false;
  PatternParser parser(pattern, max_nesting, max_repetition);
  std::vector<PatternParser::Branch> branches = parser.parse();
  for (const PatternParser::Branch& b : branches)
    if (has_lookahead(b.re)) throw needs_automaton();
  Rewriter rewriter(size_t{1} << 20);
  std::vector<std::string> alts;
  bool empty_alt = false;
  // One alternative: its unanchored ends any code points (`char_rule`).
  auto add_alternative = [&](Parts& parts) {
    const bool alone = !parts.front && !parts.back;
    Text t = render(list_node(Re::kSeq, std::move(parts.items)));
    std::string s;
    auto append = [&s](const std::string& piece) {
      if (!s.empty()) s += ' ';
      s += piece;
    };
    auto any = [&](const Span& span) {
      if (span.hi == 0) return;
      append(std::string(char_rule) + quantifier(static_cast<uint32_t>(span.lo),
                                                  span.hi == kInf64 ? kInf : static_cast<uint32_t>(span.hi)));
      uses_char_rule = true;
    };
    if (parts.front) any(*parts.front);
    if (!t.s.empty()) append(t.alternation && !alone ? "(" + t.s + ")" : t.s);
    if (parts.back) any(*parts.back);
    if (s.empty()) {
      empty_alt = true;
    } else if (std::find(alts.begin(), alts.end(), s) == alts.end()) {
      alts.push_back(s);
    }
  };
  const bool bounded = min_len > 0 || max_len != kInf64;
  size_t pieces_left = 256;  // alternatives taken apart for the lengths, per pattern
  for (PatternParser::Branch& b : branches) {
    Re re = rewriter.normalize(std::move(b.re));
    Parts parts;
    if (!b.anchored_start) parts.front = Span{0, kInf64};
    if (!b.anchored_end) parts.back = Span{0, kInf64};
    if (re.kind == Re::kSeq) {
      parts.items = std::move(re.kids);
    } else if (re.kind != Re::kEmpty) {
      parts.items.push_back(std::move(re));
    }
    if (!bounded) {
      add_alternative(parts);
      continue;
    }
    // Narrowed, with alternations inside taken apart where it needs that.
    std::vector<Parts> pending;
    pending.push_back(std::move(parts));
    while (!pending.empty()) {
      Parts p = std::move(pending.back());
      pending.pop_back();
      Parts narrowed = p;
      const Narrowed n = narrow(narrowed, min_len, max_len, max_repetition);
      if (n == Narrowed::kKept) add_alternative(narrowed);
      if (n != Narrowed::kUnsupported) continue;
      std::vector<Parts> pieces = distribute(p);
      if (pieces.empty() || pieces.size() > pieces_left) {
        throw PatternUnbounded("the lengths of its strings cannot be bounded here (minLength/maxLength)");
      }
      pieces_left -= pieces.size();
      for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) pending.push_back(std::move(*it));
    }
  }
  if (alts.empty() && !empty_alt) return std::nullopt;
  std::string out = join(alts, " | ", [](const std::string& a) { return a; });
  if (empty_alt && !alts.empty()) out = "(" + out + ")?";
  return out;
}

}  // namespace

std::string pattern_to_gbnf(std::string_view pattern, std::string_view char_rule, size_t max_nesting,
                            size_t max_repetition, bool& uses_char_rule) {
  return *translate(pattern, char_rule, max_nesting, max_repetition, uses_char_rule, 0, kInf64);
}

std::optional<std::string> pattern_to_gbnf(std::string_view pattern, std::string_view char_rule, size_t max_nesting,
                                           size_t max_repetition, bool& uses_char_rule, uint64_t min_len,
                                           uint64_t max_len) {
  return translate(pattern, char_rule, max_nesting, max_repetition, uses_char_rule, min_len, max_len);
}

bool check_pattern(std::string_view pattern, size_t max_nesting, size_t max_repetition) {
  const std::vector<PatternParser::Branch> branches = PatternParser(pattern, max_nesting, max_repetition).parse();
  return std::any_of(branches.begin(), branches.end(), [](const PatternParser::Branch& b) { return has_lookahead(b.re); });
}

std::string literal_pattern(const std::vector<std::string>& values) {
  std::string out = "^(?:";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += '|';
    for (size_t pos = 0; pos < values[i].size();) {
      const uint32_t cp = next_codepoint(values[i], pos);
      const bool alnum = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
      if (cp < 0x20 || cp == 0x7F) {
        out += "\\u";
        append_hex(out, cp, 4, true);
      } else if (cp < 0x7F && !alnum) {
        out += '\\';
        out += static_cast<char>(cp);
      } else {
        append_utf8(out, cp);
      }
    }
  }
  return out + ")$";
}

// ---------------------------------------------------------------------------
// pattern automata

namespace {

// Thompson's NFA of the pattern's branches; an edge with an empty set is an
// epsilon move. A lookahead's body is an automaton of its own in the same
// states, entered by no edge: the epsilon move over the lookahead (`look`
// set) starts it beside the pattern's path, as an obligation that path
// carries (pattern_dfa).
struct Nfa {
  struct Edge {
    CodepointSet chars;
    uint32_t to;
    int32_t look = -1;  // an epsilon move that starts lookahead `look`
  };
  struct Look {
    bool negative = false;
    std::vector<uint32_t> starts;      // its body's branches' first states
    std::vector<uint32_t> starts_at0;  // those of branches anchored at the start: only at position 0
  };
  std::vector<std::vector<Edge>> out;
  std::vector<bool> accepting;  // accepts at the string's end
  std::vector<bool> done;       // a lookahead's body matched, whatever follows
  std::vector<Look> looks;
  size_t max_states = 0;

  uint32_t add() {
    if (out.size() >= max_states) too_many("NFA", max_states);
    out.emplace_back();
    accepting.push_back(false);
    done.push_back(false);
    return static_cast<uint32_t>(out.size() - 1);
  }
  void edge(uint32_t from, CodepointSet chars, uint32_t to) { out[from].push_back({std::move(chars), to}); }
  void epsilon(uint32_t from, uint32_t to) { out[from].push_back({CodepointSet(), to}); }

  [[noreturn]] static void too_many(const char* what, size_t max_states) {
    throw PatternError("the lengths of its strings need more than " + std::to_string(max_states) + " " + what +
                       " states (minLength/maxLength)");
  }

  // Adds `re` from state `from`; returns the state after it.
  uint32_t build(const Re& re, uint32_t from) {
    switch (re.kind) {
      case Re::kEmpty: return from;
      case Re::kChars: {
        const uint32_t to = add();
        edge(from, re.chars, to);
        return to;
      }
      case Re::kLook: {
        Look look{re.negative, {}, {}};
        for (size_t i = 0; i < re.kids.size(); ++i) {
          const uint32_t s = add();
          const uint32_t e = build(re.kids[i], s);
          const auto [at_start, at_end] = re.look_anchors[i];
          if (!at_end) {
            done[e] = true;
          } else {
            accepting[e] = true;
            if (re.look_wide) {  // Python's '$' also matches before a final '\n'
              const uint32_t newline = add();
              edge(e, CodepointSet('\n', '\n'), newline);
              accepting[newline] = true;
            }
          }
          (at_start ? look.starts_at0 : look.starts).push_back(s);
        }
        looks.push_back(std::move(look));
        const uint32_t to = add();
        out[from].push_back({CodepointSet(), to, static_cast<int32_t>(looks.size() - 1)});
        return to;
      }
      case Re::kSeq:
        for (const Re& k : re.kids) from = build(k, from);
        return from;
      case Re::kAlt: {
        const uint32_t end = add();
        for (const Re& k : re.kids) {
          const uint32_t s = add();
          epsilon(from, s);
          epsilon(build(k, s), end);
        }
        return end;
      }
      case Re::kRepeat: {
        for (uint32_t i = 0; i < re.min; ++i) {
          const uint32_t s = add();
          epsilon(from, s);
          from = build(re.kids[0], s);
        }
        if (re.max == kInf) {  // a loop through a state of its own
          const uint32_t head = add();
          epsilon(from, head);
          epsilon(build(re.kids[0], head), head);
          return head;
        }
        const uint32_t end = add();
        for (uint32_t i = re.min; i < re.max; ++i) {
          epsilon(from, end);
          const uint32_t s = add();
          epsilon(from, s);
          from = build(re.kids[0], s);
        }
        epsilon(from, end);
        return end;
      }
    }
    return from;
  }
};

// Every Unicode scalar value (what an unanchored end takes).
CodepointSet scalar_values() {
  CodepointSet s(0, 0xD7FF);
  s.add(0xE000, kMaxCodepoint);
  return s;
}

// The states of a graph (`edges`: each state's targets) from which a state
// with `final` set is reachable, by a search of the reversed edges.
std::vector<bool> co_reachable(const std::vector<std::vector<size_t>>& edges, const std::vector<bool>& final) {
  std::vector<std::vector<size_t>> back(edges.size());
  for (size_t q = 0; q < edges.size(); ++q)
    for (size_t t : edges[q]) back[t].push_back(q);
  std::vector<bool> live(edges.size(), false);
  std::vector<size_t> todo;
  for (size_t q = 0; q < edges.size(); ++q)
    if (final[q]) live[q] = true, todo.push_back(q);
  while (!todo.empty()) {
    const size_t q = todo.back();
    todo.pop_back();
    for (size_t p : back[q])
      if (!live[p]) live[p] = true, todo.push_back(p);
  }
  return live;
}

// pattern_dfa's subset construction: a lookahead a path has passed and not
// yet decided (its body's states), and a path with those.
struct NfaObligation {
  uint32_t look = 0;
  std::vector<uint32_t> states;
  auto operator<=>(const NfaObligation&) const = default;
};
struct NfaThread {
  uint32_t q = 0;
  std::vector<NfaObligation> pending;  // sorted, each once
  auto operator<=>(const NfaThread&) const = default;
};

// More steps of building automata, within the budget.
void spend(AutomatonBudget& budget, size_t n) {
  budget.work += n;
  if (budget.work > budget.max_work) {
    throw PatternError("the schema's pattern automata need more than " + std::to_string(budget.max_work) +
                       " steps to build (minLength/maxLength)");
  }
}

}  // namespace

PatternDfa pattern_dfa(std::string_view pattern, size_t max_nesting, size_t max_repetition,
                       AutomatonBudget& budget, PatternReading reading) {
  const size_t max_states = budget.max_states;
  const bool wide = reading == PatternReading::kWide;
  PatternParser parser(pattern, max_nesting, max_repetition, wide);
  std::vector<PatternParser::Branch> branches = parser.parse();
  Nfa nfa;
  nfa.max_states = max_states;
  const uint32_t start = nfa.add();
  const CodepointSet any = scalar_values();
  for (const PatternParser::Branch& b : branches) {
    uint32_t s = nfa.add();
    nfa.epsilon(start, s);
    if (!b.anchored_start) nfa.edge(s, any, s);
    uint32_t e = nfa.build(b.re, s);
    if (!b.anchored_end) {
      const uint32_t tail = nfa.add();
      nfa.epsilon(e, tail);
      nfa.edge(tail, any, tail);
      e = tail;
    } else if (wide) {  // Python's '$' also matches before a final '\n'
      const uint32_t newline = nfa.add();
      nfa.edge(e, CodepointSet('\n', '\n'), newline);
      nfa.accepting[newline] = true;
    }
    nfa.accepting[e] = true;
  }

  // The atoms: the coarsest partition of the edges' sets.
  PatternDfa dfa;
  for (const auto& edges : nfa.out) {
    for (const Nfa::Edge& ed : edges) {
      if (ed.chars.empty()) continue;
      spend(budget, dfa.atoms.size() + 1);
      std::vector<CodepointSet> refined;
      CodepointSet rest = ed.chars;
      for (const CodepointSet& a : dfa.atoms) {
        CodepointSet in = a.intersect(ed.chars), out = a.minus(ed.chars);
        if (!in.empty()) refined.push_back(std::move(in));
        if (!out.empty()) refined.push_back(std::move(out));
        if (!rest.empty()) rest = rest.minus(a);
      }
      if (!rest.empty()) refined.push_back(std::move(rest));
      dfa.atoms = std::move(refined);
      if (dfa.atoms.size() > max_states) Nfa::too_many("character class", max_states);
    }
  }
  const size_t n_atoms = dfa.atoms.size();
  // Each edge's atoms (an atom is inside a set or apart from it).
  std::vector<std::vector<std::vector<uint32_t>>> edge_atoms(nfa.out.size());
  for (size_t q = 0; q < nfa.out.size(); ++q) {
    for (const Nfa::Edge& ed : nfa.out[q]) {
      std::vector<uint32_t> in;
      if (!ed.chars.empty())
        for (uint32_t a = 0; a < n_atoms; ++a)
          if (ed.chars.contains(dfa.atoms[a].ranges()[0].first)) in.push_back(a);
      edge_atoms[q].push_back(std::move(in));
    }
  }
  // Subset construction over threads: a thread is a state of the pattern's
  // path and the lookaheads it has passed and that are still undecided, each
  // the set of its body's states. A lookahead is decided when its body
  // reaches `done` (met, or failed when negative) or runs out of states
  // (failed, or met when negative); a failed one ends its thread. So a DFA
  // state is a set of threads, and one without lookaheads the usual set of
  // NFA states.
  using Obligation = NfaObligation;
  using Thread = NfaThread;
  auto body_closure = [&](std::vector<uint32_t> set) {
    std::vector<bool> seen(nfa.out.size(), false);
    for (uint32_t q : set) seen[q] = true;
    for (size_t i = 0; i < set.size(); ++i) {
      for (const Nfa::Edge& ed : nfa.out[set[i]]) {
        if (ed.chars.empty() && !seen[ed.to]) {
          seen[ed.to] = true;
          set.push_back(ed.to);
        }
      }
    }
    std::sort(set.begin(), set.end());
    return set;
  };
  // Adds `o` to `pending` while undecided; false when it failed.
  auto settle = [&](std::vector<Obligation>& pending, Obligation o) {
    const bool hit = std::any_of(o.states.begin(), o.states.end(), [&](uint32_t q) { return nfa.done[q]; });
    const bool negative = nfa.looks[o.look].negative;
    if (hit || o.states.empty()) return hit != negative;
    auto at = std::lower_bound(pending.begin(), pending.end(), o);
    if (at == pending.end() || *at != o) pending.insert(at, std::move(o));
    return true;
  };
  // The threads reachable by epsilon moves (at_start: at position 0, where
  // branches of lookaheads anchored at the start may match).
  auto closure = [&](std::vector<Thread> todo, bool at_start) {
    std::set<Thread> seen;
    while (!todo.empty()) {
      Thread t = std::move(todo.back());
      todo.pop_back();
      const uint32_t q = t.q;
      auto [at, added] = seen.insert(std::move(t));
      if (!added) continue;
      for (const Nfa::Edge& ed : nfa.out[q]) {
        if (!ed.chars.empty()) continue;
        Thread n{ed.to, at->pending};
        if (ed.look >= 0) {
          const Nfa::Look& look = nfa.looks[static_cast<size_t>(ed.look)];
          std::vector<uint32_t> starts = look.starts;
          if (at_start) starts.insert(starts.end(), look.starts_at0.begin(), look.starts_at0.end());
          if (!settle(n.pending, {static_cast<uint32_t>(ed.look), body_closure(std::move(starts))})) continue;
        }
        todo.push_back(std::move(n));
      }
    }
    return std::vector<Thread>(seen.begin(), seen.end());
  };
  // Whether a thread accepts at the string's end: its state accepts, every
  // positive lookahead's body can end here and no negative one's can.
  auto accepts = [&](const Thread& t) {
    if (!nfa.accepting[t.q]) return false;
    return std::all_of(t.pending.begin(), t.pending.end(), [&](const Obligation& o) {
      const bool end = std::any_of(o.states.begin(), o.states.end(), [&](uint32_t q) { return nfa.accepting[q]; });
      return end != nfa.looks[o.look].negative;
    });
  };
  // A thread's lookaheads after one more code point of atom `a`; false when
  // one failed.
  auto step_pending = [&](const std::vector<Obligation>& pending, uint32_t a, std::vector<Obligation>& out) {
    for (const Obligation& o : pending) {
      std::vector<uint32_t> moved;
      for (uint32_t q : o.states)
        for (size_t k = 0; k < nfa.out[q].size(); ++k)
          for (uint32_t b : edge_atoms[q][k])
            if (b == a) moved.push_back(nfa.out[q][k].to);
      if (!settle(out, {o.look, body_closure(std::move(moved))})) return false;
    }
    return true;
  };

  std::map<std::vector<Thread>, int32_t> ids;
  std::vector<std::vector<Thread>> subsets{closure({Thread{start, {}}}, true)};
  ids[subsets[0]] = 0;
  std::vector<std::vector<int32_t>> next;
  std::vector<bool> accepting;
  for (size_t i = 0; i < subsets.size(); ++i) {
    spend(budget, n_atoms + subsets[i].size());
    std::vector<std::vector<Thread>> moves(n_atoms);
    bool acc = false;
    for (const Thread& t : subsets[i]) {
      acc = acc || accepts(t);
      for (size_t k = 0; k < nfa.out[t.q].size(); ++k) {
        for (uint32_t a : edge_atoms[t.q][k]) {
          Thread n{nfa.out[t.q][k].to, {}};
          if (!t.pending.empty()) {
            spend(budget, t.pending.size());
            if (!step_pending(t.pending, a, n.pending)) continue;
          }
          moves[a].push_back(std::move(n));
        }
      }
    }
    std::vector<int32_t> row(n_atoms, -1);
    for (size_t a = 0; a < n_atoms; ++a) {
      if (moves[a].empty()) continue;
      std::vector<Thread> target = closure(std::move(moves[a]), false);
      if (target.empty()) continue;
      auto [it, added] = ids.emplace(target, static_cast<int32_t>(subsets.size()));
      if (added) {
        if (subsets.size() >= max_states) Nfa::too_many("DFA", max_states);
        subsets.push_back(std::move(target));
      }
      row[a] = it->second;
    }
    next.push_back(std::move(row));
    accepting.push_back(acc);
  }

  // Dead states (no accepting state reachable) become -1.
  const size_t n = next.size();
  std::vector<std::vector<size_t>> edges(n);
  for (size_t q = 0; q < n; ++q)
    for (int32_t t : next[q])
      if (t >= 0) edges[q].push_back(static_cast<size_t>(t));
  const std::vector<bool> live = co_reachable(edges, accepting);
  for (auto& row : next)
    for (int32_t& t : row)
      if (t >= 0 && !live[static_cast<size_t>(t)]) t = -1;

  // Moore's minimization: classes split by acceptance, then by the classes
  // of their targets, until stable.
  std::vector<int32_t> cls(n);
  for (size_t q = 0; q < n; ++q) cls[q] = live[q] ? (accepting[q] ? 1 : 0) : -1;
  for (size_t n_classes = 0;;) {
    spend(budget, n * (n_atoms + 1));
    std::map<std::vector<int32_t>, int32_t> sig_ids;
    std::vector<int32_t> refined(n, -1);
    for (size_t q = 0; q < n; ++q) {
      if (cls[q] < 0) continue;
      std::vector<int32_t> sig{cls[q]};
      for (int32_t t : next[q]) sig.push_back(t < 0 ? -1 : cls[static_cast<size_t>(t)]);
      refined[q] = sig_ids.emplace(std::move(sig), static_cast<int32_t>(sig_ids.size())).first->second;
    }
    cls = std::move(refined);
    if (sig_ids.size() == n_classes) break;
    n_classes = sig_ids.size();
  }
  // Classes renumbered from the start's, in order of first reach.
  std::vector<int32_t> order(n, -1);
  std::vector<size_t> rep;  // a state of each new class
  if (cls[0] >= 0) {
    order[static_cast<size_t>(cls[0])] = 0;
    rep.push_back(0);
    for (size_t i = 0; i < rep.size(); ++i) {
      for (int32_t t : next[rep[i]]) {
        if (t < 0) continue;
        const int32_t c = cls[static_cast<size_t>(t)];
        if (order[static_cast<size_t>(c)] < 0) {
          order[static_cast<size_t>(c)] = static_cast<int32_t>(rep.size());
          rep.push_back(static_cast<size_t>(t));
        }
      }
    }
  }
  for (size_t q : rep) {
    std::vector<int32_t> row(n_atoms, -1);
    for (size_t a = 0; a < n_atoms; ++a)
      if (next[q][a] >= 0) row[a] = order[static_cast<size_t>(cls[static_cast<size_t>(next[q][a])])];
    dfa.next.push_back(std::move(row));
    dfa.accepting.push_back(accepting[q]);
  }
  return dfa;
}

bool PatternDfa::matches(std::string_view utf8) const {
  if (next.empty()) return false;
  int32_t q = 0;
  for (size_t pos = 0; pos < utf8.size() && q >= 0;) {
    const uint32_t cp = next_codepoint(utf8, pos);
    int32_t t = -1;
    for (size_t a = 0; a < atoms.size(); ++a)
      if (atoms[a].contains(cp)) t = next[static_cast<size_t>(q)][a];
    q = t;
  }
  return q >= 0 && accepting[static_cast<size_t>(q)];
}

namespace {

// The most code points `dfa` can read from each state until it accepts (its
// longest path to an accepting state), kInf64 where it can reach a cycle.
// Every state of pattern_dfa's DFAs can reach an accepting one. Kahn's order
// on the reversed edges: a state is done once all its targets are.
std::vector<uint64_t> longest_to_accept(const PatternDfa& dfa) {
  const size_t n = dfa.next.size();
  std::vector<std::vector<size_t>> preds(n);
  std::vector<size_t> pending(n, 0);  // edges to targets not yet done
  for (size_t q = 0; q < n; ++q)
    for (int32_t t : dfa.next[q])
      if (t >= 0) preds[static_cast<size_t>(t)].push_back(q), ++pending[q];
  std::vector<uint64_t> longest(n, kInf64);
  std::vector<uint64_t> best(n, 0);  // over the targets done; live states accept or have one
  std::vector<size_t> todo;
  for (size_t q = 0; q < n; ++q)
    if (pending[q] == 0) todo.push_back(q);
  while (!todo.empty()) {
    const size_t q = todo.back();
    todo.pop_back();
    longest[q] = best[q];
    for (size_t p : preds[q]) {
      best[p] = std::max(best[p], longest[q] + 1);
      if (--pending[p] == 0) todo.push_back(p);
    }
  }
  return longest;
}

// string_automaton, the patterns of `lang` read as `reading` says (the
// excluded ones always kWide); counted tails only where `tails` is set.
std::optional<PatternAutomaton> product_automaton(const StringLanguage& lang, PatternReading reading,
                                                  size_t max_nesting, size_t max_repetition,
                                                  AutomatonBudget& budget, bool tails = false) {
  // The factors: each pattern's DFA, and each excluded one's, flipped.
  struct Factor {
    PatternDfa dfa;
    bool flipped = false;
    std::vector<int32_t> atom_of;  // the factor's atom of each common atom, -1: none
    std::vector<uint64_t> longest;  // longest_to_accept, for a factor not flipped
  };
  std::vector<Factor> factors;
  for (const std::string& p : lang.patterns) {
    factors.push_back({pattern_dfa(p, max_nesting, max_repetition, budget, reading), false, {}, {}});
    if (factors.back().dfa.next.empty()) return std::nullopt;
    factors.back().longest = longest_to_accept(factors.back().dfa);
  }
  for (const std::string& p : lang.excluded)
    factors.push_back({pattern_dfa(p, max_nesting, max_repetition, budget, PatternReading::kWide), true, {}, {}});
  const size_t max_states = budget.max_states;

  // The common atoms: the scalar values split by every factor's atoms.
  std::vector<CodepointSet> atoms{scalar_values()};
  for (const Factor& f : factors) {
    for (const CodepointSet& a : f.dfa.atoms) {
      spend(budget, atoms.size() + 1);
      std::vector<CodepointSet> refined;
      for (const CodepointSet& c : atoms) {
        CodepointSet in = c.intersect(a), out = c.minus(a);
        if (!in.empty()) refined.push_back(std::move(in));
        if (!out.empty()) refined.push_back(std::move(out));
      }
      atoms = std::move(refined);
      if (atoms.size() > max_states) Nfa::too_many("character class", max_states);
    }
  }
  for (Factor& f : factors) {
    f.atom_of.assign(atoms.size(), -1);
    for (size_t c = 0; c < atoms.size(); ++c)
      for (size_t a = 0; a < f.dfa.atoms.size(); ++a)
        if (f.dfa.atoms[a].contains(atoms[c].ranges()[0].first)) f.atom_of[c] = static_cast<int32_t>(a);
  }

  // The product's states: each factor's state (-1: a flipped factor's dead
  // state, which accepts every continuation) and n code points read, up to
  // max_len, or up to min_len and staying there when max_len is unbounded;
  // kFree once n >= min_len and the factors not flipped cannot read past
  // max_len (the count decides nothing more).
  constexpr uint64_t kFree = kInf64;
  const bool bounded = lang.max_len != UINT64_MAX;
  const uint64_t cap = bounded ? lang.max_len : lang.min_len;
  using Tuple = std::vector<int32_t>;
  auto count_of = [&](const Tuple& t, uint64_t n) {
    if (!bounded || n < lang.min_len) return n;
    uint64_t most = kInf64;  // the longest any factor not flipped still reads
    for (size_t k = 0; k < factors.size(); ++k)
      if (!factors[k].flipped) most = std::min(most, factors[k].longest[static_cast<size_t>(t[k])]);
    return add(n, most) <= lang.max_len ? kFree : n;
  };
  auto after = [&](uint64_t n) { return n == kFree ? kFree : bounded ? n + 1 : std::min(n + 1, cap); };
  auto factors_accept = [&](const Tuple& t) {
    for (size_t k = 0; k < factors.size(); ++k) {
      const int32_t q = t[k];
      const bool in = q >= 0 && factors[k].dfa.accepting[static_cast<size_t>(q)];
      if (in == factors[k].flipped) return false;
    }
    return true;
  };
  using Key = std::pair<Tuple, uint64_t>;
  Key first{{}, 0};
  for (const Factor& f : factors) first.first.push_back(f.dfa.next.empty() ? -1 : 0);
  first.second = count_of(first.first, 0);
  std::map<Key, size_t> ids;
  std::vector<Key> states{first};
  ids[states[0]] = 0;
  std::vector<std::vector<std::pair<size_t, size_t>>> moves(1);  // (common atom, target)
  // Counted tails: a tuple whose every move returns to itself (a sink over
  // the set `loop`) is written as that set repeated, the lengths left, in
  // place of a state per count; entered at more than kMaxTailEntries counts
  // the states per count are cheaper (each tail is rules of its own), so
  // the tuple's states are expanded after all; and so are tails of fewer
  // than kMinTailSpan counts (a state per count is as small).
  constexpr size_t kMaxTailEntries = 16;
  constexpr uint64_t kMinTailSpan = 64;
  struct Tail {
    CodepointSet loop;
    std::vector<size_t> entries;  // its states, while counted
    bool expanded = false;
  };
  std::map<Tuple, Tail> sinks;
  std::vector<char> counted(1, 0);
  std::vector<size_t> todo{0};
  // Expands state i: its moves, or a counted tail.
  auto expand = [&](size_t i) {
    spend(budget, atoms.size() * (factors.size() + 1) + 1);
    const uint64_t n = states[i].second;
    std::vector<std::pair<size_t, Tuple>> targets;
    if (n == kFree || !bounded || n < cap) {
      for (size_t c = 0; c < atoms.size(); ++c) {
        Tuple t;
        bool dead = false;
        for (size_t k = 0; k < factors.size() && !dead; ++k) {
          const Factor& f = factors[k];
          const int32_t q = states[i].first[k], a = f.atom_of[c];
          const int32_t to = q < 0 || a < 0 ? -1 : f.dfa.next[static_cast<size_t>(q)][static_cast<size_t>(a)];
          dead = to < 0 && !f.flipped;
          t.push_back(to);
        }
        if (!dead) targets.emplace_back(c, std::move(t));
      }
    }
    const uint64_t span = n == kFree ? 0 : bounded ? lang.max_len - n : lang.min_len - n;
    if (tails && span >= kMinTailSpan && !targets.empty() &&
        std::all_of(targets.begin(), targets.end(), [&](const auto& x) { return x.second == states[i].first; })) {
      Tail& tail = sinks[states[i].first];
      if (tail.loop.empty())
        for (const auto& x : targets) tail.loop.add(atoms[x.first]);
      if (!tail.expanded && tail.entries.size() < kMaxTailEntries) {
        tail.entries.push_back(i);
        counted[i] = 1;
        return;
      }
      if (!tail.expanded) {  // too many entries: the earlier ones expanded too
        tail.expanded = true;
        for (size_t e : tail.entries) counted[e] = 0, todo.push_back(e);
        tail.entries.clear();
      }
    }
    std::vector<std::pair<size_t, size_t>> row;
    for (auto& [c, t] : targets) {
      const uint64_t m = count_of(t, after(n));
      auto [it, added] = ids.emplace(Key{std::move(t), m}, states.size());
      if (added) {
        if (states.size() >= max_states) Nfa::too_many("automaton", max_states);
        states.push_back(it->first);
        moves.emplace_back();
        counted.push_back(0);
        todo.push_back(states.size() - 1);
      }
      row.emplace_back(c, it->second);
    }
    moves[i] = std::move(row);
  };
  for (size_t next = 0; next < todo.size(); ++next) expand(todo[next]);

  auto accepts = [&](size_t i) {
    if (states[i].second != kFree && states[i].second < lang.min_len && !counted[i]) return false;
    return factors_accept(states[i].first);
  };
  std::vector<std::vector<size_t>> edges(states.size());
  std::vector<bool> final(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    final[i] = accepts(i);
    for (const auto& [a, t] : moves[i]) edges[i].push_back(t);
  }
  const std::vector<bool> live = co_reachable(edges, final);
  if (!live[0]) return std::nullopt;
  std::vector<size_t> index(states.size(), SIZE_MAX);
  size_t n_live = 0;
  for (size_t i = 0; i < states.size(); ++i)
    if (live[i]) index[i] = n_live++;
  PatternAutomaton out;
  out.states.resize(n_live);
  for (size_t i = 0; i < states.size(); ++i) {
    if (!live[i]) continue;
    PatternAutomaton::State& st = out.states[index[i]];
    st.accepting = final[i];
    if (counted[i]) {  // the loop's set, from n to max_len code points in all (at least min_len)
      const uint64_t n = states[i].second;
      st.counted = true;
      st.loop = sinks[states[i].first].loop;
      st.loop_min = n < lang.min_len ? lang.min_len - n : 0;
      st.loop_max = bounded ? lang.max_len - n : kInf64;
      continue;
    }
    std::map<size_t, CodepointSet> by_target;
    for (const auto& [c, t] : moves[i])
      if (live[t]) by_target[index[t]].add(atoms[c]);
    for (auto& [t, chars] : by_target) st.edges.push_back({std::move(chars), t});
  }
  return out;
}

}  // namespace

std::optional<PatternAutomaton> string_automaton(const StringLanguage& lang, size_t max_nesting,
                                                 size_t max_repetition, AutomatonBudget& budget) {
  return product_automaton(lang, PatternReading::kNarrow, max_nesting, max_repetition, budget, true);
}

std::optional<PatternAutomaton> word_count_automaton(const StringLanguage& lang, size_t max_nesting,
                                                     size_t max_repetition, AutomatonBudget& budget) {
  if (lang.patterns.size() != 1 || !lang.excluded.empty() || lang.max_len == UINT64_MAX || lang.min_len > 1) {
    return std::nullopt;
  }
  // The shape: ^(?:X+Y+){0,K}X+$ (X, Y disjoint sets), and maybe ^$ beside it.
  PatternParser parser(lang.patterns[0], max_nesting, max_repetition);
  std::vector<PatternParser::Branch> branches = parser.parse();
  const Re* words = nullptr;
  bool empty = false;
  for (const PatternParser::Branch& b : branches) {
    if (!b.anchored_start || !b.anchored_end) return std::nullopt;
    if (b.re.kind == Re::kEmpty) {
      empty = true;
    } else if (words) {
      return std::nullopt;
    } else {
      words = &b.re;
    }
  }
  auto run = [](const Re& r) {  // the set of a one-or-more repetition of one set, or null
    return r.kind == Re::kRepeat && r.min == 1 && r.max == kInf && r.kids[0].kind == Re::kChars ? &r.kids[0].chars
                                                                                              : nullptr;
  };
  if (!words || words->kind != Re::kSeq || words->kids.size() != 2) return std::nullopt;
  const Re& rep = words->kids[0];
  if (rep.kind != Re::kRepeat || rep.min != 0 || rep.max == kInf || rep.kids[0].kind != Re::kSeq ||
      rep.kids[0].kids.size() != 2) {
    return std::nullopt;
  }
  const CodepointSet* x = run(rep.kids[0].kids[0]);
  const CodepointSet* y = run(rep.kids[0].kids[1]);
  const CodepointSet* last = run(words->kids[1]);
  if (!x || !y || !last || !(*x == *last) || !x->intersect(*y).empty()) return std::nullopt;
  // x and y as scalar values (the grammar writes no surrogate).
  const CodepointSet xs = x->intersect(scalar_values()), ys = y->intersect(scalar_values());
  if (xs.empty() || ys.empty()) return std::nullopt;

  // Units (a word and the run after it; the last word alone) at most
  // K + 1 = `units`; the counter c rounds up to a multiple of m where a unit
  // starts, so the u-th unit starts at c >= (u - 1) m, and c <= units * m
  // bounds both the units and the length. Where maxLength <= 2K + 1 no
  // string has more units than allowed: c counts code points (m = 1).
  const uint64_t units = uint64_t{rep.max} + 1;
  const uint64_t m = lang.max_len <= 2 * units - 1 ? 1 : lang.max_len / units;
  const uint64_t cap = m == 1 ? lang.max_len : units * m;
  // States: 0 the start; 2c - 1 in a word after c (c >= 1); 2c in a run of y
  // after c. Edges only up to c = cap; the states past the last edge into
  // them are left out below (co-reachability).
  if (cap == 0) {
    if (!empty) return std::nullopt;
    PatternAutomaton out;
    out.states.resize(1);
    out.states[0].accepting = true;
    return out;
  }
  if (cap >= budget.max_states) return std::nullopt;  // 2 cap + 1 states of two edges (a product state has more)
  const size_t n = static_cast<size_t>(2 * cap + 1);
  spend(budget, 4 * n);
  std::vector<std::vector<std::pair<CodepointSet, size_t>>> moves(n);
  std::vector<bool> final(n, false);
  auto word = [](uint64_t c) { return static_cast<size_t>(2 * c - 1); };
  auto gap = [](uint64_t c) { return static_cast<size_t>(2 * c); };
  final[0] = empty && lang.min_len == 0;
  moves[0].push_back({xs, word(1)});
  for (uint64_t c = 1; c <= cap; ++c) {
    final[word(c)] = true;  // every string here has a code point: min_len <= 1
    if (c == cap) continue;
    moves[word(c)].push_back({xs, word(c + 1)});
    moves[word(c)].push_back({ys, gap(c + 1)});
    moves[gap(c)].push_back({ys, gap(c + 1)});
    const uint64_t start = (c + m - 1) / m * m + 1;  // the next unit's first code point
    if (start <= cap) moves[gap(c)].push_back({xs, word(start)});
  }
  std::vector<std::vector<size_t>> edges(n);
  for (size_t q = 0; q < n; ++q)
    for (const auto& [set, t] : moves[q]) edges[q].push_back(t);
  const std::vector<bool> live = co_reachable(edges, final);
  if (!live[0]) return std::nullopt;
  // Renumbered in order of first reach from the start.
  std::vector<size_t> index(n, SIZE_MAX), order{0};
  index[0] = 0;
  for (size_t i = 0; i < order.size(); ++i)
    for (const auto& [set, t] : moves[order[i]])
      if (live[t] && index[t] == SIZE_MAX) index[t] = order.size(), order.push_back(t);
  PatternAutomaton out;
  out.states.resize(order.size());
  for (size_t q : order) {
    PatternAutomaton::State& st = out.states[index[q]];
    st.accepting = final[q];
    for (const auto& [set, t] : moves[q])
      if (live[t]) st.edges.push_back({set, index[t]});
  }
  return out;
}

std::optional<PatternAutomaton> pattern_automaton(std::string_view pattern, size_t max_nesting,
                                                  size_t max_repetition, uint64_t min_len, uint64_t max_len,
                                                  AutomatonBudget& budget) {
  return string_automaton({{std::string(pattern)}, {}, min_len, max_len}, max_nesting, max_repetition, budget);
}

namespace {

// Whether no string of the lengths is in a's language read as `ra` and in
// b's read as `rb` (patterns_disjoint).
bool readings_disjoint(std::string_view a, PatternReading ra, std::string_view b, PatternReading rb,
                       uint64_t min_len, uint64_t max_len, size_t max_nesting, size_t max_repetition,
                       AutomatonBudget& budget) {
  const auto x = product_automaton({{std::string(a)}, {}, min_len, max_len}, ra, max_nesting, max_repetition, budget);
  if (!x) return true;
  const auto y = product_automaton({{std::string(b)}, {}, min_len, max_len}, rb, max_nesting, max_repetition, budget);
  const size_t max_states = budget.max_states;
  if (!y) return true;
  std::set<std::pair<size_t, size_t>> seen{{0, 0}};
  std::vector<std::pair<size_t, size_t>> todo{{0, 0}};
  while (!todo.empty()) {
    const auto [i, j] = todo.back();
    todo.pop_back();
    const PatternAutomaton::State &u = x->states[i], &w = y->states[j];
    if (u.accepting && w.accepting) return false;
    for (const auto& eu : u.edges) {
      for (const auto& ew : w.edges) {
        if (eu.chars.intersect(ew.chars).empty() || !seen.insert({eu.to, ew.to}).second) continue;
        if (seen.size() > max_states) return false;
        todo.emplace_back(eu.to, ew.to);
      }
    }
  }
  return true;
}

}  // namespace

bool patterns_disjoint(std::string_view a, std::string_view b, uint64_t min_len, uint64_t max_len,
                       size_t max_nesting, size_t max_repetition, AutomatonBudget& budget) {
  constexpr PatternReading kNarrow = PatternReading::kNarrow, kWide = PatternReading::kWide;
  try {
    return readings_disjoint(a, kNarrow, b, kWide, min_len, max_len, max_nesting, max_repetition, budget) &&
           readings_disjoint(a, kWide, b, kNarrow, min_len, max_len, max_nesting, max_repetition, budget);
  } catch (const PatternError&) {
    // The narrow readings were taken (so the patterns are ones the converter
    // writes): the wide one's '$' or the budget; not proven.
    return false;
  }
}


}  // namespace synapse::grammar::schema
