#include "tests/support/test_server.h"

#include "tests/support/exposition.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace hutch::testing {

namespace fs = std::filesystem;

std::string TempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return "";
  return buf.data();
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string WriteTempFile(const std::string& prefix, const std::string& text) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  if (fd < 0) return "";
  close(fd);
  std::ofstream(buf.data()) << text;
  return buf.data();
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit,
             std::chrono::milliseconds step) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(step);
  }
  return cond();
}

std::string HostSh(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char b[4096];
  size_t n;
  while ((n = fread(b, 1, sizeof b, f)) > 0) out.append(b, n);
  pclose(f);
  return out;
}

std::string TestDriver() {
  const char* d = getenv("HUTCH_TEST_DRIVER");
  return d && std::string(d) == "vm" ? "vm" : "jail";
}

int ClaimNetIndex(int* lock_fd) {
  for (int i = 0; i < 256; ++i) {
    std::string lock = "/tmp/hutch-test-netpool-" + std::to_string(i) + ".lock";
    int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      *lock_fd = fd;
      return i;
    }
    close(fd);
  }
  return -1;
}

TestServer::TestServer(std::vector<std::string> extra_args, bool with_env_key)
    : extra_args_(std::move(extra_args)), with_env_key_(with_env_key) {
  if (!getenv("HUTCHD_BIN") || !getenv("HUTCH_TEMPLATES_DIR")) {
    ADD_FAILURE() << "HUTCHD_BIN and HUTCH_TEMPLATES_DIR must be set (run through ctest)";
    return;
  }
  // A state dir that outlives the test (templates built once for a group
  // of tests, tests/interpreter): used as is, never removed.
  if (const char* keep = getenv("HUTCH_TEST_KEEP_STATE_DIR"); keep && *keep) {
    std::error_code ec;
    fs::create_directories(keep, ec);
    state_dir_ = keep;
    keep_state_dir_ = true;
    const std::string t = TempDir("hutch-test");
    fs::remove(t, ec);
    log_path_ = t + ".log";
  } else {
    state_dir_ = TempDir("hutch-test");
    log_path_ = state_dir_ + ".log";
  }
  // Servers that run at once (ctest -j) must not share a network pool:
  // their host-side addresses would collide.
  net_index_ = ClaimNetIndex(&net_lock_fd_);
  if (net_index_ < 0) {
    ADD_FAILURE() << "no free test network pool (256 test servers at once?)";
    return;
  }
  Launch(false);
}

