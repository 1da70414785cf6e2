#include "server/limits.hpp"

#include <algorithm>

#include <httplib.h>

namespace synapse::server {

bool cors_origin_allowed(const std::vector<std::string>& allowed, std::string_view origin) {
  if (origin.empty()) return false;
  return std::any_of(allowed.begin(), allowed.end(),
                     [&](const std::string& a) { return a == "*" || a == origin; });
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
