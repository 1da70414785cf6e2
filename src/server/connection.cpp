#include "server/connection.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string_view>

#include "base/strings.hpp"
#include "synapse/error.hpp"

// The header is the release CMake pinned (SYNAPSE_CPP_HTTPLIB_VERSION): Listener
// below relies on its internals (connection.hpp, docs/SERVING.md).
static_assert(std::string_view(CPPHTTPLIB_VERSION) == SYNAPSE_CPP_HTTPLIB_VERSION,
              "cpp-httplib's header is not the release CMakeLists.txt pins");

namespace synapse::server {

namespace {

thread_local Connection* tl_connection = nullptr;

constexpr size_t kReadBuffer = 4096;  // as cpp-httplib's SocketStream: its line reader reads byte by byte

int to_ms(std::chrono::microseconds t) {
  return static_cast<int>(std::min<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(t).count(),
                                            INT32_MAX));
}

// poll() of one descriptor, retried on EINTR; the revents (0 on timeout or error).
short poll_one(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int n;
  do {
    n = ::poll(&p, 1, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0 ? p.revents : 0;
}

void ip_and_port(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(serv);
}

}  // namespace

Connection::Connection(int sock, std::chrono::microseconds read_timeout, std::chrono::microseconds write_timeout,
                       const ConnectionLimits& limits)
    : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout), limits_(limits), buf_(kReadBuffer) {}

bool Connection::poll_readable(int timeout_ms) const {
  return off_ < len_ || (poll_one(sock_, POLLIN, timeout_ms) & (POLLIN | POLLHUP | POLLERR)) != 0;
}

bool Connection::wait_request(const std::function<bool()>& stopping) {
  using namespace std::chrono;
  const auto idle_end = steady_clock::now() + seconds(limits_.idle_timeout_s);
  for (;;) {
    if (stopping()) return false;
    const auto left = duration_cast<milliseconds>(idle_end - steady_clock::now()).count();
    if (left <= 0) return false;
    if (poll_readable(static_cast<int>(std::min<int64_t>(left, 100)))) break;
  }
  if (off_ == len_) {  // readable: a first byte, or EOF / an error (then no request)
    char c;
    if (::recv(sock_, &c, 1, MSG_PEEK) <= 0) return false;
  }
  begin_request();
  return true;
}

void Connection::begin_request() {
  in_header_ = true;
  header_bytes_ = 0;
  header_match_ = 0;
  header_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(limits_.idle_timeout_s);
}

bool Connection::peer_hung_up() const {
  return (poll_one(sock_, POLLRDHUP, 0) & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool Connection::is_readable() const { return poll_readable(to_ms(read_timeout_)); }

bool Connection::is_writable() const {
  return (poll_one(sock_, POLLOUT, to_ms(write_timeout_)) & POLLOUT) != 0 && !peer_hung_up();
}

ssize_t Connection::read(char* ptr, size_t size) {
  if (refusal_ != HeaderRefusal::none) return -1;
  if (off_ == len_) {
    int timeout_ms = to_ms(read_timeout_);
    if (in_header_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(header_deadline_ -
                                                                             std::chrono::steady_clock::now());
      timeout_ms = std::min<int>(timeout_ms, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    }
    if (!poll_readable(timeout_ms)) {
      if (in_header_) refusal_ = HeaderRefusal::too_slow;
      return -1;
    }
    ssize_t n;
    do {
      n = ::recv(sock_, buf_.data(), buf_.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    off_ = 0;
    len_ = static_cast<size_t>(n);
  }
  size_t n = std::min(size, len_ - off_);
  if (in_header_) {
    // Hand out the header up to its blank line at most, counting it.
    static constexpr char kEnd[] = "\r\n\r\n";
    size_t k = 0;
    while (k < n && in_header_) {
      const char c = buf_[off_ + k++];
      header_match_ = c == kEnd[header_match_] ? header_match_ + 1 : (c == '\r' ? 1 : 0);
      if (header_match_ == 4) in_header_ = false;
    }
    n = k;
    header_bytes_ += n;
    if (in_header_ && header_bytes_ > limits_.max_header_bytes) {
      refusal_ = HeaderRefusal::too_large;
      return -1;
    }
  }
  std::memcpy(ptr, buf_.data() + off_, n);
  off_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t Connection::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  ssize_t n;
  do {
    n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void Connection::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
}

void Connection::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) ip_and_port(addr, len, ip, port);
}

Connection* current_connection() { return tl_connection; }

bool wait_event_or_hangup(int sock, int event_fd) {
  pollfd p[2] = {{event_fd, POLLIN, 0}, {sock, POLLRDHUP, 0}};
  for (;;) {
    const int n = ::poll(p, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;  // cannot wait: let the caller look at its events
    if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) return false;
    if (p[0].revents & POLLIN) {
      eventfd_t v;
      (void)eventfd_read(event_fd, &v);
      return true;
    }
  }
}

Listener::~Listener() {
  if (svr_sock_ != INVALID_SOCKET) ::close(svr_sock_);
}

void Listener::raise_backlog(int n) { ::listen(svr_sock_, n); }

void Listener::close_connections() {
  std::lock_guard<std::mutex> lock(open_mu_);
  for (const int sock : open_) ::shutdown(sock, SHUT_RDWR);
}

// cpp-httplib's own loop (detail::process_server_socket) with a Connection in
// place of its SocketStream: at most keep_alive_max_count_ requests, each after
// a wait of at most the idle timeout, until the server stops.
bool Listener::process_and_close_socket(int sock) {
  Connection conn(sock,
                  std::chrono::seconds(read_timeout_sec_) + std::chrono::microseconds(read_timeout_usec_),
                  std::chrono::seconds(write_timeout_sec_) + std::chrono::microseconds(write_timeout_usec_), limits);
  tl_connection = &conn;
  {
    std::lock_guard<std::mutex> lock(open_mu_);
    open_.insert(sock);
  }
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    if (!conn.wait_request([this] { return svr_sock_ == INVALID_SOCKET; })) break;
    bool closed = false;
    ok = process_request(conn, left == 1, closed, nullptr);
    if (!ok || closed || conn.header_refusal() != HeaderRefusal::none) break;
  }
  tl_connection = nullptr;
  {
    std::lock_guard<std::mutex> lock(open_mu_);
    open_.erase(sock);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

void PoolShare::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
  }
  pool_.enqueue([this, fn = std::move(fn)] {
    fn();
    // Notified under the lock: shutdown() cannot return (and this queue be
    // destroyed) before the notification is over.
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_.notify_all();
  });
}

void PoolShare::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
}

std::vector<std::string> host_addresses(const std::string& host) {
  std::vector<std::string> out = split_stripped(host, ',');
  if (out.empty()) throw Error(Errc::invalid_argument, "--host requires at least one address");
  return out;
}

}  // namespace synapse::server
