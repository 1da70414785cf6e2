// One client connection of `synapse serve`, served by synapse rather than by
// cpp-httplib's own loop, for what that loop does not give: the socket of the
// request being handled (to see a client hang up while its reply is computed;
// cpp-httplib 0.11 has no is_connection_closed), a bound on the size and the
// arrival time of a request's header, and an idle wait that stops with the
// server.
//
// This file and connection.cpp are the only code that touches cpp-httplib's
// internals (a private virtual and protected members of httplib::Server), so
// the library's release is pinned in CMakeLists.txt (0.11.4, Debian 12's) and
// checked by a static_assert and the test HttpLibrary.* (docs/SERVING.md).
//
// httplib::Server::process_and_close_socket is virtual; Listener overrides it
// with serve_connection's keep-alive loop, which hands each request to the
// library's own parser and router (Server::process_request) through a
// Connection, the httplib::Stream below. Handlers then reach their connection
// through current_connection() (thread-local: a request is parsed, routed,
// handled and its reply written on the thread that serves its connection).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include <httplib.h>

#include "server/defaults.hpp"

namespace synapse::server {

struct ConnectionLimits {
  size_t max_header_bytes = defaults::kMaxHeaderBytes;  // --max-header-size: request line and headers together
  int idle_timeout_s = defaults::kIdleTimeoutS;  // --idle-timeout: a keep-alive connection with no request this
                                    // long is closed, and a request's header must arrive in full
                                    // within this long of its first byte
};

// Why a connection refused its current request's header (the reply's status).
enum class HeaderRefusal { none, too_large /* 431 */, too_slow /* 408 */ };

// A buffered httplib::Stream over one accepted socket (as cpp-httplib's
// SocketStream: reads wait at most the read timeout, writes the write timeout
// and fail once the peer has hung up), that also counts the bytes of each
// request's header: past max_header_bytes, or past the header deadline, read()
// fails (the library then answers 400, which the server's error handler turns
// into header_refusal()'s status) and the connection is closed after the reply.
// Not thread-safe: used by the thread serving the connection (peer_hung_up
// and socket() excepted, which only query the socket).
class Connection : public httplib::Stream {
 public:
  Connection(int sock, std::chrono::microseconds read_timeout, std::chrono::microseconds write_timeout,
             const ConnectionLimits& limits);

  // Waits for the next request's first byte: true when there is one (maybe
  // already buffered), false on EOF, an error, `idle` elapsed, or `stopping`()
  // turning true (checked every 100 ms). Starts that request's header count.
  bool wait_request(const std::function<bool()>& stopping);

  HeaderRefusal header_refusal() const { return refusal_; }

  // True when the client has closed its end (EOF or error on the socket:
  // POLLRDHUP/POLLHUP/POLLERR), without consuming buffered or pipelined bytes.
  bool peer_hung_up() const;

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return sock_; }

 private:
  bool poll_readable(int timeout_ms) const;  // buffered bytes, or the socket within timeout_ms
  void begin_request();

  int sock_;
  std::chrono::microseconds read_timeout_, write_timeout_;
  ConnectionLimits limits_;
  std::vector<char> buf_;
  size_t off_ = 0, len_ = 0;  // unread bytes are buf_[off_, len_)
  // The current request's header: bytes handed out, the tail of the
  // terminator matched so far ("\r\n\r\n"), and its deadline.
  bool in_header_ = false;
  size_t header_bytes_ = 0;
  int header_match_ = 0;
  std::chrono::steady_clock::time_point header_deadline_;
  HeaderRefusal refusal_ = HeaderRefusal::none;
};

// The connection whose request the calling thread is handling (nullptr off
// a connection thread, e.g. in unit tests).
Connection* current_connection();

// Blocks until `event_fd` (an eventfd) is readable, then drains it (true), or
// until the peer of `sock` hangs up (false, without draining). sock < 0:
// waits for the event only.
bool wait_event_or_hangup(int sock, int event_fd);

// cpp-httplib's server with its accept backlog raised and its connection loop
// replaced by serve_connection's (see the top of this file).
class Listener : public httplib::Server {
 public:
  ConnectionLimits limits;  // set before listening

  // Closes the listening socket when it was bound but never listened on (a
  // later address of --host failed to bind); the library leaves it open.
  ~Listener() override;

  // The library listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG,
  // compiled into Debian's .so): 16 clients connecting at once would have
  // their SYNs dropped and retried a second later. listen() again raises it.
  void raise_backlog(int n);

  // Shuts (SHUT_RDWR) the socket of every connection being served: its
  // reads and writes fail from now on, so its thread ends. Thread-safe.
  void close_connections();

 private:
  bool process_and_close_socket(int sock) override;

  std::mutex open_mu_;
  std::unordered_set<int> open_;  // sockets being served (removed before they are closed)
};

// One Listener's share of a connection pool that several Listeners use
// (`--host A,B`: --threads-http counts the connections of every address
// together, as llama-server's one pool does). cpp-httplib gives each Server
// its own task queue and shuts it down when that server stops listening: this
// queue's shutdown() waits for the connections it handed to the pool (the
// pool keeps running for the other listeners; its owner shuts it down).
// Thread-safe.
class PoolShare : public httplib::TaskQueue {
 public:
  explicit PoolShare(httplib::TaskQueue& pool) : pool_(pool) {}
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  httplib::TaskQueue& pool_;
  std::mutex mu_;
  std::condition_variable done_;
  size_t pending_ = 0;  // connections enqueued and not yet ended
};

// --host's addresses, as llama-server reads them: a comma-separated list,
// each stripped of white space, empty entries dropped (split_stripped). Throws
// Error(invalid_argument) "--host requires at least one address" when none is
// left.
std::vector<std::string> host_addresses(const std::string& host);

}  // namespace synapse::server
