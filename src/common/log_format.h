// hutchd's log line format, as an spdlog formatter, so every existing
// `spdlog::info("event k={} k2=\"{}\"", ...)` call keeps working unchanged.
//
// text: `2026-01-02T03:04:05.678Z info event k=v k2="v 2"` — the message as
//       written, with control characters escaped so one event stays one line.
// json: one JSON object per line:
//       {"ts":"…","level":"info","event":"created","sandbox":"sb_1","k2":"v 2"}
//       Each `k=v` of the message becomes its own key; the remaining words
//       become "event" (a single identifier word) or "msg" (free text).
//       Values are always JSON strings (a quoted value loses its quotes);
//       bytes that are not UTF-8 become U+FFFD, so a line is always valid JSON.
//
// The formatter is stateless: spdlog calls it under the sink's lock.
#pragma once

#include <spdlog/formatter.h>
#include <memory>
#include <string>
#include <string_view>

namespace hutch {

enum class LogFormat { kText, kJson };

// "text" or "json"; false for anything else.
bool ParseLogFormat(std::string_view s, LogFormat* out);

class LogFormatter final : public spdlog::formatter {
 public:
  explicit LogFormatter(LogFormat format) : format_(format) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LogFormatter>(format_);
  }

 private:
  LogFormat format_;
};

// Sets the formatter of every spdlog logger (and of loggers made later).
void InstallLogFormat(LogFormat format);

// Appends `s` as the inside of a JSON string literal: quotes, backslashes
// and control characters escaped, invalid UTF-8 replaced by U+FFFD.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace hutch
