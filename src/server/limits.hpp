// What `synapse serve` refuses or bounds beyond the fields of a request
// (issue 27): cross-origin access. (The per-request wall-clock limit is
// Request::deadline, which the Scheduler checks.)
// The field checks live in server/request.hpp, the queue bound in the
// Scheduler (SchedulerParams::max_queue).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace synapse::server {

// True when a browser page of `origin` may read replies: `origin` is one of
// `allowed` (exact, scheme://host[:port] as the Origin header spells it),
// `allowed` holds "*", or `allowed` holds "localhost" and `origin` is an
// http(s) URL whose host is localhost, 127.0.0.1 or ::1, any port
// (llama-server's --cors-origins localhost, origin_is_localhost in
// tools/server/server-http.cpp, with common_http_parse_url's reading of the
// URL). Empty `allowed` or empty `origin`: false. Thread-safe (pure).
bool cors_origin_allowed(const std::vector<std::string>& allowed, std::string_view origin);

// Adds the CORS reply headers for an allowed Origin (the origin itself, never
// "*" echoed with credentials: Access-Control-Allow-Credentials is never
// sent, so a browser never attaches cookies or HTTP auth it holds for the
// host). Returns true when `req` is a preflight (OPTIONS) that is now fully
// answered (204), so it must not reach authentication (browsers send no
// key on a preflight). Does nothing for a request without an allowed Origin.
bool apply_cors(const std::vector<std::string>& allowed, const httplib::Request& req, httplib::Response& res);

}  // namespace synapse::server
