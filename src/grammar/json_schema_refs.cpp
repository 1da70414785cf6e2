// $ref resolution of the JSON Schema converter: see json_schema_refs.hpp.

#include "grammar/json_schema_refs.hpp"

#include <optional>
#include <vector>

namespace synapse::grammar::schema {

namespace {

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}


// --- RFC 3986 ---------------------------------------------------------------

// A URI reference's five parts (RFC 3986 appendix B); a part that is absent
// differs from an empty one.
struct UriParts {
  std::optional<std::string> scheme, authority, query, fragment;
  std::string path;
};

UriParts parse_uri(std::string_view s) {
  UriParts u;
  const size_t colon = s.find_first_of(":/?#");
  if (colon != std::string_view::npos && colon > 0 && s[colon] == ':') {
    u.scheme = std::string(s.substr(0, colon));
    s.remove_prefix(colon + 1);
  }
  if (s.substr(0, 2) == "//") {
    const size_t end = std::min(s.find_first_of("/?#", 2), s.size());
    u.authority = std::string(s.substr(2, end - 2));
    s.remove_prefix(end);
  }
  const size_t path_end = std::min(s.find_first_of("?#"), s.size());
  u.path = std::string(s.substr(0, path_end));
  s.remove_prefix(path_end);
  if (!s.empty() && s[0] == '?') {
    const size_t end = std::min(s.find('#'), s.size());
    u.query = std::string(s.substr(1, end - 1));
    s.remove_prefix(end);
  }
  if (!s.empty() && s[0] == '#') u.fragment = std::string(s.substr(1));
  return u;
}

// Section 5.2.4.
std::string remove_dot_segments(std::string in) {
  std::string out;
  auto drop_last = [&out] {
    const size_t slash = out.rfind('/');
    out.erase(slash == std::string::npos ? 0 : slash);
  };
  while (!in.empty()) {
    if (in.rfind("../", 0) == 0) {
      in.erase(0, 3);
    } else if (in.rfind("./", 0) == 0) {
      in.erase(0, 2);
    } else if (in.rfind("/./", 0) == 0) {
      in.erase(0, 2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.rfind("/../", 0) == 0) {
      in.erase(0, 3);
      drop_last();
    } else if (in == "/..") {
      in = "/";
      drop_last();
    } else if (in == "." || in == "..") {
      in.clear();
    } else {
      const size_t end = std::min(in.find('/', in[0] == '/' ? 1 : 0), in.size());
      out += in.substr(0, end);
      in.erase(0, end);
    }
  }
  return out;
}

std::string compose(const UriParts& u) {
  std::string out;
  if (u.scheme) out += *u.scheme + ":";
  if (u.authority) out += "//" + *u.authority;
  out += u.path;
  if (u.query) out += "?" + *u.query;
  if (u.fragment) out += "#" + *u.fragment;
  return out;
}

// --- the document's identifiers -----------------------------------------------

// Which keywords of a dialect identify schemas (json_schema_refs.hpp).
struct Dialect {
  const char* id = "$id";
  bool name_in_id = false;     // "#name" in the id: a plain name (drafts 4 to 7)
  bool anchor = true;          // "$anchor" (2019-09, 2020-12)
  bool dynamic_anchor = true;  // "$dynamicAnchor" (2020-12)
  bool ref_hides_id = false;   // an id beside $ref is ignored (drafts 3 to 7)
};

Dialect dialect_of(const Json& doc) {
  const std::string schema =
      doc.contains("$schema") && doc["$schema"].is_string() ? doc["$schema"].get<std::string>() : "";
  auto has = [&schema](const char* s) { return schema.find(s) != std::string::npos; };
  if (has("draft-03") || has("draft-04")) return {"id", true, false, false, true};
  if (has("draft-06") || has("draft-07")) return {"$id", true, false, false, true};
  if (has("2019-09")) return {"$id", false, true, false, false};
  return {};  // 2020-12, and the dialect of a document without a known $schema
}

// Splits a URI into the part before '#' and its decoded fragment (absent: no '#').
std::pair<std::string, std::optional<std::string>> split_fragment(const std::string& uri) {
  const size_t hash = uri.find('#');
  if (hash == std::string::npos) return {uri, std::nullopt};
  return {uri.substr(0, hash), percent_decode(std::string_view(uri).substr(hash + 1))};
}

class RefResolver {
 public:
  RefResolver(Json& doc, size_t max_depth) : doc_(doc), dialect_(dialect_of(doc)), max_depth_(max_depth) {}

  RefIndex run() {
    declare(resources_, "", "");  // the document's own (retrieval) URI, unknown: empty
    walk(doc_, "", "", 0, true);
    RefIndex index;
    for (size_t i = 0; i < sites_.size(); ++i) {  // walk() adds the sites of the targets it reads
      const Site site = sites_[i];
      Json& ref = (*site.node)["$ref"];
      if (!ref.is_string()) continue;  // the converter says so
      const std::string r = ref.get<std::string>();
      const std::string uri = resolve_uri(site.base, r);
      const auto [resource, fragment] = split_fragment(uri);
      std::optional<std::string> target;  // its pointer
      const std::string frag = fragment.value_or("");
      const auto it = ambiguous_.count(resource) ? resources_.end() : resources_.find(resource);
      if (it != resources_.end()) {
        if (frag.empty()) {
          target = it->second;
        } else if (frag[0] == '/') {
          std::string rest;
          if (walk_pointer(*at(it->second), frag, rest)) target = it->second + rest;
        } else if (auto a = anchors_.find(resource + "#" + frag); a != anchors_.end() && !ambiguous_.count(a->first)) {
          target = a->second;
        }
      }
      if (!target) {
        ref = uri;
        index.written.emplace(uri, r);
        if (!uri.empty() && uri[0] == '#') index.unresolved.insert(frag);
        continue;
      }
      // A "#/..." pointer of the root resource already reads from the root.
      const bool as_written = !r.empty() && r[0] == '#' && (r.size() == 1 || r[1] == '/') && it->second.empty();
      if (as_written) {
        index.resolved.insert(percent_decode(std::string_view(r).substr(1)));
      } else {
        std::string escaped = "#";
        for (char c : *target) escaped += c == '%' ? std::string("%25") : std::string(1, c);
        ref = escaped;
        index.resolved.insert(*target);
      }
      // A target outside the schemas read so far (under a keyword the
      // converter does not know): its references resolve too.
      if (!bases_.count(*target)) walk(*at(*target), *target, base_at(*target), 0, false);
    }
    return index;
  }

 private:
  struct Site {
    Json* node;        // a schema with "$ref"
    std::string base;  // its base URI
  };

  // The node at a pointer known to exist.
  Json* at(const std::string& ptr) {
    std::string canonical;
    return const_cast<Json*>(walk_pointer(doc_, ptr, canonical));
  }

  // The base URI of the schema read nearest above `ptr`.
  std::string base_at(const std::string& ptr) const {
    for (size_t end = ptr.size();; end = ptr.rfind('/', end - 1)) {
      if (auto it = bases_.find(ptr.substr(0, end)); it != bases_.end()) return it->second;
      if (end == 0 || end == std::string::npos) return "";
    }
  }

  // An identifier two schemas declare names neither.
  void declare(std::map<std::string, std::string>& ids, const std::string& uri, const std::string& ptr) {
    const auto [it, fresh] = ids.emplace(uri, ptr);
    if (!fresh && it->second != ptr) ambiguous_.insert(uri);
  }

  // Reads the schema s at ptr under base URI `base`: its identifiers
  // (declared when `declare`), its $ref, and its subschemas.
  void walk(Json& s, const std::string& ptr, std::string base, size_t depth, bool declare_ids) {
    if (depth > max_depth_ || !s.is_object() || bases_.count(ptr)) return;
    if (!(dialect_.ref_hides_id && s.contains("$ref"))) {
      if (auto it = s.find(dialect_.id); it != s.end() && it->is_string()) {
        const std::string id = it->get<std::string>();
        const auto [resource, fragment] = split_fragment(resolve_uri(base, id));
        // An id whose URI is the base's own (draft 7's "http://e/x#name"
        // inside http://e/x) names no new resource.
        if (!id.empty() && id[0] != '#' && resource != base) {
          base = resource;
          if (declare_ids) declare(resources_, resource, ptr);
        }
        if (fragment && !fragment->empty() && dialect_.name_in_id && declare_ids)
          declare(anchors_, resource + "#" + *fragment, ptr);
      }
      for (const char* k : {"$anchor", "$dynamicAnchor"}) {
        const bool read = k[1] == 'a' ? dialect_.anchor : dialect_.dynamic_anchor;
        if (auto it = s.find(k); read && declare_ids && it != s.end() && it->is_string())
          declare(anchors_, base + "#" + it->get<std::string>(), ptr);
      }
    }
    bases_[ptr] = base;
    if (s.contains("$ref")) sites_.push_back({&s, base});
    for (const char* k : kSubschemaMaps) {
      if (auto it = s.find(k); it != s.end() && it->is_object())
        for (auto& [name, sub] : it->items())
          walk(sub, pointer_child(pointer_child(ptr, k), name), base, depth + 1, declare_ids);
    }
    for (const char* k : kSubschemaValues) {
      if (auto it = s.find(k); it != s.end()) walk(*it, pointer_child(ptr, k), base, depth + 1, declare_ids);
    }
    for (const char* k : kSubschemaArrays) {
      if (auto it = s.find(k); it != s.end() && it->is_array())
        for (size_t i = 0; i < it->size(); ++i)
          walk((*it)[i], pointer_child(ptr, k) + "/" + std::to_string(i), base, depth + 1, declare_ids);
    }
  }

  Json& doc_;
  const Dialect dialect_;
  const size_t max_depth_;
  std::map<std::string, std::string> resources_;  // a resource's URI (no fragment) -> its pointer
  std::map<std::string, std::string> anchors_;    // "URI#name" -> its pointer
  std::set<std::string> ambiguous_;               // identifiers declared by two schemas
  std::map<std::string, std::string> bases_;      // each schema read (pointer) -> its base URI
  std::vector<Site> sites_;                       // the schemas with $ref, in the order read
};

}  // namespace

std::string pointer_child(const std::string& ptr, std::string_view token) {
  std::string out = ptr + "/";
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string percent_decode(std::string_view fragment) {
  std::string out;
  for (size_t i = 0; i < fragment.size(); ++i) {
    const int h1 = i + 2 < fragment.size() && fragment[i] == '%' ? hex(fragment[i + 1]) : -1;
    const int h2 = h1 >= 0 ? hex(fragment[i + 2]) : -1;
    if (h1 >= 0 && h2 >= 0) {
      out += static_cast<char>(h1 * 16 + h2);
      i += 2;
    } else {
      out += fragment[i];
    }
  }
  return out;
}

const Json* walk_pointer(const Json& from, std::string_view pointer, std::string& canonical) {
  canonical.clear();
  if (!pointer.empty() && pointer[0] != '/') return nullptr;
  const Json* cur = &from;
  size_t pos = 0;
  while (pos < pointer.size()) {
    const size_t end = std::min(pointer.find('/', pos + 1), pointer.size());
    std::string token;
    for (size_t i = pos + 1; i < end; ++i) {
      if (pointer[i] == '~' && i + 1 < end && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
        token += pointer[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += pointer[i];
      }
    }
    pos = end;
    if (cur->is_object() && cur->contains(token)) {
      cur = &(*cur)[token];
      canonical = pointer_child(canonical, token);
    } else if (cur->is_array() && !token.empty() && token.size() < 10 &&
               token.find_first_not_of("0123456789") == std::string::npos && std::stoul(token) < cur->size()) {
      const size_t index = std::stoul(token);
      cur = &(*cur)[index];
      canonical += '/';
      canonical += std::to_string(index);
    } else {
      return nullptr;
    }
  }
  return cur;
}

std::string resolve_uri(std::string_view base_text, std::string_view ref_text) {
  const UriParts base = parse_uri(base_text), ref = parse_uri(ref_text);
  UriParts t;
  if (ref.scheme) {
    t = ref;
    t.path = remove_dot_segments(ref.path);
  } else {
    if (ref.authority) {
      t.authority = ref.authority;
      t.path = remove_dot_segments(ref.path);
      t.query = ref.query;
    } else {
      if (ref.path.empty()) {
        t.path = base.path;
        t.query = ref.query ? ref.query : base.query;
      } else {
        if (ref.path[0] == '/') {
          t.path = remove_dot_segments(ref.path);
        } else if (base.authority && base.path.empty()) {  // section 5.2.3, merge
          t.path = remove_dot_segments("/" + ref.path);
        } else {
          const size_t slash = base.path.rfind('/');
          t.path = remove_dot_segments((slash == std::string::npos ? "" : base.path.substr(0, slash + 1)) + ref.path);
        }
        t.query = ref.query;
      }
      t.authority = base.authority;
    }
    t.scheme = base.scheme;
  }
  t.fragment = ref.fragment;
  return compose(t);
}

RefIndex resolve_refs(Json& doc, size_t max_depth) { return RefResolver(doc, max_depth).run(); }

}  // namespace synapse::grammar::schema
