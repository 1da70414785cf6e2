// The defaults of `synapse serve`, each defined once, here: ServerParams'
// fields take them, the command line's parser and its --help text print them
// (tools/cmd_serve.cpp), /props reports the values they give, and
// docs/SERVING.md's table of them is checked against --help
// (tests/server/defaults_test.py). The engine's own defaults (-b, -ub, the
// sampler's) are SchedulerParams' and SamplerParams' member initializers
// (synapse/scheduler.hpp, synapse/sampling.hpp), printed the same way.
#pragma once

#include <algorithm>
#include <cstddef>

namespace synapse::server::defaults {

inline constexpr const char* kHost = "127.0.0.1";  // --host: loopback unless asked otherwise
inline constexpr int kPort = 8080;                 // --port (llama-server's)
inline constexpr int kTimeoutS = 600;              // --timeout (llama-server's -to)
inline constexpr int kIdleTimeoutS = 5;            // --idle-timeout
inline constexpr int kShutdownTimeoutS = 5;        // --shutdown-timeout
inline constexpr size_t kMaxHeaderBytes = 16384;   // --max-header-size
inline constexpr size_t kMaxBodyBytes = 8u << 20;  // request bodies (413 above)
inline constexpr size_t kMaxQueue = 64;            // --max-queue: requests waiting for a slot before 503
inline constexpr int kEmbdNormalize = 2;           // --embd-normalize (llama-server's: Euclidean)

// --threads-http's default: every open connection (a streaming reply
// included) holds one HTTP thread, so 4 per slot plus 16 for the short
// routes (/health, /metrics, /tokenize ...), and never fewer than 32.
constexpr int http_threads(int n_parallel) { return std::max(32, 4 * n_parallel + 16); }

}  // namespace synapse::server::defaults
