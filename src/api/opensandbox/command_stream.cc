#include "api/opensandbox/command_stream.h"

#include <string.h>

#include <chrono>

namespace hutch::api::opensandbox {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

nlohmann::json InitEvent(const std::string& id) {
  return {{"type", "init"}, {"text", id}, {"timestamp", NowMs()}};
}

nlohmann::json OutputEvent(bool stderr_stream, std::string text) {
  return {{"type", stderr_stream ? "stderr" : "stdout"},
          {"text", std::move(text)},
          {"timestamp", NowMs()}};
}

nlohmann::json CompleteEvent(int64_t execution_ms) {
  return {{"type", "execution_complete"}, {"execution_time", execution_ms}, {"timestamp", NowMs()}};
}

nlohmann::json PingEvent() { return {{"type", "ping"}, {"text", "pong"}, {"timestamp", NowMs()}}; }

int ExitCodeOf(const ExitInfo& e) { return e.signal ? 128 + e.signal : e.exit_code; }

nlohmann::json ExitErrorEvent(const ExitInfo& e) {
  const int code = ExitCodeOf(e);
  std::string why = e.signal ? std::string("signal: ") + strsignal(e.signal)
                             : "exit status " + std::to_string(code);
  if (e.timed_out) why += " (timed out)";
  if (e.oom_killed) why += " (out of memory)";
  return {{"type", "error"},
          {"error",
           {{"ename", "CommandExecError"}, {"evalue", std::to_string(code)}, {"traceback", {why}}}},
          {"timestamp", NowMs()}};
}

nlohmann::json FailureEvent(const std::string& message) {
  return {{"type", "error"},
          {"error", {{"ename", "HutchError"}, {"evalue", message}, {"traceback", {message}}}},
          {"timestamp", NowMs()}};
}

std::vector<LineSplitter::Piece> LineSplitter::FeedPieces(std::string_view data) {
  std::vector<Piece> out;
  buf_.append(data);
  size_t start = 0;
  while (start < buf_.size()) {
    const size_t nl = buf_.find('\n', start);
    const size_t len = (nl == std::string::npos ? buf_.size() : nl) - start;
    if (len > max_ || (nl == std::string::npos && len == max_)) {
      // Too long to hold: a piece, cut before a UTF-8 continuation byte.
      size_t cut = start + max_;
      for (int i = 0; i < 3 && cut > start + 1 && (buf_[cut] & 0xc0) == 0x80; ++i) --cut;
      out.push_back({buf_.substr(start, cut - start), !in_line_});
      in_line_ = true;
      start = cut;
      continue;
    }
    if (nl == std::string::npos) break;
    size_t end = nl;
    if (end > start && buf_[end - 1] == '\r') --end;
    out.push_back({buf_.substr(start, end - start), !in_line_});
    in_line_ = false;
    start = nl + 1;
  }
  buf_.erase(0, start);
  return out;
}

std::vector<std::string> LineSplitter::Feed(std::string_view data) {
  std::vector<std::string> out;
  for (auto& p : FeedPieces(data)) out.push_back(std::move(p.text));
  return out;
}

std::vector<std::string> LineSplitter::Flush() {
  std::vector<std::string> out;
  if (!buf_.empty()) out.push_back(std::move(buf_));
  buf_.clear();
  in_line_ = false;
  return out;
}

asio::awaitable<Status> CommandStream::Begin() {
  begun_ = true;
  co_return co_await ctx_.BeginSse();
}

asio::awaitable<Status> CommandStream::Send(const nlohmann::json& event) {
  std::string block = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
  co_return co_await ctx_.WriteChunk(block);
}

asio::awaitable<void> CommandStream::End() { (void)co_await ctx_.EndStream(); }

}  // namespace hutch::api::opensandbox
