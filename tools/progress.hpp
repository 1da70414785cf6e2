// Progress of long work (model load, quantize, perplexity, synth) on a
// terminal: one line on stderr, rewritten in place and cleared when done.
// When stderr is not a terminal (a pipe, a file, a test) nothing is printed,
// so logs and captured output stay as they were.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "synapse/synapse.hpp"

namespace synapse::tools {

inline bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

// Wall-clock seconds from t0 to now (steady clock): the tools' timings.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "[ 12/201]  6% what detail", redrawn at most 10 times a second.
class Progress {
 public:
  Progress(std::string what, int64_t total) : what_(std::move(what)), total_(total), active_(stderr_is_terminal()) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { clear(); }

  bool active() const { return active_; }

  void update(int64_t done, const std::string& detail = "") {
    if (!active_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double pct = total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 0.0;
    std::string line = what_ + ": " + std::to_string(done) + "/" + std::to_string(total_) + " (" +
                       std::to_string(static_cast<int>(pct)) + "%)";
    if (!detail.empty()) line += " " + detail;
    if (line.size() > 100) line.resize(100);
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  // update() for work in chunks of n_ctx tokens (perplexity, imatrix):
  // "chunks, X t/s, ETA Y minutes" after `done` chunks and `elapsed` seconds.
  void update_chunks(int64_t done, int64_t n_ctx, double elapsed) {
    if (!active_ || done <= 0) return;
    char detail[96];
    std::snprintf(detail, sizeof detail, "chunks, %.1f t/s, ETA %.2f minutes",
                  static_cast<double>(done * n_ctx) / elapsed,
                  elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) / 60.0);
    update(done, detail);
  }

  // Erases the line (the next output starts on a clean line).
  void clear() {
    if (!drawn_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  std::string what_;
  int64_t total_;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// While alive, on a terminal: "what... 3s", the seconds ticking, on stderr;
// the line is erased at the end. For work that reports no steps.
class Ticker {
 public:
  explicit Ticker(std::string what) : what_(std::move(what)) {
    if (!stderr_is_terminal()) return;
    thread_ = std::thread([this] {
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_lock<std::mutex> lock(mu_);
      // The first draw waits half a second: quick work leaves no trace.
      while (!cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stop_; })) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "\r\033[K%s... %.0fs", what_.c_str(), s);
        std::fflush(stderr);
        drawn_ = true;
      }
    });
  }
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;
  ~Ticker() { stop(); }

  // Ends the line now (before printing something else).
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (drawn_) {
      std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
    }
  }

 private:
  std::string what_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool drawn_ = false;
};

// Model::load with a ticking "loading PATH (size)" line on a terminal.
inline Model load_model(const std::string& path) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  char size[32] = "";
  if (!ec) std::snprintf(size, sizeof size, " (%.2f GiB)", static_cast<double>(bytes) / (1u << 30));
  Ticker t("synapse: loading " + path + size);
  return Model::load(path);
}

}  // namespace synapse::tools
