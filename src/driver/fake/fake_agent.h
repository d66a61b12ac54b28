// FakeAgent: an in-process stand-in for hutch-agent, for root-free tests of
// core. It listens on a unix socket (a path in a temp dir, so the host side
// is the real AgentConnection::Connect), says hello, and answers the frames
// core sends on its own: background process starts (a template's start
// command) and execs (its ready check). Everything else is ignored, as an
// agent would for a stream it does not know. Runs on the caller's
// io_context; no threads, no processes.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <memory>
#include <string>

#include "common/result.h"

namespace hutch::fake {

namespace asio = boost::asio;

// How the fake agent answers. Read when each request arrives, so a test may
// change it between requests.
struct AgentBehavior {
  // kProcStart is answered with an error frame (the start command fails).
  bool fail_proc_start = false;
  // kProcStart makes the agent hang up (it died while starting it).
  bool hang_up_on_proc_start = false;
  // Exit code of every exec (a template's ready check passes at 0).
  int exec_exit_code = 0;
  // Counters a test may read.
  int proc_starts = 0;
  int execs = 0;
};

class FakeAgent : public std::enable_shared_from_this<FakeAgent> {
 public:
  // Binds `socket_path` and serves the one connection it accepts.
  static Result<std::shared_ptr<FakeAgent>> Listen(asio::any_io_executor ex,
                                                   std::string socket_path,
                                                   std::shared_ptr<AgentBehavior> behavior);
  ~FakeAgent();
  // Drops the connection as a dying agent would (the host sees EOF).
  void Kill();
  const std::string& socket_path() const { return path_; }

 private:
  FakeAgent(asio::any_io_executor ex, std::string path, std::shared_ptr<AgentBehavior> behavior);
  asio::awaitable<void> Serve();
  asio::awaitable<void> Answer(uint8_t type, uint32_t stream, const std::string& payload);
  asio::awaitable<void> Write(uint8_t type, uint32_t stream, std::string payload);

  std::string path_;
  std::shared_ptr<AgentBehavior> behavior_;
  asio::local::stream_protocol::acceptor acceptor_;
  asio::local::stream_protocol::socket sock_;
  int next_pid_ = 100;
};

}  // namespace hutch::fake
