// execd's command stream: `text/event-stream` whose events are bare JSON
// objects, one per blank-line-separated block (the SDKs also accept a
// `data: ` prefix, execd sends none). Output goes one line per event with
// its terminator stripped, so a LineSplitter per stream holds back a
// partial line until its newline or the end.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/exec_request.h"
#include "http/http_context.h"

namespace hutch::api::opensandbox {

// Milliseconds since the epoch: the `timestamp` of every event.
int64_t NowMs();

// {"type":"init","text":id}, {"type":"stdout"|"stderr","text":line}, ...
nlohmann::json InitEvent(const std::string& id);
nlohmann::json OutputEvent(bool stderr_stream, std::string text);
nlohmann::json CompleteEvent(int64_t execution_ms);
nlohmann::json PingEvent();
// How a command that did not exit 0 ends: the SDK reads its exit code
// from error.evalue; a signal reads as 128+N, as a shell reports it.
nlohmann::json ExitErrorEvent(const ExitInfo& e);
// A failure of hutch's (not of the command), e.g. the sandbox went away.
nlohmann::json FailureEvent(const std::string& message);
// The exit code a command's end reads as (exit status, or 128+signal).
int ExitCodeOf(const ExitInfo& e);

// Splits a byte stream into lines (the terminator "\n" or "\r\n" removed).
// A line longer than `max_piece` comes out in pieces of at most that size
// (cut between characters), so a command printing megabytes without a
// newline is relayed as it runs, not held and then escaped in one event
// (issue 32 #3).
class LineSplitter {
 public:
  static constexpr size_t kMaxPiece = 64 << 10;
  explicit LineSplitter(size_t max_piece = kMaxPiece) : max_(max_piece) {}
  struct Piece {
    std::string text;
    bool line_start;  // the piece begins a line (else it continues one)
  };
  // Complete lines (and pieces of long ones) of what has come so far.
  std::vector<std::string> Feed(std::string_view data);
  std::vector<Piece> FeedPieces(std::string_view data);
  // The unterminated rest, if any (at the end of the stream).
  std::vector<std::string> Flush();

 private:
  size_t max_;
  std::string buf_;
  bool in_line_ = false;  // a piece of the line in buf_ went out already
};

class CommandStream {
 public:
  explicit CommandStream(HttpContext& ctx) : ctx_(ctx) {}
  // Sends the response header (200, text/event-stream, chunked).
  asio::awaitable<Status> Begin();
  asio::awaitable<Status> Send(const nlohmann::json& event);
  asio::awaitable<void> End();
  bool begun() const { return begun_; }

 private:
  HttpContext& ctx_;
  bool begun_ = false;
};

}  // namespace hutch::api::opensandbox
