#include "tests/support/hostile.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>

namespace hutch::testing {

using nlohmann::json;

namespace {
// A blocking exec's stream: its base64 field when the output was not text.
std::string OutputOf(const json& r, const std::string& name) {
  if (!r.is_object()) return std::string();
  if (r.contains(name + "_b64")) return client::Base64Decode(r.value(name + "_b64", std::string()));
  return r.value(name, std::string());
}
}  // namespace

std::string StdoutOf(const json& r) { return OutputOf(r, "stdout"); }
std::string StderrOf(const json& r) { return OutputOf(r, "stderr"); }

json StartDetached(const TestServer& s, const std::string& id, const std::string& cmd) {
  auto c = s.Client();
  auto r = c.Json("POST", "/v1/sandboxes/" + id + "/exec",
                  {{"cmd", "nohup " + cmd + " >/dev/null 2>&1 </dev/null & echo started"},
                   {"detach", true},
                   {"timeout_seconds", 30}});
  auto j = r.json();
  if (!j.is_object()) j = json::object();
  j["_status"] = r.status;
  return j;
}

std::string RandomHex(size_t n) {
  std::random_device rd;
  std::mt19937_64 g(rd());
  std::string s;
  while (s.size() < n) s += "0123456789abcdef"[g() & 15];
  return s;
}

int RawConnect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

size_t FdCount(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

RssWatch::RssWatch(const TestServer& s)
    : s_(s), t_([this] {
        while (!stop_) {
          size_t r = s_.RssBytes();
          if (r > max_) max_ = r;
          ++samples_;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }) {}

RssWatch::~RssWatch() { Stop(); }

void RssWatch::Stop() {
  stop_ = true;
  if (t_.joinable()) t_.join();
}

}  // namespace hutch::testing
