// Running the built `synapse` binary from tests, as a user does: stdout and
// stderr captured apart, the exit code decoded.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

namespace synapse::test {

struct CliResult {
  int exit_code;  // -1 when the process did not exit normally
  std::string out, err;
};

// A per-process temporary file name (ctest runs tests as parallel processes).
inline std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "synapse_test_" + std::to_string(::getpid()) + "_" + name;
}

// The SHA-256 of a file (coreutils' sha256sum), "" if it cannot be read.
inline std::string sha256_of(const std::string& path) {
  FILE* p = ::popen(("sha256sum '" + path + "' 2>/dev/null").c_str(), "r");
  if (p == nullptr) return "";
  char buf[65] = {};
  const size_t n = std::fread(buf, 1, 64, p);
  ::pclose(p);
  return n == 64 ? std::string(buf, 64) : "";
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void spit(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::binary);
  f << s;
}

// Runs `synapse ARGS` through the shell (ARGS is shell text: quote as needed),
// with the environment assignments `env` ("NAME=value ...") before it.
inline CliResult synapse_cli(const std::string& args, const std::string& env = "") {
  const std::string out = tmp_path("stdout"), err = tmp_path("stderr");
  const std::string cmd = env + (env.empty() ? "" : " ") + std::string(SYNAPSE_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  CliResult r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

}  // namespace synapse::test
