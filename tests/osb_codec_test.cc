// The OpenSandbox dialect's pure parts: FileInfo modes as octal digits,
// passwd/group parsing, the session protocol's sentinel lines. (The SDK
// itself is driven by tests/compat/opensandbox.)
#include <gtest/gtest.h>

#include "api/opensandbox/file_info.h"
#include "api/opensandbox/session_protocol.h"

namespace hutch::api::opensandbox {
namespace {

TEST(FileInfoMode, OctalDigitsReadAsDecimal) {
  EXPECT_EQ(OctalDigits(0755), 755);
  EXPECT_EQ(OctalDigits(0644), 644);
  EXPECT_EQ(OctalDigits(04755), 4755);
  EXPECT_EQ(OctalDigits(0), 0);
  EXPECT_EQ(OctalDigits(07), 7);
}

TEST(FileInfoMode, DigitsBackToModeAndRejectsNonOctal) {
  EXPECT_EQ(ModeFromOctalDigits(755).value(), 0755);
  EXPECT_EQ(ModeFromOctalDigits(600).value(), 0600);
  EXPECT_EQ(ModeFromOctalDigits(0).value(), 0);
  EXPECT_FALSE(ModeFromOctalDigits(758).ok());
  EXPECT_FALSE(ModeFromOctalDigits(-1).ok());
  EXPECT_FALSE(ModeFromOctalDigits(17777).ok());
}

TEST(IdNames, ParsesPasswdAndResolvesBothWays) {
  IdNames n;
  n.users = IdNames::Parse("root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\nbad line\n");
  n.groups = IdNames::Parse("root:x:0:\nusers:x:100:user\n");
  EXPECT_EQ(n.User(0), "root");
  EXPECT_EQ(n.User(1000), "user");
  EXPECT_EQ(n.User(4242), "4242");
  EXPECT_EQ(n.Group(100), "users");
  EXPECT_EQ(n.UserId("user").value(), 1000);
  EXPECT_EQ(n.UserId("77").value(), 77);
  EXPECT_FALSE(n.UserId("nobody-here").ok());
  EXPECT_EQ(n.GroupId("users").value(), 100);
}

TEST(FileInfoJson, MapsAgentEntryToExecdShape) {
  IdNames n;
  n.users = {{0, "root"}};
  n.groups = {{0, "root"}};
  const nlohmann::json e = {{"name", "d"},     {"path", "/tmp/d"}, {"type", "dir"}, {"size", 4096},
                            {"mode", 0755},    {"mtime", "2026-01-02T03:04:05Z"}, {"uid", 0}, {"gid", 0}};
  const auto j = FileInfoJson(e, n);
  EXPECT_EQ(j["type"], "directory");
  EXPECT_EQ(j["mode"], 755);
  EXPECT_EQ(j["owner"], "root");
  EXPECT_EQ(j["modified_at"], "2026-01-02T03:04:05Z");
  EXPECT_EQ(j["path"], "/tmp/d");
}

TEST(SessionProtocol, OutputEndsAtSentinelWithStatus) {
  const std::string s = NewSentinel();
  SentinelLines out(s);
  // Output without a final newline: the sentinel's own newline ends it.
  auto a = out.Feed("hello\nwor");
  EXPECT_EQ(a, (std::vector<std::string>{"hello"}));
  auto b = out.Feed("ld\n" + s + ":3\nleftover\n");
  EXPECT_EQ(b, (std::vector<std::string>{"world"}));
  EXPECT_TRUE(out.done());
  EXPECT_EQ(out.status(), 3);
}

TEST(SessionProtocol, EmptyLineBeforeSentinelIsItsNewlineButOthersStay) {
  const std::string s = NewSentinel();
  SentinelLines out(s);
  auto a = out.Feed("x\n\n\n");  // "x", an empty output line, then maybe the sentinel's newline
  EXPECT_EQ(a, (std::vector<std::string>{"x", ""}));
  auto b = out.Feed(s + ":0\n");
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(out.done());
  EXPECT_EQ(out.status(), 0);
  SentinelLines err(s);
  auto c = err.Feed("oops\n\n" + s + "\n");
  EXPECT_EQ(c, (std::vector<std::string>{"oops"}));
  EXPECT_TRUE(err.done());
}

TEST(SessionProtocol, ScriptQuotesCwdAndKeepsCommandInTheShell) {
  const std::string script = SessionScript("cd /tmp; export X=1", "/it's", "__S__");
  EXPECT_EQ(script,
            "{ cd -- '/it'\\''s' && cd /tmp; export X=1\n} </dev/null; printf '\\n%s:%d\\n' '__S__' \"$?\"; "
            "printf '\\n%s\\n' '__S__' >&2\n");
}

}  // namespace
}  // namespace hutch::api::opensandbox
