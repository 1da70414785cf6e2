#include "template/lexer.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "synapse/error.hpp"
#include "template/jinja.hpp"
#include "template/text.hpp"

namespace synapse::jinja {

void syntax_error(int line, const std::string& message) {
  throw Error(Errc::invalid_argument, "template: line " + std::to_string(line) + ": " + message);
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int count_newlines(std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// Python's str.rstrip() of template data (Unicode whitespace).
std::string_view rstrip_space(std::string_view s) {
  const std::u32string u = decode_utf8(s);
  size_t e = u.size();
  while (e > 0 && is_space(u[e - 1])) --e;
  std::string kept = encode_utf8(std::u32string_view(u).substr(0, e));
  return s.substr(0, kept.size());
}

bool all_space(std::string_view s) {
  if (s.empty()) return false;  // Jinja2's \s+ needs one
  for (const char32_t c : decode_utf8(s))
    if (!is_space(c)) return false;
  return true;
}

// The length of the run of whitespace (\s*) at s[pos].
size_t space_run(std::string_view s, size_t pos) {
  size_t p = pos;
  while (p < s.size()) {
    const auto b = static_cast<unsigned char>(s[p]);
    if (b < 0x80) {
      if (!is_space(b)) break;
      ++p;
      continue;
    }
    // A multi-byte character: decode just it.
    size_t n = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    n = std::min(n, s.size() - p);
    const std::u32string u = decode_utf8(s.substr(p, n));
    if (u.size() != 1 || !is_space(u[0])) break;
    p += n;
  }
  return p - pos;
}

// Python's unicode-escape decoding of a string literal's body, after
// Jinja2's .encode("ascii", "backslashreplace") (so a backslash before a
// non-ASCII character stays a backslash and the character's own \x/\u form).
std::string unescape(std::string_view body, int line) {
  std::string ascii;
  for (const char32_t c : decode_utf8(body)) {
    if (c < 0x80) {
      ascii.push_back(static_cast<char>(c));
      continue;
    }
    char buf[16];
    if (c < 0x100)
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
    else if (c < 0x10000)
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
    else
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
    ascii += buf;
  }
  std::string out;
  for (size_t i = 0; i < ascii.size(); ++i) {
    const char c = ascii[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i + 1 >= ascii.size()) syntax_error(line, "\\ at end of string");
    const char e = ascii[++i];
    auto hex = [&](size_t digits, const char* what) {
      char32_t v = 0;
      for (size_t k = 0; k < digits; ++k) {
        const int h = i + 1 + k < ascii.size() ? hex_value(ascii[i + 1 + k]) : -1;
        if (h < 0) syntax_error(line, std::string("truncated ") + what + " escape");
        v = v * 16 + static_cast<char32_t>(h);
      }
      i += digits;
      return v;
    };
    char32_t cp;
    switch (e) {
      case '\n': continue;
      case '\\': out.push_back('\\'); continue;
      case '\'': out.push_back('\''); continue;
      case '"': out.push_back('"'); continue;
      case 'a': out.push_back('\a'); continue;
      case 'b': out.push_back('\b'); continue;
      case 'f': out.push_back('\f'); continue;
      case 'n': out.push_back('\n'); continue;
      case 'r': out.push_back('\r'); continue;
      case 't': out.push_back('\t'); continue;
      case 'v': out.push_back('\v'); continue;
      case 'x': cp = hex(2, "\\xXX"); break;
      case 'u': cp = hex(4, "\\uXXXX"); break;
      case 'U': cp = hex(8, "\\UXXXXXXXX"); break;
      case 'N': syntax_error(line, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          cp = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < ascii.size() && ascii[i + 1] >= '0' && ascii[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<char32_t>(ascii[++i] - '0');
          break;
        }
        out.push_back('\\');
        out.push_back(e);
        continue;
    }
    if (cp > 0x10FFFF) syntax_error(line, "illegal Unicode character");
    if (cp >= 0xD800 && cp <= 0xDFFF) syntax_error(line, "a surrogate code point in a string");
    append_utf8(out, cp);
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const Options& opt) : src_(std::move(source)), opt_(opt) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      if (!root()) break;
    }
    tokens_.push_back({Tok::eof, line_, {}});
    return std::move(tokens_);
  }

 private:
  enum class Tag { variable, block, comment, raw };

  void emit(Tok t, std::string text = {}) { tokens_.push_back({t, line_, std::move(text)}); }
  bool at(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  // Whether a raw block starts at p ("{%" sign? \s* "raw" \s* ("-%}" \s* | "%}")); its end.
  bool raw_begin(size_t p, size_t& end) const {
    size_t q = p + 2;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
    q += space_run(src_, q);
    if (!at(q, "raw")) return false;
    q += 3;
    q += space_run(src_, q);
    if (at(q, "-%}")) {
      q += 3;
      end = q + space_run(src_, q);
      return true;
    }
    if (at(q, "%}")) {
      end = q + 2;
      return true;
    }
    return false;
  }

  // Template data up to the next tag, then the tag. False at the end.
  bool root() {
    size_t p = pos_;
    Tag tag = Tag::variable;
    size_t raw_end = 0;
    for (;; ++p) {
      p = src_.find('{', p);
      if (p == std::string::npos || p + 1 >= src_.size()) {
        p = std::string::npos;
        break;
      }
      const char c = src_[p + 1];
      if (c == '{') {
        tag = Tag::variable;
        break;
      }
      if (c == '#') {
        tag = Tag::comment;
        break;
      }
      if (c == '%') {
        tag = raw_begin(p, raw_end) ? Tag::raw : Tag::block;
        break;
      }
    }
    if (p == std::string::npos) {
      emit(Tok::data, src_.substr(pos_));
      pos_ = src_.size();
      return false;
    }
    const char sign = p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+') ? src_[p + 2] : 0;
    data_before(std::string_view(src_).substr(pos_, p - pos_), sign, tag != Tag::variable);
    pos_ = p + 2 + (sign ? 1 : 0);
    line_starting_ = false;
    switch (tag) {
      case Tag::comment: comment(); break;
      case Tag::raw:
        line_ += count_newlines(std::string_view(src_).substr(pos_, raw_end - pos_));
        line_starting_ = src_[raw_end - 1] == '\n';
        pos_ = raw_end;
        raw();
        break;
      case Tag::variable:
        emit(Tok::variable_begin);
        inside(false);
        break;
      case Tag::block:
        emit(Tok::block_begin);
        inside(true);
        break;
    }
    return true;
  }

  // Template data before a tag whose sign is `sign`: "-" strips the
  // whitespace before it; lstrip_blocks strips a line's indentation before a
  // block or comment tag unless the sign is "+".
  void data_before(std::string_view text, char sign, bool lstrip_kind) {
    const int newlines = count_newlines(text);
    std::string_view kept = text;
    if (sign == '-') {
      kept = rstrip_space(text);
    } else if (sign != '+' && opt_.lstrip_blocks && lstrip_kind) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_space(text.substr(l_pos))) kept = text.substr(0, l_pos);
    }
    if (!kept.empty()) emit(Tok::data, std::string(kept));
    line_ += newlines;
  }

  // After "{#": up to the first "+#}", "-#}" (and the whitespace after it)
  // or "#}" (and, with trim_blocks, one newline).
  void comment() {
    for (size_t q = pos_; q + 1 < src_.size(); ++q) {
      size_t end;
      if (src_[q] == '+' && at(q + 1, "#}")) {
        end = q + 3;
      } else if (src_[q] == '-' && at(q + 1, "#}")) {
        end = q + 3;
        end += space_run(src_, end);
      } else if (at(q, "#}")) {
        end = q + 2;
        if (opt_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    syntax_error(line_, "Missing end of comment tag");
  }

  // After {% raw %}: data up to {% endraw %}, kept as written.
  void raw() {
    for (size_t q = pos_; q + 1 < src_.size(); ++q) {
      if (!at(q, "{%")) continue;
      size_t r = q + 2;
      const char sign = r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r] : 0;
      if (sign) ++r;
      r += space_run(src_, r);
      if (!at(r, "endraw")) continue;
      r += 6;
      r += space_run(src_, r);
      size_t end;
      if (at(r, "+%}")) {
        end = r + 3;
      } else if (at(r, "-%}")) {
        end = r + 3;
        end += space_run(src_, end);
      } else if (at(r, "%}")) {
        end = r + 2;
        if (opt_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      data_before(std::string_view(src_).substr(pos_, q - pos_), sign, true);
      line_ += count_newlines(std::string_view(src_).substr(q, end - q));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    syntax_error(line_, "Missing end of raw directive");
  }

  // Whether the tag ends at pos_ (braces balanced); consumes the end.
  bool tag_end(bool block) {
    size_t end;
    if (block) {
      if (at(pos_, "+%}")) {
        end = pos_ + 3;
      } else if (at(pos_, "-%}")) {
        end = pos_ + 3;
        end += space_run(src_, end);
      } else if (at(pos_, "%}")) {
        end = pos_ + 2;
        if (opt_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        return false;
      }
    } else {
      if (at(pos_, "-}}")) {
        end = pos_ + 3;
        end += space_run(src_, end);
      } else if (at(pos_, "}}")) {
        end = pos_ + 2;
      } else {
        return false;
      }
    }
    emit(block ? Tok::block_end : Tok::variable_end);
    line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
    return true;
  }

  // Digits with single underscores between them ((\d+_)*\d+) at p; its end or npos.
  size_t digits(size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return std::string::npos;
    while (true) {
      while (p < src_.size() && is_digit(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  bool number() {
    const size_t start = pos_;
    // float: digits, then ((. digits)? e [+-]? digits | . digits); not after a dot.
    if (!(start > 0 && src_[start - 1] == '.')) {
      size_t p = digits(start);
      if (p != std::string::npos) {
        size_t q = p;
        bool frac = false;
        if (q < src_.size() && src_[q] == '.') {
          const size_t f = digits(q + 1);
          if (f != std::string::npos) {
            q = f;
            frac = true;
          }
        }
        size_t e = std::string::npos;
        if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
          size_t r = q + 1;
          if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
          e = digits(r);
        }
        if (e != std::string::npos || frac) {
          const size_t end = e != std::string::npos ? e : q;
          std::string text;
          for (size_t k = start; k < end; ++k)
            if (src_[k] != '_') text.push_back(src_[k]);
          Token t{Tok::real, line_, text};
          t.fval = std::strtod(text.c_str(), nullptr);
          tokens_.push_back(std::move(t));
          pos_ = end;
          return true;
        }
      }
    }
    // integer: 0b.., 0o.., 0x.., [1-9](_?\d)*, 0(_?0)*
    if (!is_digit(src_[start])) return false;
    int base = 10;
    size_t p = start;
    std::string digits_text;
    auto radix_digits = [&](int b) {
      size_t q = start + 2;
      std::string d;
      while (q < src_.size()) {
        size_t r = q;
        if (src_[r] == '_') ++r;
        if (r >= src_.size()) break;
        const int h = hex_value(src_[r]);
        if (h < 0 || h >= b) break;
        d.push_back(src_[r]);
        q = r + 1;
      }
      if (d.empty()) return false;
      base = b;
      digits_text = d;
      p = q;
      return true;
    };
    const char x = start + 1 < src_.size() ? static_cast<char>(src_[start + 1] | 0x20) : 0;
    if (src_[start] == '0' && ((x == 'b' && radix_digits(2)) || (x == 'o' && radix_digits(8)) ||
                               (x == 'x' && radix_digits(16)))) {
    } else if (src_[start] != '0') {
      while (p < src_.size()) {
        size_t r = p;
        if (src_[r] == '_' && r + 1 < src_.size()) ++r;
        if (!is_digit(src_[r])) break;
        digits_text.push_back(src_[r]);
        p = r + 1;
      }
    } else {
      digits_text = "0";
      ++p;
      while (p < src_.size()) {
        size_t r = p;
        if (src_[r] == '_' && r + 1 < src_.size()) ++r;
        if (src_[r] != '0') break;
        p = r + 1;
      }
    }
    uint64_t v = 0;
    for (const char c : digits_text) {
      const auto d = static_cast<uint64_t>(hex_value(c));
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / static_cast<uint64_t>(base))
        syntax_error(line_, "integer literal " + src_.substr(start, p - start) + " is too large");
      v = v * static_cast<uint64_t>(base) + d;
    }
    Token t{Tok::integer, line_, src_.substr(start, p - start)};
    t.ival = static_cast<int64_t>(v);
    tokens_.push_back(std::move(t));
    pos_ = p;
    return true;
  }

  bool string() {
    const char q = src_[pos_];
    if (q != '\'' && q != '"') return false;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != q) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) return false;  // unterminated: no rule matches
    const std::string_view body = std::string_view(src_).substr(pos_ + 1, p - pos_ - 1);
    emit(Tok::string, unescape(body, line_));
    line_ += count_newlines(body);
    pos_ = p + 1;
    return true;
  }

  bool op() {
    static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* o : two) {
      if (at(pos_, o)) {
        emit(Tok::op, o);
        pos_ += 2;
        return true;
      }
    }
    const char c = src_[pos_];
    if (!std::strchr("+-/*%~[](){}=.:|,;<>", c) || c == 0) return false;
    if (c == '{' || c == '(' || c == '[') {
      balance_.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
    } else if (c == '}' || c == ')' || c == ']') {
      if (balance_.empty()) syntax_error(line_, std::string("unexpected '") + c + "'");
      const char want = balance_.back();
      balance_.pop_back();
      if (want != c) syntax_error(line_, std::string("unexpected '") + c + "', expected '" + want + "'");
    }
    emit(Tok::op, std::string(1, c));
    ++pos_;
    return true;
  }

  // Tokens of a {{ }} or {% %} tag, up to its end.
  void inside(bool block) {
    balance_.clear();
    while (pos_ < src_.size()) {
      if (balance_.empty() && tag_end(block)) return;
      const size_t ws = space_run(src_, pos_);
      if (ws) {
        line_ += count_newlines(std::string_view(src_).substr(pos_, ws));
        pos_ += ws;
        continue;
      }
      if (number() || string()) continue;
      if (is_name_start(src_[pos_])) {
        size_t p = pos_;
        while (p < src_.size() && is_name_char(src_[p])) ++p;
        emit(Tok::name, src_.substr(pos_, p - pos_));
        pos_ = p;
        continue;
      }
      if (op()) continue;
      std::string shown;
      const auto b = static_cast<unsigned char>(src_[pos_]);
      if (b >= 0x20 && b < 0x7F)
        shown = std::string("'") + src_[pos_] + "'";
      else
        shown = "byte " + std::to_string(b);
      syntax_error(line_, "unexpected char " + shown + " at " + std::to_string(pos_));
    }
  }

  std::string src_;
  const Options& opt_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<char> balance_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const Options& options) {
  if (!valid_utf8(source)) syntax_error(1, "the template is not valid UTF-8");
  // Jinja2: every \r\n, \r and \n becomes \n; one trailing newline goes.
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s.push_back(source[i]);
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(std::move(s), options).run();
}

}  // namespace synapse::jinja
