// Python's text rules, as the template engine needs them to print what
// Python Jinja2 prints: strings as sequences of code points (len, indexing,
// slicing count code points, not bytes), str.isspace, str() and repr() of
// floats and strings, json.dumps' string escapes, str.splitlines.
//
// Strings are UTF-8. Bytes that are not valid UTF-8 decode to U+DC80..U+DCFF
// (Python's "surrogateescape") and encode back to the same byte, so no input
// is lost or rejected here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace synapse::jinja {

std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
// The number of code points (Python's len() of the string).
size_t count_code_points(std::string_view s);
// Whether the bytes are valid UTF-8 (the lexer rejects a template that is not).
bool valid_utf8(std::string_view s);

// str.isspace() of one code point.
bool is_space(char32_t c);
// str.isprintable() of one code point, from the Unicode categories repr()
// escapes (Cc, Cf, Cs, Co, Zl, Zp, Zs but the space); unassigned code points
// count as printable (Python escapes them; no table of them is kept here).
bool is_printable(char32_t c);
// Python's case mapping for the Latin, Greek, Cyrillic and fullwidth letters
// (one code point to one); other code points are left as they are.
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_lower_case(char32_t c);  // a cased letter in lower case
bool is_upper_case(char32_t c);
// str.upper() of UTF-8 text: to_upper, and ß as SS.
std::string upper_string(std::string_view s);
bool is_alnum(char32_t c);  // ASCII letters and digits, and every non-ASCII letter-like code point
bool is_alpha(char32_t c);

// Python's repr() of a float ("1.0", "1e-05", "1.5e+16", "inf", "nan").
std::string float_repr(double d);
// Python's repr() of a str: quoted with ' (or " when the text has ' and no "),
// backslash escapes for the quote, \\, \t, \n, \r and unprintable code points.
std::string string_repr(std::string_view s);
// The body of json.dumps() of a str, without the quotes: \" \\ \n \r \t \b \f,
// \u00XX for other control characters; with ensure_ascii every code point over
// U+007F as \uXXXX (a surrogate pair above U+FFFF).
void json_escape(std::string& out, std::string_view s, bool ensure_ascii);
// markupsafe.escape: & < > ' " as &amp; &lt; &gt; &#39; &#34;.
std::string html_escape(std::string_view s);

// Python's str.strip/lstrip/rstrip: `chars` null strips whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);

}  // namespace synapse::jinja
