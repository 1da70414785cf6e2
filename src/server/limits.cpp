#include "server/limits.hpp"

#include <algorithm>

#include <httplib.h>

namespace synapse::server {

namespace {

// llama-server's origin_is_localhost: common_http_parse_url's host of
// `origin` (scheme http or https; user info, path and port cut off; a
// bracketed IPv6 literal without its brackets) is localhost, 127.0.0.1 or
// ::1. A port must start with a digit (std::stoi's test).
bool origin_is_localhost(std::string_view origin) {
  const size_t scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return false;
  const std::string_view scheme = origin.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return false;
  std::string_view host = origin.substr(scheme_end + 3);
  if (const size_t at = host.find('@'); at != std::string_view::npos) host.remove_prefix(at + 1);
  if (const size_t slash = host.find('/'); slash != std::string_view::npos) host = host.substr(0, slash);
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    if (close + 1 < host.size() && host[close + 1] == ':') port = host.substr(close + 2);
    host = host.substr(1, close - 1);
  } else if (const size_t colon = host.find(':'); colon != std::string_view::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (!port.empty() && !(port[0] >= '0' && port[0] <= '9')) return false;
  return host == "localhost" || host == "127.0.0.1" || host == "::1";
}

}  // namespace

bool cors_origin_allowed(const std::vector<std::string>& allowed, std::string_view origin) {
  if (origin.empty()) return false;
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
    return a == "*" || (a == "localhost" ? origin_is_localhost(origin) : a == origin);
  });
}

bool apply_cors(const std::vector<std::string>& allowed, const httplib::Request& req, httplib::Response& res) {
  const std::string origin = req.get_header_value("Origin");
  if (!cors_origin_allowed(allowed, origin)) return false;
  // The origin itself (also for "*"), so that caches keep one reply per origin.
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Vary", "Origin");
  if (req.method != "OPTIONS") return false;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  // X-Session-Id: the affinity key of the balancer in front of replicas
  // (deploy/nginx/synapse.conf), which a browser page may send too.
  res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, X-Session-Id");
  res.set_header("Access-Control-Max-Age", "600");
  res.status = 204;
  return true;
}

}  // namespace synapse::server
