#include "driver/vm/qmp_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "common/unique_fd.h"

namespace hutch::vm {

namespace {

using Clock = std::chrono::steady_clock;

// Reads one '\n'-terminated JSON message (QMP sends one per line).
Result<nlohmann::json> ReadMessage(int fd, std::string* buf, Clock::time_point deadline) {
  for (;;) {
    if (size_t nl = buf->find('\n'); nl != std::string::npos) {
      auto j = nlohmann::json::parse(buf->substr(0, nl), nullptr, false);
      buf->erase(0, nl + 1);
      if (j.is_discarded()) return MakeError(Code::kInternal, "qmp: malformed message");
      return j;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return MakeError(Code::kUnavailable, "qmp: no answer in time");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char b[4096];
    ssize_t n = read(fd, b, sizeof b);
    if (n <= 0) return MakeError(Code::kUnavailable, "qmp: connection closed");
    buf->append(b, static_cast<size_t>(n));
  }
}

// Sends `cmd` and waits for its answer, skipping asynchronous events.
Result<nlohmann::json> Execute(int fd, std::string* buf, const std::string& cmd, Clock::time_point deadline) {
  const std::string line = nlohmann::json{{"execute", cmd}}.dump() + "\n";
  if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
    return ErrnoError("qmp: send " + cmd);
  for (;;) {
    auto m = ReadMessage(fd, buf, deadline);
    if (!m.ok()) return m.error();
    if (m->contains("return")) return (*m)["return"];
    if (m->contains("error"))
      return MakeError(Code::kInternal, "qmp " + cmd + ": " + (*m)["error"].value("desc", std::string("error")));
  }
}

}  // namespace

Result<std::string> QmpExecute(const std::string& socket_path, const std::string& command,
                               std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("qmp socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) return MakeError(Code::kInternal, "qmp socket path too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return ErrnoError("qmp connect");
  std::string buf;
  auto greeting = ReadMessage(fd.get(), &buf, deadline);
  if (!greeting.ok()) return greeting.error();
  if (auto r = Execute(fd.get(), &buf, "qmp_capabilities", deadline); !r.ok()) return r.error();
  auto r = Execute(fd.get(), &buf, command, deadline);
  if (!r.ok()) return r.error();
  return r->dump();
}

}  // namespace hutch::vm
