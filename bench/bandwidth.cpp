// bench_bandwidth [--mib N] [--threads 1,2] [--passes N] [--json]
// Measures the machine's memory read bandwidth (see bandwidth.hpp): the sum
// over a buffer of N MiB (default 1024), best of N passes (default 5), for
// each thread count (default 1 and 2). Prints one line per thread count, or
// a JSON object {"mib":..,"passes":..,"results":[{"threads":1,"gbps":..},..]}.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bandwidth.hpp"

namespace {

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "bench_bandwidth: %s\nusage: bench_bandwidth [--mib N] [--threads 1,2] [--passes N] [--json]\n",
               msg);
  std::exit(2);
}

long parse_positive(const char* s, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 1 || v > (1L << 20)) usage((std::string("bad ") + what + ": " + s).c_str());
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  long mib = 1024, passes = 5;
  std::vector<int> threads = {1, 2};
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((std::string(a) + " needs a value").c_str());
      return argv[++i];
    };
    if (!std::strcmp(a, "--mib")) {
      mib = parse_positive(value(), "--mib");
    } else if (!std::strcmp(a, "--passes")) {
      passes = parse_positive(value(), "--passes");
    } else if (!std::strcmp(a, "--threads")) {
      threads.clear();
      std::string list = value();
      size_t pos = 0;
      while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        const std::string item = list.substr(pos, comma - pos);
        threads.push_back(static_cast<int>(parse_positive(item.c_str(), "--threads")));
        pos = comma + 1;
      }
    } else if (!std::strcmp(a, "--json")) {
      json = true;
    } else {
      usage((std::string("unknown argument ") + a).c_str());
    }
  }
  const size_t bytes = static_cast<size_t>(mib) << 20;
  if (json) std::printf("{\"mib\": %ld, \"passes\": %ld, \"results\": [", mib, passes);
  for (size_t k = 0; k < threads.size(); ++k) {
    double gbps = 0;
    try {
      gbps = synapse::bench::read_bandwidth_gbps(threads[k], bytes, static_cast<int>(passes));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_bandwidth: %s\n", e.what());
      return 1;
    }
    if (json)
      std::printf("%s{\"threads\": %d, \"gbps\": %.2f}", k ? ", " : "", threads[k], gbps);
    else
      std::printf("read bandwidth, %ld MiB, best of %ld, %d thread%s: %.2f GB/s\n", mib, passes, threads[k],
                  threads[k] == 1 ? "" : "s", gbps);
    std::fflush(stdout);
  }
  if (json) std::printf("]}\n");
  return 0;
}
