// The HTTP library's pin (docs/SERVING.md, "The HTTP library"): Listener
// (server/connection.hpp) is written against cpp-httplib 0.11.4's internals,
// so a build with another release fails here until the adapter has been
// checked against it and the pin in CMakeLists.txt moved.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include <httplib.h>

#include "server/connection.hpp"

namespace synapse::server {
namespace {

TEST(HttpLibrary, IsThePinnedRelease) {
  EXPECT_STREQ(CPPHTTPLIB_VERSION, "0.11.4");
  EXPECT_STREQ(SYNAPSE_CPP_HTTPLIB_VERSION, CPPHTTPLIB_VERSION);
}

// What the adapter relies on, in use: the library calls Listener's
// process_and_close_socket (so a handler sees its Connection), keep-alive
// requests go through it one after another, and close_connections ends a
// connection that is held open.
TEST(HttpLibrary, ListenerServesTheConnections) {
  Listener http;
  http.limits = ConnectionLimits{16384, 5};
  std::atomic<int> seen{0};
  http.Get("/c", [&](const httplib::Request&, httplib::Response& res) {
    const Connection* c = current_connection();
    if (c != nullptr && c->socket() >= 0) ++seen;
    res.set_content(c != nullptr ? "connection" : "none", "text/plain");
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  http.raise_backlog(64);
  std::thread t([&] { http.listen_after_bind(); });
  {
    httplib::Client cli("127.0.0.1", port);
    cli.set_keep_alive(true);
    for (int i = 0; i < 3; ++i) {
      const auto r = cli.Get("/c");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 200);
      EXPECT_EQ(r->body, "connection");
    }
  }
  EXPECT_EQ(seen.load(), 3);
  http.close_connections();
  http.stop();
  t.join();
}

}  // namespace
}  // namespace synapse::server
