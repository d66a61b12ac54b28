// The log formatter on the messages hutchd writes and on hostile ones:
// every JSON line must parse, fields must come out as the call site meant
// them, and no input may split one event into two lines.
#include "common/log_format.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

using hutch::LogFormat;
using hutch::LogFormatter;

namespace {

std::string Format(LogFormat f, std::string_view payload,
                   spdlog::level::level_enum lvl = spdlog::level::info) {
  // 2026-01-02T03:04:05.678Z
  auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1767323045678));
  spdlog::details::log_msg msg(t, spdlog::source_loc{}, "", lvl,
                               spdlog::string_view_t(payload.data(), payload.size()));
  LogFormatter fmt(f);
  spdlog::memory_buf_t buf;
  fmt.format(msg, buf);
  return std::string(buf.data(), buf.size());
}

nlohmann::json Json(std::string_view payload, spdlog::level::level_enum lvl = spdlog::level::info) {
  std::string line = Format(LogFormat::kJson, payload, lvl);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one event, one line: " << line;
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << "not a JSON object: " << line;
  return j;
}

}  // namespace

TEST(LogFormat, TextKeepsTheCurrentShape) {
  EXPECT_EQ(Format(LogFormat::kText, "sandbox=sb_1 created template=base"),
            "2026-01-02T03:04:05.678Z info sandbox=sb_1 created template=base\n");
  EXPECT_EQ(Format(LogFormat::kText, "agent_lost pid=7 reason=\"x y\"", spdlog::level::warn),
            "2026-01-02T03:04:05.678Z warning agent_lost pid=7 reason=\"x y\"\n");
}

TEST(LogFormat, TextEscapesControlBytesSoAnEventStaysOneLine) {
  std::string line = Format(LogFormat::kText, "err=\"a\nfake=1\tb\x01\xff\"");
  EXPECT_EQ(line, "2026-01-02T03:04:05.678Z info err=\"a\\nfake=1\\tb\\x01\\xff\"\n");
}

TEST(LogFormat, JsonSplitsEventAndFields) {
  auto j = Json("sandbox=sb_1 created template=base cpu=1 memory_mb=512");
  EXPECT_EQ(j["ts"], "2026-01-02T03:04:05.678Z");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["event"], "created");
  EXPECT_EQ(j["sandbox"], "sb_1");
  EXPECT_EQ(j["template"], "base");
  EXPECT_EQ(j["cpu"], "1");  // values are always strings: a stable schema
  EXPECT_EQ(j["memory_mb"], "512");
  EXPECT_FALSE(j.contains("msg"));
}

TEST(LogFormat, JsonFreeTextGoesToMsg) {
  auto j = Json("hutchd listening on 127.0.0.1:8080 state_dir=/var/lib/hutch driver=jail");
  EXPECT_EQ(j["msg"], "hutchd listening on 127.0.0.1:8080");
  EXPECT_EQ(j["state_dir"], "/var/lib/hutch");
  EXPECT_FALSE(j.contains("event"));
  EXPECT_EQ(Json("accept failed: Too many open files")["msg"],
            "accept failed: Too many open files");
  EXPECT_EQ(Json("")["msg"], "");
}

TEST(LogFormat, JsonQuotedValuesBecomePlainStrings) {
  auto j = Json("sandbox=sb_2 failed reason=\"agent connection closed\" code=9");
  EXPECT_EQ(j["event"], "failed");
  EXPECT_EQ(j["reason"], "agent connection closed");
  EXPECT_EQ(j["code"], "9");
}

TEST(LogFormat, JsonHandlesQuotesAndBackslashesInsideValues) {
  // Call sites do not escape what they put between quotes.
  auto j = Json(R"(handler_exception what="bad "thing" here \ and \" there" path=/x)");
  EXPECT_EQ(j["event"], "handler_exception");
  EXPECT_EQ(j["what"], R"(bad "thing" here \ and \" there)");
  EXPECT_EQ(j["path"], "/x");
  // An unterminated quote runs to the end of the message.
  EXPECT_EQ(Json("oops err=\"no end here")["err"], "no end here");
  // A quoted value followed by free text ends at its quote.
  auto k = Json("reconcile err=\"busy\" (left by an earlier run)");
  EXPECT_EQ(k["err"], "busy");
  EXPECT_EQ(k["msg"], "reconcile (left by an earlier run)");
}

TEST(LogFormat, JsonEmptyValues) {
  auto j = Json(R"(stopped reason= other="" last=)");
  EXPECT_EQ(j["event"], "stopped");
  EXPECT_EQ(j["reason"], "");
  EXPECT_EQ(j["other"], "");
  EXPECT_EQ(j["last"], "");
}

TEST(LogFormat, JsonInvalidUtf8AndControlBytesStillParse) {
  std::string payload = "odd v=\"\xff\xfe\xc3(\xed\xa0\x80\" nul=a";
  payload.push_back('\0');
  payload += "b ctl=\x1b[31m nl=\"x\ny\" ok=\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  auto j = Json(payload);
  EXPECT_EQ(j["v"], "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(j["nul"], std::string("a\0b", 3));
  EXPECT_EQ(j["ctl"], "\x1b[31m");
  EXPECT_EQ(j["nl"], "x\ny");
  EXPECT_EQ(j["ok"], "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");  // valid UTF-8 passes through
}

TEST(LogFormat, JsonFieldsNamedLikeFixedKeysDoNotCollide) {
  std::string line = Format(LogFormat::kJson, "http level=9 ts=x msg=m event=e level=10");
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["event"], "http");
  EXPECT_EQ(j["level_"], "9");
  EXPECT_EQ(j["level__"], "10");
  EXPECT_EQ(j["ts_"], "x");
  EXPECT_EQ(j["msg_"], "m");
  EXPECT_EQ(j["event_"], "e");
  // No duplicate keys: each "key": appears once.
  EXPECT_EQ(line.find("\"level\":"), line.rfind("\"level\":"));
}

TEST(LogFormat, JsonLevels) {
  EXPECT_EQ(Json("x", spdlog::level::warn)["level"], "warning");
  EXPECT_EQ(Json("x", spdlog::level::err)["level"], "error");
  EXPECT_EQ(Json("x", spdlog::level::debug)["level"], "debug");
}

TEST(LogFormat, ParseLogFormat) {
  LogFormat f = LogFormat::kText;
  EXPECT_TRUE(hutch::ParseLogFormat("json", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_TRUE(hutch::ParseLogFormat("text", &f));
  EXPECT_EQ(f, LogFormat::kText);
  EXPECT_FALSE(hutch::ParseLogFormat("xml", &f));
}
