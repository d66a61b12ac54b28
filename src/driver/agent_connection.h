// Host side of one connection to a sandbox's hutch-agent.
//
// Owns the unix socket, a reader coroutine that splits incoming frames into
// per-stream queues, and a writer that drains an outbound queue. Everything
// runs on hutchd's single I/O thread (the io_context executor): no locks,
// and no member may be touched from another thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "common/result.h"
#include "wire/frame.h"

namespace hutch {

namespace asio = boost::asio;

class AgentConnection;

// One logical stream (an exec or a file operation). Frames for it queue here
// until its owner awaits them.
class AgentStream {
 public:
  AgentStream(asio::any_io_executor ex, std::weak_ptr<AgentConnection> conn, uint32_t id);
  ~AgentStream();  // cancels the operation in the agent if it has not ended
  AgentStream(const AgentStream&) = delete;
  AgentStream& operator=(const AgentStream&) = delete;

  uint32_t id() const { return id_; }
  // Next frame of this stream; nullopt when the agent connection is lost or
  // `Interrupt()` was called and no frame is queued.
  asio::awaitable<std::optional<wire::Frame>> Next();
  // Like Next but gives up after `timeout` (returns nullopt, timed_out=true).
  asio::awaitable<std::optional<wire::Frame>> NextFor(std::chrono::milliseconds timeout,
                                                      bool* timed_out);
  // The agent's answer to a request on this stream (its first frame, or
  // the final one after a write): like Next, but a kAgentTimeout error when
  // nothing came within AgentConnection::answer_timeout(). An agent that is
  // stopped or starved must not hold an API request forever; a stream
  // (exec output, a process's life) may stay quiet as long as it likes,
  // so only answers are bounded. nullopt: the connection was lost.
  asio::awaitable<Result<std::optional<wire::Frame>>> Answer();
  // Sends a frame on this stream; waits while the outbound queue is long.
  asio::awaitable<Status> Send(wire::Type type, std::string_view payload);
  // Tells the agent `n` more data bytes were consumed (batched).
  void Consumed(size_t n);
  // Lets the agent send without limit (used when output is discarded).
  void Unlimited();
  // Wakes a pending Next() (e.g. the HTTP client went away).
  void Interrupt();
  bool interrupted() const { return interrupted_; }
  bool ended() const { return ended_; }
  void DetachFromAgent() { cancel_on_destroy_ = false; }

 private:
  friend class AgentConnection;
  void Push(wire::Frame f);
  void Lost();

  std::weak_ptr<AgentConnection> conn_;
  uint32_t id_;
  std::deque<wire::Frame> q_;
  asio::steady_timer wake_;
  bool lost_ = false;
  bool ended_ = false;
  bool interrupted_ = false;
  bool cancel_on_destroy_ = true;
  size_t pending_credit_ = 0;
};

class AgentConnection : public std::enable_shared_from_this<AgentConnection> {
 public:
  // Connects to the agent's socket and waits for its hello. With
  // wait_hello=false (an agent that is frozen, adopted while paused) the
  // hello is read later with the other frames, once the agent runs again.
  static asio::awaitable<Result<std::shared_ptr<AgentConnection>>> Connect(
      const std::string& socket_path, std::chrono::milliseconds timeout, bool wait_hello = true);

  explicit AgentConnection(asio::any_io_executor ex);
  ~AgentConnection();

  // A new stream with a fresh id. Keep the shared_ptr for as long as you
  // want its frames; dropping it cancels the operation in the agent.
  std::shared_ptr<AgentStream> OpenStream();
  // Queues bytes; resolves once the outbound queue is below its bound.
  asio::awaitable<Status> Send(std::string bytes);
  // Queues bytes without waiting (small control frames).
  void SendNoWait(std::string bytes);
  // One request, one answer: sends `type` with `payload` on a fresh stream
  // and returns the agent's final frame (kProcResult, or kError for the
  // caller to map). Fails when the connection is lost (kUnavailable) or
  // no answer came within answer_timeout() (kAgentTimeout).
  asio::awaitable<Result<wire::Frame>> Call(wire::Type type, std::string_view payload);
  // How long an agent may take to answer a request, or to take queued
  // bytes off hutchd's hands once the queue is full (--agent-timeout).
  // Set once at startup, before any connection exists.
  static void set_answer_timeout(std::chrono::milliseconds t) { answer_timeout_ = t; }
  static std::chrono::milliseconds answer_timeout() { return answer_timeout_; }
  static Error AnswerTimeoutError(const std::string& what, const std::string& after = "");
  void Close();
  bool alive() const { return alive_; }
  int agent_pid() const { return agent_pid_; }
  // Streams whose owner still holds them (an exec, a transfer, an attached
  // process output or terminal): the sandbox is in use while any is open.
  size_t open_streams() const { return streams_.size(); }
  // Whether the agent's hello listed `name` ("processes", "pty"): an agent
  // from an older build drops the connection on frame types it does not know.
  bool has_feature(const std::string& name) const { return features_.count(name) > 0; }
  // Reads the agent's hello (protocol version, pid, features).
  Status ApplyHello(const wire::Frame& f);
  // Called once when the connection breaks (not on Close()).
  std::function<void(const std::string&)> on_lost;

 private:
  friend class AgentStream;
  asio::awaitable<void> ReadLoop();
  asio::awaitable<void> WriteLoop();
  void Fail(const std::string& why);
  void Forget(uint32_t id) { streams_.erase(id); }

  asio::local::stream_protocol::socket sock_;
  wire::FrameReader reader_;
  std::unordered_map<uint32_t, std::weak_ptr<AgentStream>> streams_;
  std::deque<std::string> outq_;
  size_t outq_bytes_ = 0;
  bool writing_ = false;
  asio::steady_timer drained_;
  uint32_t next_stream_ = 1;
  bool alive_ = true;
  int agent_pid_ = 0;
  std::set<std::string> features_;
  static inline std::chrono::milliseconds answer_timeout_{std::chrono::seconds(60)};
};

}  // namespace hutch
