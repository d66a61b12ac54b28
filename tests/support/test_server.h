// Starts the real hutchd for a test: port 0, a fresh temp state dir, the
// shared test templates dir, a known API key, no rate limit (unless the
// extra args set --rate-limit). Stops it (SIGTERM, then SIGKILL) and
// removes the state dir at the end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/http_client.h"

namespace hutch::testing {

// Claims a free index (0-255) among the test servers and test worlds
// running on the host, held by a lock file while `*lock_fd` stays open:
// the index names its owner's addresses (198.18.<index>.0/24 for a
// server's sandboxes, 198.19.<index>.0/24 for a NetWorld). -1: none free.
int ClaimNetIndex(int* lock_fd);

// The driver the test servers give sandboxes created without "driver":
// "jail", or "vm" when HUTCH_TEST_DRIVER=vm (the security suite's vm
// variants, ctest names security_vm_*, label slow). A suite reads it to
// decide what its boundary means: inside a VM the guest kernel is the
// sandbox's own, so the tests there prove the host is out of reach.
std::string TestDriver();
inline bool OnVm() { return TestDriver() == "vm"; }

class TestServer {
 public:
  // with_env_key=false: no HUTCH_API_KEY, so hutchd generates its own key
  // (then read back from the line it prints once).
  explicit TestServer(std::vector<std::string> extra_args = {}, bool with_env_key = true);
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& key() const { return key_; }
  const std::string& state_dir() const { return state_dir_; }
  client::HttpClient Client() const { return client::HttpClient("127.0.0.1", port_, key_); }

  // Creates a sandbox (fails the test on error) and returns its id.
  std::string CreateSandbox(const nlohmann::json& body = nlohmann::json::object());
  // Blocking exec of a shell command; returns the parsed JSON response
  // (with "_status" set to the HTTP status).
  nlohmann::json Exec(const std::string& id, const std::string& cmd, int timeout_seconds = 60);
  // Resident memory of hutchd, bytes.
  size_t RssBytes() const;
  // Waits (up to a minute) until the pools hutchd fills in the background
  // after a start are full (/metrics: hutch_disk_pool_ready reaches
  // hutch_disk_pool_target), so a baseline of its fds or disk use taken
  // next does not move on its own. False if they did not fill.
  bool WaitForPoolsFilled() const;
  // Sends SIGTERM and waits; returns the exit status.
  int Stop();
  // Crashes hutchd (SIGKILL) and reaps it; the state dir and every sandbox
  // it ran stay as they are.
  void Kill9();
  // Starts hutchd again on the same state dir (after Kill9 or Stop); the
  // new port is in port().
  void Restart();
  // Replaces the extra arguments the next Restart() passes.
  void SetArgs(std::vector<std::string> extra_args) { extra_args_ = std::move(extra_args); }
  // The log hutchd wrote so far (stdout+stderr).
  std::string Log() const;
  // This server's index among the test servers running on the host
  // (0-255, held by a lock file while it lives): its sandbox network pool
  // is 198.18.<index>.0/24, and a test may build its own hosts in
  // 198.19.<index>.0/24 without meeting another test's.
  int net_index() const { return net_index_; }
  std::string NetPool() const { return "198.18." + std::to_string(net_index_) + ".0/24"; }
  // The network of this index's NetWorld (allowed to its sandboxes).
  std::string WorldNet() const { return "198.19." + std::to_string(net_index_) + ".0/24"; }

 private:
  void Launch(bool append_log);
  std::vector<std::string> extra_args_;
  bool with_env_key_ = true;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string key_ = "test-key-0123456789";
  std::string state_dir_;
  std::string log_path_;
  bool keep_state_dir_ = false;  // HUTCH_TEST_KEEP_STATE_DIR
  int net_index_ = -1;
  int net_lock_fd_ = -1;
};

// hutchd's memory bound while it streams data many times its size: the
// contract's 150 MB in a release build. Under AddressSanitizer (shadow
// memory and allocator overhead make the absolute figure meaningless) the
// growth over the idle server is what must stay bounded.
inline bool RssWithinBound(size_t before, size_t peak) {
#if defined(__SANITIZE_ADDRESS__)
  return peak < before + (size_t{96} << 20);
#else
  (void)before;
  return peak < (size_t{150} << 20);
#endif
}

// Runs a shell command on the host; returns its stdout.
std::string HostSh(const std::string& cmd);
// Directory for test temp files.
std::string TempDir(const std::string& prefix);
// A loopback TCP port free now (the kernel's pick), for a helper process
// the test starts right after (etcd, a registry); 0 when none was found.
int FreeLoopbackPort();
// A new file /tmp/<prefix>-XXXXXX holding `text` (a keys file, a config);
// its path, or "" when it could not be made. The caller removes it.
std::string WriteTempFile(const std::string& prefix, const std::string& text);
// Polls `cond` every `step` until it holds or `limit` passes; its last
// answer. For state the server reaches in the background (an exit seen,
// a stream caught up), never for timing.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit,
             std::chrono::milliseconds step = std::chrono::milliseconds(20));

}  // namespace hutch::testing