void TestServer::Launch(bool append_log) {
  // A kept state dir still has the address file of the last server there:
  // only the one this server writes counts.
  std::error_code ec;
  fs::remove(state_dir_ + "/state/hutchd.addr", ec);
  const char* bin = getenv("HUTCHD_BIN");
  const char* tpl = getenv("HUTCH_TEMPLATES_DIR");
  port_ = 0;
  std::vector<std::string> args = {
      bin, "--listen",    "127.0.0.1:0", "--state-dir", state_dir_ + "/state", "--templates-dir",
      tpl, "--log-level", "info"};
  // The per-key rate limit is off unless a test sets it: a test that
  // happens to send requests fast must not pass or fail by machine speed.
  if (std::find(extra_args_.begin(), extra_args_.end(), "--rate-limit") == extra_args_.end()) {
    args.push_back("--rate-limit");
    args.push_back("0");
  }
  args.push_back("--net-pool");
  args.push_back(NetPool());
  // The test's outside world (NetWorld) stands for the public internet on
  // benchmarking addresses, which hutchd refuses by default.
  args.push_back("--net-allow-private");
  args.push_back(WorldNet());
  // No warm namespaces unless a test asks: most tests never use a network.
  if (std::find(extra_args_.begin(), extra_args_.end(), "--net-warm") == extra_args_.end()) {
    args.push_back("--net-warm");
    args.push_back("0");
  }
  // The vm driver's guest kernel (a ctest fixture runs scripts/vm-guest).
  if (const char* g = getenv("HUTCH_VM_GUEST_DIR");
      g && *g &&
      std::find(extra_args_.begin(), extra_args_.end(), "--vm-guest-dir") == extra_args_.end()) {
    args.push_back("--vm-guest-dir");
    args.push_back(g);
  }
  // The vm variants: every create that names no driver boots a VM.
  if (OnVm() &&
      std::find(extra_args_.begin(), extra_args_.end(), "--driver") == extra_args_.end()) {
    args.push_back("--driver");
    args.push_back("vm");
    // Under TCG a test spends minutes where a jail's takes seconds: its
    // sandboxes must not expire under it (tests that want a TTL set one).
    if (std::find(extra_args_.begin(), extra_args_.end(), "--default-ttl") == extra_args_.end()) {
      args.push_back("--default-ttl");
      args.push_back("3600");
    }
  }
  for (auto& a : extra_args_) args.push_back(a);
  pid_ = fork();
  if (pid_ == 0) {
    FILE* log = fopen(log_path_.c_str(), append_log ? "a" : "w");
    if (log) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    // Freed stream buffers would otherwise sit in ASan's 256 MB quarantine
    // and look like growth; 16 MB still catches use-after-free.
    std::string asan = getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "";
    setenv("ASAN_OPTIONS", (asan + (asan.empty() ? "" : ":") + "quarantine_size_mb=16").c_str(), 1);
    if (with_env_key_) setenv("HUTCH_API_KEY", key_.c_str(), 1);
    else unsetenv("HUTCH_API_KEY");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  // The first start on a machine builds the base template (seconds).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  std::string addr_file = state_dir_ + "/state/hutchd.addr";
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(addr_file);
    std::string addr;
    if (in >> addr) {
      port_ = std::stoi(addr.substr(addr.rfind(':') + 1));
      if (!with_env_key_ && !append_log) {
        // The generated key is printed once: "  hk_...".
        std::istringstream log(Log());
        std::string line;
        while (std::getline(log, line)) {
          size_t p = line.find("hk_");
          if (line.rfind("  hk_", 0) == 0 && p != std::string::npos) key_ = line.substr(p);
        }
      }
      return;
    }
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "hutchd exited during start:\n" << Log();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "hutchd did not start in time:\n" << Log();
}

void TestServer::Kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
  port_ = 0;
}

void TestServer::Restart() {
  if (pid_ > 0) Kill9();
  // The address file of the dead run would be read as the new one's.
  std::error_code ec;
  fs::remove(state_dir_ + "/state/hutchd.addr", ec);
  Launch(true);
}

int TestServer::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int st = 0;
  for (int i = 0; i < 300; ++i) {
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return st;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &st, 0);
  pid_ = -1;
  return st;
}

TestServer::~TestServer() {
  // A clean shutdown exits 0; under the sanitizer build a leak or UB report
  // makes it non-zero, and that fails the test that ran the server.
  bool was_running = pid_ > 0;
  int st = Stop();
  if (was_running && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
    ADD_FAILURE() << "hutchd did not exit cleanly (status " << st << "):\n" << Log();
  std::error_code ec;
  if (!state_dir_.empty() && !keep_state_dir_) fs::remove_all(state_dir_, ec);
  if (!log_path_.empty() && !::testing::Test::HasFailure()) fs::remove(log_path_, ec);
  if (net_lock_fd_ >= 0) close(net_lock_fd_);
}

std::string TestServer::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TestServer::CreateSandbox(const nlohmann::json& body) {
  auto c = Client();
  auto r = c.Json("POST", "/v1/sandboxes", body);
  EXPECT_EQ(r.status, 201) << r.body;
  auto j = r.json();
  if (!j.is_object() || !j.contains("id")) return "";
  return j["id"].get<std::string>();
}

nlohmann::json TestServer::Exec(const std::string& id, const std::string& cmd,
                                int timeout_seconds) {
  auto c = Client();
  auto r = c.Json("POST", "/v1/sandboxes/" + id + "/exec",
                  {{"cmd", cmd}, {"timeout_seconds", timeout_seconds}});
  auto j = r.json();
  if (!j.is_object()) j = nlohmann::json::object();
  j["_status"] = r.status;
  return j;
}

size_t TestServer::RssBytes() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

bool TestServer::WaitForPoolsFilled() const {
  const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (std::chrono::steady_clock::now() < until) {
    const auto m = ParseExposition(Client().Request("GET", "/metrics").body);
    const auto ready = m.Value("hutch_disk_pool_ready");
    const auto target = m.Value("hutch_disk_pool_target");
    if (ready && target && *ready >= *target) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace hutch::testing
