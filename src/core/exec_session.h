// One command running in a sandbox, as every dialect sees it: start it,
// pull its events (output, exit), and stop it when the caller goes away.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/exec_request.h"
#include "core/sandbox.h"
#include "driver/agent_connection.h"

namespace hutch {

struct ExecEvent {
  enum Kind { kStdout, kStderr, kExit, kError } kind = kError;
  std::string data;  // output bytes
  ExitInfo exit;     // kExit
  Error error;       // kError: the sandbox or the agent went away
};

class ExecSession {
 public:
  // Sends the command and waits until the agent started it.
  static asio::awaitable<Result<std::unique_ptr<ExecSession>>> Start(std::shared_ptr<Sandbox> sb,
                                                                     ExecRequest req);
  int pid() const { return pid_; }
  // Next event; after kExit or kError there are no more. A command with a
  // timeout ends by then (the agent kills it and sends its exit): an agent
  // that sent no exit --agent-timeout after it is given up on (kError
  // agent_timeout), so no reader waits forever on a stopped agent.
  asio::awaitable<ExecEvent> Next();
  // Like Next, but returns nullopt if nothing happened within `timeout`.
  asio::awaitable<std::optional<ExecEvent>> NextFor(std::chrono::milliseconds timeout);
  // Output bytes handed on to the client (returns credit to the agent).
  void Consumed(size_t n) { stream_->Consumed(n); }
  // Wakes a pending Next() with kError (the client disconnected).
  void Interrupt() { stream_->Interrupt(); }
  // Lets the process run on after this session is dropped (detach).
  void Detach();

 private:
  ExecSession(std::shared_ptr<Sandbox> sb, std::shared_ptr<AgentStream> s)
      : sb_(std::move(sb)), stream_(std::move(s)) {}
  std::shared_ptr<Sandbox> sb_;
  std::shared_ptr<AgentStream> stream_;
  int pid_ = 0;
  std::string command_;  // for the sandbox's event log
  uint64_t oom_before_ = 0;
  bool done_ = false;
  // When the exit is overdue (time_point::max() without a timeout).
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  ExecEvent Convert(std::optional<wire::Frame> f);
  ExecEvent Overdue();
};

struct ExecResult {
  std::string stdout_data;
  std::string stderr_data;
  ExitInfo exit;
  bool truncated = false;
};

// Turns an agent kError payload into an Error with the API code.
Error AgentErrorFromPayload(const std::string& payload);
// Why an agent stream ended without its final frame: the client left
// (`interrupted`), the sandbox expired or was deleted, or its agent died.
Error StreamEndedError(const Sandbox& sb, bool interrupted);
// Whether a command that ended with `e` was killed by the sandbox's OOM
// killer, given the sandbox's OOM kill count when it started.
bool LooksOomKilled(const ExitInfo& e, const Sandbox& sb, uint64_t oom_kills_before);
// Reads an agent kExit payload (exec, background process and terminal
// streams end with the same frame), oom_killed included.
Result<ExitInfo> ParseExitFrame(const std::string& payload, const Sandbox& sb,
                                uint64_t oom_kills_before);

// Runs a command to completion, keeping at most `output_cap` bytes of each
// stream (the rest is read and dropped; `truncated` tells).
asio::awaitable<Result<ExecResult>> RunExec(std::shared_ptr<Sandbox> sb, ExecRequest req,
                                            size_t output_cap);

}  // namespace hutch
