// $ref resolution of the JSON Schema converter (json_schema.cpp): base URIs
// ($id, draft 4's id), plain-name fragments ($anchor, "#name" ids) and JSON
// pointers, resolved within the document before the converter rewrites it.
//
// Pure functions of their arguments (thread-safe). Sources: RFC 3986 section
// 5 (reference resolution), RFC 6901 (JSON pointers), the JSON Schema core
// specifications: draft 4 section 7 ("id"), drafts 6/7 section 8 ("$id",
// "#name" ids, $ref beside other keywords ignored), 2019-09 and 2020-12
// section 8.2 ("$id" without a fragment, "$anchor", 2020-12's
// "$dynamicAnchor" also a plain name).
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

namespace synapse::grammar::schema {

using Json = nlohmann::ordered_json;

// The keywords whose values are subschemas: maps of them, one, and arrays
// of them ("items" is one or an array). Every schema position of a document
// is reached from the root through these (and $ref).
inline constexpr const char* kSubschemaMaps[] = {"properties",  "patternProperties", "$defs",
                                                 "definitions", "dependentSchemas",  "dependencies"};
inline constexpr const char* kSubschemaValues[] = {"additionalProperties",
                                                   "items",
                                                   "additionalItems",
                                                   "not",
                                                   "contains",
                                                   "propertyNames",
                                                   "if",
                                                   "then",
                                                   "else",
                                                   "unevaluatedItems",
                                                   "unevaluatedProperties"};
inline constexpr const char* kSubschemaArrays[] = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};

// A URI fragment with its %XX escapes decoded (a JSON pointer or a name).
std::string percent_decode(std::string_view fragment);

// The node at JSON pointer `pointer` (decoded: "/a/0", "" for `from`
// itself) under `from`, or nullptr where the pointer leaves the document
// (a missing member, an index out of range or not a plain decimal).
// `canonical` gets the pointer as the converter writes pointers (tokens with
// ~0/~1 escapes, indices without leading zeros).
const Json* walk_pointer(const Json& from, std::string_view pointer, std::string& canonical);

// RFC 3986 section 5.2: `ref` resolved against `base` (both may be
// relative; an empty base leaves ref's path as written, dot segments
// removed).
std::string resolve_uri(std::string_view base, std::string_view ref);

// Resolves every $ref of the document `doc` (its root and the schemas under
// its keywords, and the nodes references name) within it, and rewrites each
// so that the converter reads it as a JSON pointer from the root:
//  - resolved: "#" + the target's pointer (%-escaped); left as written
//    where it already is that (a "#/..." pointer read from the root);
//  - not resolvable within the document (another document, a missing
//    pointer or name, an identifier two schemas declare): the URI it
//    resolves to, which names no target.
// The dialect is the root's $schema: draft 3/4 read "id", later drafts
// "$id"; drafts 4 to 7 read an id "#name" (or "uri#name") as a plain name,
// 2019-09 and later "$anchor" (2020-12 also "$dynamicAnchor"); drafts 3 to 7
// ignore an id beside $ref. A document without a known $schema is read as
// 2020-12. Nodes nested deeper than max_depth are not read (the converter
// refuses them).
struct RefIndex {
  std::set<std::string> resolved;              // fragments (percent_decode) of the references that resolved
  std::set<std::string> unresolved;            // fragments of those that did not and begin with '#'
  std::map<std::string, std::string> written;  // each that did not, as rewritten -> as written (for errors)
};
RefIndex resolve_refs(Json& doc, size_t max_depth);

// The JSON pointer `ptr` with one more reference token, `token` escaped
// (RFC 6901: '~' as ~0, '/' as ~1). Thread-safe.
std::string pointer_child(const std::string& ptr, std::string_view token);

}  // namespace synapse::grammar::schema
