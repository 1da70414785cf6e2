// Small string helpers shared by every layer (error messages, CLI output).
#pragma once

#include <string>
#include <string_view>

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

}  // namespace synapse
