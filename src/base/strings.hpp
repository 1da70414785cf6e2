// Small string helpers shared by every layer (error messages, CLI output).
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace synapse {

// The items of `items` (any range), each turned into text by `show`, with
// `sep` between them: join(ne, ", ") gives "64, 512". The default `show` is
// std::to_string (arithmetic items). Appends in place, which also keeps
// gcc 12's -Wrestrict false positive on `(i ? "," : "") + std::to_string(x)`
// away.
template <typename Range, typename Show>
std::string join(const Range& items, std::string_view sep, Show show) {
  std::string s;
  bool first = true;
  for (const auto& item : items) {
    if (!first) s += sep;
    s += show(item);
    first = false;
  }
  return s;
}

template <typename Range>
std::string join(const Range& items, std::string_view sep) {
  return join(items, sep, [](const auto& x) { return std::to_string(x); });
}

// join(items, sep) between `open` and `close`: "[64, 512]". (Built by
// appending: gcc 12's -Wrestrict misfires on "[" + std::string&&.)
template <typename Range, typename... Show>
std::string join_in(std::string_view open, const Range& items, std::string_view sep, std::string_view close,
                    Show... show) {
  std::string s(open);
  s += join(items, sep, show...);
  s += close;
  return s;
}

// The parts of `s` between `sep`s, each stripped of white space
// (std::isspace), the empty ones left out, in order: llama.cpp's
// string_split then string_strip, as its comma-separated flags (--host,
// --alias, --tags) read their values. split_stripped(" a, ,b ", ',') is
// {"a", "b"}.
inline std::vector<std::string> split_stripped(std::string_view s, char sep) {
  std::vector<std::string> out;
  const auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  size_t begin = 0;
  while (begin <= s.size()) {
    size_t end = s.find(sep, begin);
    if (end == std::string_view::npos) end = s.size();
    size_t first = begin, last = end;
    while (first < last && blank(s[first])) ++first;
    while (last > first && blank(s[last - 1])) --last;
    if (first < last) out.emplace_back(s.substr(first, last - first));
    begin = end + 1;
  }
  return out;
}

}  // namespace synapse
