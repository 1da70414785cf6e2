// The built-in filters and tests (filters.cpp), the methods of str, list and
// dict and the globals (range, dict, namespace, ...: methods.cpp), and
// Python's formatting (format.cpp).
#pragma once

#include <ctime>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "template/ast.hpp"

namespace synapse::jinja {

class Scope;

// Null when there is no such filter or test.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// The method `name` of a str, list or dict bound to `self` (s.strip, l.append,
// d.items, ...), or undefined when that type has no such method.
Value bind_method(Interp& in, const Value& self, std::string_view name);

// Defines the global functions in `globals`.
void define_globals(Interp& in, Scope& globals);

// Python's str.format (the sandbox's formatter) and the % operator of str.
std::string python_format(Interp& in, const std::string& fmt, Args& args);
std::string percent_format(Interp& in, const std::string& fmt, const Value& args);

// Binds call arguments to a Python signature: params in order, each with a
// default (nullopt: required). Extra positional arguments, unknown keywords
// and missing required ones are Faults (Python's TypeError), naming `fname`.
std::vector<Value> bind(std::string_view fname, const Args& args,
                        std::initializer_list<std::pair<const char*, std::optional<Value>>> params);

// str() of a value, keeping Markup (markupsafe's soft_str).
Value soft_str(Interp& in, const Value& v);

// Python's int(str) and float(str): false when the text is not one.
bool parse_python_int(std::string_view s, int base, int64_t& out);
bool parse_python_float(std::string_view s, double& out);

}  // namespace synapse::jinja
