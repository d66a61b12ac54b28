// An interactive terminal in a sandbox, as every dialect sees it: a shell
// on a pty that the sandbox's agent opens inside the sandbox, its output
// paced by credit, keystrokes and window sizes going in. Dropping the
// session hangs up the terminal: the agent sends SIGHUP, then SIGKILL, to
// every process of the shell's session (docs/wire.md "PTY").
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/exec_session.h"
#include "core/sandbox.h"

namespace hutch {

struct PtyRequest {
  std::vector<std::string> argv;  // empty: a login shell (bash -l, else sh -l)
  std::map<std::string, std::string> env;
  std::string cwd;
  std::string user;  // default root, as for exec
  int cols = 80;
  int rows = 24;
};

struct PtyEvent {
  enum Kind { kOutput, kExit, kError } kind = kError;
  std::string data;  // kOutput: terminal bytes
  ExitInfo exit;     // kExit
  Error error;       // kError: the sandbox or agent went away, or Interrupt()
};

class PtySession {
 public:
  // Opens the terminal and starts the shell; returns once it runs.
  static asio::awaitable<Result<std::unique_ptr<PtySession>>> Start(std::shared_ptr<Sandbox> sb,
                                                                    PtyRequest req);
  int pid() const { return pid_; }
  // Next event; after kExit or kError there are no more.
  asio::awaitable<PtyEvent> Next();
  // Keystrokes (any bytes) for the terminal.
  asio::awaitable<Status> Write(std::string_view bytes);
  asio::awaitable<Status> Resize(int cols, int rows);
  // Output bytes handed on to the client (returns credit to the agent).
  void Consumed(size_t n) { stream_->Consumed(n); }
  // Wakes a pending Next() with kError (the client went away).
  void Interrupt() { stream_->Interrupt(); }

 private:
  PtySession(std::shared_ptr<Sandbox> sb, std::shared_ptr<AgentStream> s)
      : sb_(std::move(sb)), stream_(std::move(s)) {}
  std::shared_ptr<Sandbox> sb_;
  std::shared_ptr<AgentStream> stream_;
  int pid_ = 0;
  uint64_t oom_before_ = 0;
  bool done_ = false;
};

}  // namespace hutch
