// `synapse chat` in a pseudo-terminal, as a person uses it: two turns on the
// bundled model, Ctrl-C stopping a reply without ending the session,
// llama-cli's /regen, /clear and /exit, and a full context that does not end
// the session.
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

// The text the terminal showed between `from` and the next prompt, less the
// echoed input line.
std::string reply_after(const std::string& screen, size_t from, const std::string& input) {
  const size_t start = screen.find(input + "\r\n", from);
  if (start == std::string::npos) return "<no echo>";
  const size_t body = start + input.size() + 2;
  const size_t end = screen.find("\r\n> ", body);
  return end == std::string::npos ? "<no prompt>" : screen.substr(body, end - body);
}

// Strips stderr's lines ("synapse: ...", "[ Prompt: ... ]") that share the terminal.
std::string stdout_only(std::string s) {
  for (const char* tag : {"[ Prompt:", "synapse:"}) {
    for (size_t at; (at = s.find(tag)) != std::string::npos;) {
      const size_t nl = s.find("\r\n", at);
      s.erase(at, (nl == std::string::npos ? s.size() : nl + 2) - at);
    }
  }
  return s;
}

TEST(ChatPty, RegenClearAndExitAsLlamaCli) {
  PtyProcess p({SYNAPSE_BINARY, "chat", "-m", test::data_path("models/stories260K.gguf"), "-n", "12", "--temp", "0",
                "-t", "1"});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.wait_for("> ", 0)) << p.screen();
  // The loading line, then the commands.
  EXPECT_NE(p.screen().find("synapse: loading "), std::string::npos) << p.screen();
  EXPECT_NE(p.screen().find("/regen"), std::string::npos) << p.screen();
  size_t mark = p.screen().size();
  p.send("Tell me about a cat.\n");
  ASSERT_TRUE(p.wait_for("\r\n> ", mark + 21)) << p.screen();
  ASSERT_TRUE(p.wait_for("[ Prompt: ", mark)) << p.screen();  // llama-cli's timings, on by default
  const std::string first = stdout_only(reply_after(p.screen(), mark, "Tell me about a cat."));
  EXPECT_GT(first.size(), 3u) << p.screen();
  // /regen answers the same message again: greedy, the same reply.
  mark = p.screen().size();
  p.send("/regen\n");
  ASSERT_TRUE(p.wait_for("\r\n> ", mark + 7)) << p.screen();
  EXPECT_EQ(stdout_only(reply_after(p.screen(), mark, "/regen")), first);
  // /clear starts over: the first message gets the first reply again.
  mark = p.screen().size();
  p.send("/clear\n");
  ASSERT_TRUE(p.wait_for("chat history cleared", mark)) << p.screen();
  ASSERT_TRUE(p.wait_for("> ", mark + 7)) << p.screen();
  mark = p.screen().size();
  p.send("Tell me about a cat.\n");
  ASSERT_TRUE(p.wait_for("\r\n> ", mark + 21)) << p.screen();
  EXPECT_EQ(stdout_only(reply_after(p.screen(), mark, "Tell me about a cat.")), first);
  p.send("/exit\n");
  EXPECT_EQ(p.wait_exit(), 0);
}

TEST(ChatPty, AFullContextKeepsTheSession) {
  PtyProcess p({SYNAPSE_BINARY, "chat", "-m", test::data_path("models/stories260K.gguf"), "-c", "64", "--ignore-eos",
                "--temp", "0", "-t", "1", "--no-show-timings"});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.wait_for("> ", 0)) << p.screen();
  size_t mark = p.screen().size();
  p.send("Once upon a time\n");
  // The reply runs into the end of the context: cut, and the session goes on.
  ASSERT_TRUE(p.wait_for("is full: the reply was cut", mark)) << p.screen();
  ASSERT_TRUE(p.wait_for("\r\n> ", mark + 17)) << p.screen();
  // A message that does not fit beside the conversation is refused; the session goes on.
  mark = p.screen().size();
  p.send("And then?\n");
  ASSERT_TRUE(p.wait_for("exceeds the context of 64 tokens", mark)) << p.screen();
  ASSERT_TRUE(p.wait_for("> ", mark + 10)) << p.screen();
  // /clear frees it.
  mark = p.screen().size();
  p.send("/clear\n");
  ASSERT_TRUE(p.wait_for("> ", mark + 7)) << p.screen();
  mark = p.screen().size();
  p.send("Hi\n");
  ASSERT_TRUE(p.wait_for("\r\n> ", mark + 3)) << p.screen();
  EXPECT_EQ(p.screen().find("exceeds", mark), std::string::npos) << p.screen();
  p.send("\x04");
  EXPECT_EQ(p.wait_exit(), 0);
}

TEST(ChatPty, ContextShiftDropsTheOldestExchange) {
  PtyProcess p({SYNAPSE_BINARY, "chat", "-m", test::data_path("models/stories260K.gguf"), "-c", "64", "-n", "20",
                "--ignore-eos", "--temp", "0", "-t", "1", "--no-show-timings", "--context-shift"});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p.wait_for("> ", 0)) << p.screen();
  size_t mark = p.screen().size();
  p.send("Once upon a time\n");
  ASSERT_TRUE(p.wait_for("\r\n> ", mark + 17)) << p.screen();
  mark = p.screen().size();
  p.send("And then?\n");
  ASSERT_TRUE(p.wait_for("dropped the oldest exchange", mark)) << p.screen();
  ASSERT_TRUE(p.wait_for("\r\n> ", mark + 10)) << p.screen();
  EXPECT_EQ(p.screen().find("exceeds", mark), std::string::npos) << p.screen();
  p.send("\x04");
  EXPECT_EQ(p.wait_exit(), 0);
}

}  // namespace
}  // namespace synapse
