#include "driver/vm/qmp_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

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
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return MakeError(Code::kUnavailable, "qmp: no answer in time");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char b[4096];
    ssize_t n = read(fd, b, sizeof b);
    if (n <= 0) return MakeError(Code::kUnavailable, "qmp: connection closed");
    buf->append(b, static_cast<size_t>(n));
  }
}

// Sends one line, with `pass_fd` as ancillary data when >= 0.
Status SendLine(int fd, const std::string& line, int pass_fd) {
  iovec iov{const_cast<char*>(line.data()), line.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    std::memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
  if (n < 0) return ErrnoError("qmp: send");
  // The rest (only ever a short line, so normally nothing) without the fd.
  for (size_t off = static_cast<size_t>(n); off < line.size();) {
    ssize_t m = send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (m <= 0) return ErrnoError("qmp: send");
    off += static_cast<size_t>(m);
  }
  return Status{};
}

}  // namespace

Result<QmpSession> QmpSession::Open(const std::string& socket_path,
                                    std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoError("qmp socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path)
    return MakeError(Code::kInternal, "qmp socket path too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return ErrnoError("qmp connect");
  QmpSession s(std::move(fd));
  auto greeting = ReadMessage(s.fd_.get(), &s.buf_, deadline);
  if (!greeting.ok()) return greeting.error();
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (auto r = s.Run("qmp_capabilities", nullptr, -1, std::max(left, std::chrono::milliseconds(1)));
      !r.ok())
    return r.error();
  return s;
}

Result<nlohmann::json> QmpSession::Run(const std::string& command, const nlohmann::json& args,
                                       int pass_fd, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  nlohmann::json req = {{"execute", command}};
  if (!args.is_null()) req["arguments"] = args;
  if (auto st = SendLine(fd_.get(), req.dump() + "\n", pass_fd); !st.ok())
    return st.error().Context(command);
  // Asynchronous events (STOP, RESUME, MIGRATION…) arrive in between.
  for (;;) {
    auto m = ReadMessage(fd_.get(), &buf_, deadline);
    if (!m.ok()) return m.error();
    if (m->contains("return")) return (*m)["return"];
    if (m->contains("error"))
      return MakeError(Code::kInternal,
                       "qmp " + command + ": " + (*m)["error"].value("desc", std::string("error")));
  }
}

Result<std::string> QmpExecute(const std::string& socket_path, const std::string& command,
                               std::chrono::milliseconds timeout) {
  auto s = QmpSession::Open(socket_path, timeout);
  if (!s.ok()) return s.error();
  auto r = s->Run(command, nullptr, -1, timeout);
  if (!r.ok()) return r.error();
  return r->dump();
}

}  // namespace hutch::vm
