#include "driver/fake/fake_agent.h"

#include <unistd.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include "wire/frame.h"

namespace hutch::fake {

using nlohmann::json;

namespace {
// Built outside the coroutines: GCC 12 cannot put brace-initialized JSON
// with string literals in a coroutine frame.
std::string Hello() {
  return json{{"version", wire::kProtocolVersion}, {"pid", 1}, {"features", {"processes", "pty"}}}
      .dump();
}
std::string Refused() {
  return json{{"code", "exec_failed"}, {"errno", 2}, {"message", "fake agent: start refused"}}
      .dump();
}
std::string Started(int pid, const std::string& spec_text) {
  json spec = json::parse(spec_text, nullptr, false);
  json p = {{"pid", pid}, {"running", true}, {"background", true}, {"stdin_open", true}};
  if (spec.is_object()) {
    if (spec.contains("argv")) p["argv"] = spec["argv"];
    if (spec.contains("meta")) p["meta"] = spec["meta"];
  }
  return p.dump();
}
std::string Pid(int pid) { return json{{"pid", pid}}.dump(); }
std::string Exit(int code) {
  return json{{"exit_code", code}, {"signal", 0}, {"timed_out", false}, {"duration_ms", 1}}.dump();
}
}  // namespace

FakeAgent::FakeAgent(asio::any_io_executor ex, std::string path,
                     std::shared_ptr<AgentBehavior> behavior)
    : path_(std::move(path)), behavior_(std::move(behavior)), acceptor_(ex), sock_(ex) {}

FakeAgent::~FakeAgent() { ::unlink(path_.c_str()); }

Result<std::shared_ptr<FakeAgent>> FakeAgent::Listen(asio::any_io_executor ex,
                                                     std::string socket_path,
                                                     std::shared_ptr<AgentBehavior> behavior) {
  std::shared_ptr<FakeAgent> a(new FakeAgent(ex, std::move(socket_path), std::move(behavior)));
  ::unlink(a->path_.c_str());
  boost::system::error_code ec;
  asio::local::stream_protocol::endpoint ep(a->path_);
  a->acceptor_.open(ep.protocol(), ec);
  if (!ec) a->acceptor_.bind(ep, ec);
  if (!ec) a->acceptor_.listen(1, ec);
  if (ec)
    return MakeError(Code::kInternal, "fake agent: listen on " + a->path_ + ": " + ec.message());
  asio::co_spawn(
      ex, [a]() -> asio::awaitable<void> { co_await a->Serve(); }, asio::detached);
  return a;
}

void FakeAgent::Kill() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  sock_.shutdown(asio::socket_base::shutdown_both, ec);
  sock_.close(ec);
  ::unlink(path_.c_str());
}

asio::awaitable<void> FakeAgent::Write(uint8_t type, uint32_t stream, std::string payload) {
  std::string bytes = wire::Encode(static_cast<wire::Type>(type), stream, payload);
  boost::system::error_code ec;
  co_await asio::async_write(sock_, asio::buffer(bytes),
                             asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<void> FakeAgent::Serve() {
  boost::system::error_code ec;
  co_await acceptor_.async_accept(sock_, asio::redirect_error(asio::use_awaitable, ec));
  acceptor_.close(ec);
  if (!sock_.is_open()) co_return;
  co_await Write(static_cast<uint8_t>(wire::Type::kHello), 0, Hello());
  wire::FrameReader reader;
  char buf[16384];
  while (sock_.is_open()) {
    size_t n = co_await sock_.async_read_some(asio::buffer(buf),
                                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec || n == 0) break;
    if (!reader.Feed(buf, n).ok()) break;
    wire::Frame f;
    while (reader.Next(&f)) co_await Answer(static_cast<uint8_t>(f.type), f.stream, f.payload);
  }
  sock_.close(ec);
}

asio::awaitable<void> FakeAgent::Answer(uint8_t type, uint32_t stream, const std::string& payload) {
  const auto t = static_cast<wire::Type>(type);
  AgentBehavior& b = *behavior_;
  if (t == wire::Type::kProcStart) {
    ++b.proc_starts;
    if (b.hang_up_on_proc_start) {
      Kill();
      co_return;
    }
    if (b.fail_proc_start) {
      co_await Write(static_cast<uint8_t>(wire::Type::kError), stream, Refused());
      co_return;
    }
    co_await Write(static_cast<uint8_t>(wire::Type::kProcResult), stream,
                   Started(next_pid_++, payload));
  } else if (t == wire::Type::kExecStart) {
    ++b.execs;
    co_await Write(static_cast<uint8_t>(wire::Type::kStarted), stream, Pid(next_pid_++));
    co_await Write(static_cast<uint8_t>(wire::Type::kExit), stream, Exit(b.exec_exit_code));
  }
  // kStdin, kStdinClose, kCredit, kCancel and the rest: nothing to answer.
}

}  // namespace hutch::fake
