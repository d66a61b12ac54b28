// Shared by the benchmark programs (hutch_bench, hutch_load): summary
// statistics, small process helpers, and a hutchd started on port 0 with a
// temp state dir.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "client/http_client.h"

namespace hutch::bench {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0);

struct Stats {
  size_t runs = 0;
  double p50 = 0, p99 = 0, min = 0, max = 0;
};

// Percentile with linear interpolation between closest ranks (numpy's
// default). At N=50, p99 lies between the two slowest runs.
double Percentile(const std::vector<double>& sorted, double p);
Stats Summarize(std::vector<double> v);

// Runs argv with stdout/stderr to /dev/null; returns the wait status, or -1
// when it could not be spawned.
int RunQuiet(const std::vector<std::string>& args);
inline bool Ok(int st) { return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0; }

// One kB-valued field of /proc/<pid>/status, in bytes (0 if absent).
uint64_t ProcStatusBytes(pid_t pid, const std::string& field);
// Open file descriptors of a process.
size_t OpenFdCount(pid_t pid);
// Resets VmHWM to the current RSS (Linux >= 4.0, needs ptrace rights over
// the process: we started it). Returns false when the kernel refused.
bool ResetPeakRss(pid_t pid);
std::string Env(const char* name, const std::string& def);

class Hutchd {
 public:
  Hutchd(std::string bin, std::string templates, std::vector<std::string> extra_args = {})
      : bin_(std::move(bin)), templates_(std::move(templates)), extra_(std::move(extra_args)) {}
  ~Hutchd() { Stop(); }
  Hutchd(const Hutchd&) = delete;
  Hutchd& operator=(const Hutchd&) = delete;

  // Throws std::runtime_error when it does not come up.
  void Start();
  void Stop();
  std::string Log() const;
  hutch::client::HttpClient Client() const {
    return hutch::client::HttpClient("127.0.0.1", port_, key_);
  }
  pid_t pid() const { return pid_; }
  // Start hutchd as a user would, with its own per-key rate limit (by
  // default the bench turns it off: it measures the server, not the limit).
  void KeepRateLimit() { keep_rate_limit_ = true; }

 private:
  std::string bin_, templates_, dir_;
  std::vector<std::string> extra_;
  bool keep_rate_limit_ = false;
  std::string key_ = "bench-key-0123456789";
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace hutch::bench
