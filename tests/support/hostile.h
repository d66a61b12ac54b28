// Helpers of the hostile-workload suites (tests/security, tests/faults and
// the isolation tests): commands left running inside a sandbox, hutchd's
// resource use sampled while a test pushes on it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/test_server.h"

namespace hutch::testing {

// stdout / stderr of a TestServer::Exec answer ("" when absent; the
// exact bytes of its stdout_b64 / stderr_b64 when the output was not text).
std::string StdoutOf(const nlohmann::json& r);
std::string StderrOf(const nlohmann::json& r);

// Starts `cmd` in the background inside the sandbox (nohup, detached
// exec); it outlives the exec. The answer has "_status".
nlohmann::json StartDetached(const TestServer& s, const std::string& id, const std::string& cmd);

// n random lower-case hex digits.
std::string RandomHex(size_t n);

// A plain TCP connection to hutchd on 127.0.0.1 (-1 on failure), for
// requests the HttpClient cannot abandon half-way or must hold by the
// thousand.
int RawConnect(int port);

// Open file descriptors of a host process (entries of /proc/<pid>/fd).
size_t FdCount(pid_t pid);

// Samples hutchd's RSS every 50 ms until stopped or destroyed; keeps the
// maximum.
class RssWatch {
 public:
  explicit RssWatch(const TestServer& s);
  ~RssWatch();
  RssWatch(const RssWatch&) = delete;
  RssWatch& operator=(const RssWatch&) = delete;
  void Stop();
  size_t max() const { return max_; }
  int samples() const { return samples_; }

 private:
  const TestServer& s_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> max_{0};
  std::atomic<int> samples_{0};
  std::thread t_;
};

}  // namespace hutch::testing
