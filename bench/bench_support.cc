#include "bench/bench_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace hutch::bench {

namespace fs = std::filesystem;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------- stats

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  double pos = p / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Stats Summarize(std::vector<double> v) {
  Stats s;
  s.runs = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = Percentile(v, 50);
  s.p99 = Percentile(v, 99);
  s.min = v.front();
  s.max = v.back();
  return s;
}

// ---------------------------------------------------------------- process helpers

// Runs argv with stdout/stderr to /dev/null; returns the wait status, or -1
// when it could not be spawned.
int RunQuiet(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

// One kB-valued field of /proc/<pid>/status, in bytes (0 if absent).
uint64_t ProcStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// Resets VmHWM to the current RSS (Linux >= 4.0, needs ptrace rights over
// the process: we started it). Returns false when the kernel refused.
bool ResetPeakRss(pid_t pid) {
  std::ofstream out("/proc/" + std::to_string(pid) + "/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

std::string Env(const char* name, const std::string& def) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : def;
}

// ---------------------------------------------------------------- hutchd

size_t OpenFdCount(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

void Hutchd::Start() {
  char tmpl[] = "/tmp/hutch-bench-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp: ") + strerror(errno));
  dir_ = tmpl;
  std::string log = dir_ + "/hutchd.log";
  std::vector<std::string> args = {bin_,          "--listen",      "127.0.0.1:0",
                                   "--state-dir", dir_ + "/state", "--templates-dir",
                                   templates_,    "--log-level",   "warn"};
  // The benchmark measures the server, not its per-key limit.
  if (!keep_rate_limit_) {
    args.push_back("--rate-limit");
    args.push_back("0");
  }
  for (const auto& a : extra_) args.push_back(a);
  // The vm driver's guest kernel (scripts/vm-guest DIR), when given.
  if (std::string g = Env("HUTCH_VM_GUEST_DIR", ""); !g.empty()) {
    args.push_back("--vm-guest-dir");
    args.push_back(g);
  }
  std::string agent = Env("HUTCH_AGENT_BIN", "");
  if (!agent.empty()) {
    args.push_back("--agent");
    args.push_back(agent);
  }
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid_ == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    setenv("HUTCH_API_KEY", key_.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  // The first start on a machine may build the base template (seconds).
  auto deadline = Clock::now() + std::chrono::seconds(180);
  while (Clock::now() < deadline) {
    std::ifstream in(dir_ + "/state/hutchd.addr");
    std::string addr;
    if (in >> addr) {
      port_ = std::stoi(addr.substr(addr.rfind(':') + 1));
      return;
    }
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("hutchd exited during start:\n" + Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error("hutchd did not start within 180 s:\n" + Log());
}

void Hutchd::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int st = 0;
    bool gone = false;
    for (int i = 0; i < 300 && !gone; ++i) {
      if (waitpid(pid_, &st, WNOHANG) == pid_) gone = true;
      else std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!gone) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &st, 0);
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    dir_.clear();
  }
}

std::string Hutchd::Log() const {
  std::ifstream in(dir_ + "/hutchd.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace hutch::bench
