// `synapse chat` in a pseudo-terminal, as a person uses it: two turns on the
// bundled model, and Ctrl-C stopping a reply without ending the session.
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "golden_util.hpp"

namespace synapse {
namespace {

class PtyProcess {
 public:
  explicit PtyProcess(const std::vector<std::string>& argv) {
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return pid_ > 0 && fd_ >= 0; }
  void send(const std::string& s) { ASSERT_EQ(write(fd_, s.data(), s.size()), static_cast<ssize_t>(s.size())); }
  // Reads until `needle` appears after position `from` of everything read, or
  // the timeout passes. Returns whether it appeared.
  bool wait_for(const std::string& needle, size_t from, double timeout_s = 30) {
    const auto t0 = std::chrono::steady_clock::now();
    while (screen_.find(needle, from) == std::string::npos) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) return false;
      fd_set set;
      FD_ZERO(&set);
      FD_SET(fd_, &set);
      timeval tv{0, 100000};
      if (select(fd_ + 1, &set, nullptr, nullptr, &tv) > 0) {
        char buf[4096];
        const ssize_t n = read(fd_, buf, sizeof buf);
        if (n <= 0) return screen_.find(needle, from) != std::string::npos;
        screen_.append(buf, static_cast<size_t>(n));
      }
    }
    return true;
  }
  int wait_exit() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  const std::string& screen() const { return screen_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string screen_;
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(ChatPty, AnswersTwoTurns) {
  PtyProcess p({SYNAPSE_BINARY, "chat", "-m", test::data_path("models/stories260K.gguf"), "-n", "24", "--temp", "0",
                "-t", "1", "--system-prompt", "You tell stories."});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.wait_for("> ", 0)) << p.screen();
  size_t mark = p.screen().size();
  p.send("Tell me about a cat.\n");
  // The reply streams, then the next prompt appears.
  ASSERT_TRUE(p.wait_for("\n> ", mark + 21)) << p.screen();
  const std::string first = p.screen().substr(mark);
  mark = p.screen().size();
  p.send("What did the cat do next?\n");
  ASSERT_TRUE(p.wait_for("\n> ", mark + 26)) << p.screen();
  const std::string second = p.screen().substr(mark);
  // Each turn printed a reply of some text between the echoed line and the prompt.
  EXPECT_GT(first.size(), std::string("Tell me about a cat.\r\n\r\n> ").size() + 5) << first;
  EXPECT_GT(second.size(), std::string("What did the cat do next?\r\n\r\n> ").size() + 5) << second;
  EXPECT_EQ(count(p.screen(), "> "), 3u) << p.screen();
  p.send("\x04");  // end of input: the session ends cleanly
  EXPECT_EQ(p.wait_exit(), 0);
}

TEST(ChatPty, CtrlCStopsAReplyAndKeepsTheSession) {
  PtyProcess p({SYNAPSE_BINARY, "chat", "-m", test::data_path("models/stories260K.gguf"), "--ignore-eos", "-c", "4096",
                "--temp", "0", "-t", "1"});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.wait_for("> ", 0)) << p.screen();
  size_t mark = p.screen().size();
  p.send("Once upon a time\n");
  // Wait until the reply is streaming, then interrupt it.
  ASSERT_TRUE(p.wait_for(" ", mark + 20)) << p.screen();
  p.send("\x03");
  ASSERT_TRUE(p.wait_for("[stopped]", mark)) << p.screen();
  ASSERT_TRUE(p.wait_for("\n> ", mark)) << p.screen();
  mark = p.screen().size();
  p.send("Hello\n");
  ASSERT_TRUE(p.wait_for(" ", mark + 8)) << p.screen();
  p.send("\x03");
  ASSERT_TRUE(p.wait_for("[stopped]", mark)) << p.screen();
  ASSERT_TRUE(p.wait_for("\n> ", mark)) << p.screen();
  p.send("\x03");  // Ctrl-C at the prompt ends the session
  EXPECT_EQ(p.wait_exit(), 130);
}

}  // namespace
}  // namespace synapse
