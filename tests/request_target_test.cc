// Request-target parsing (api/request_target.h). The fuzz target
// fuzz/request_target_fuzz.cc checks its invariants on random input; these
// pin down the cases it found and the ones the API depends on.
#include "http/request_target.h"

#include <gtest/gtest.h>

using hutch::api::ParseRequestTarget;
using hutch::api::PathSegments;

TEST(RequestTarget, DecodesPathAndQuery) {
  auto t =
      ParseRequestTarget("/v1/sandboxes/sb_1/fs?path=%2Fhome%2Fuser%2Fa%20b.txt&user=user&q=a+b");
  EXPECT_TRUE(t.ok);
  EXPECT_EQ(t.path, "/v1/sandboxes/sb_1/fs");
  EXPECT_EQ(t.query["path"], "/home/user/a b.txt");
  EXPECT_EQ(t.query["user"], "user");
  EXPECT_EQ(t.query["q"], "a b");
  EXPECT_EQ(PathSegments("//v1///x/"), (std::vector<std::string>{"v1", "x"}));
}

TEST(RequestTarget, RejectsMalformedEscapesAndNulBytes) {
  EXPECT_FALSE(ParseRequestTarget("/v1/%zz").ok);
  EXPECT_FALSE(ParseRequestTarget("/v1/a%").ok);
  EXPECT_FALSE(ParseRequestTarget("/v1/a%00b").ok);
  EXPECT_FALSE(ParseRequestTarget("/v1?path=a%00b").ok);
  // Found by the fuzzer: a raw NUL (not percent-encoded) used to pass.
  EXPECT_FALSE(ParseRequestTarget(std::string_view("/sa\0b", 5)).ok);
  EXPECT_FALSE(ParseRequestTarget(std::string_view("/v1?path=a\0b", 12)).ok);
}

TEST(RequestTarget, SplitKeepsTheRawRemainderAndQuery) {
  using hutch::api::SplitRequestTarget;
  auto s = SplitRequestTarget("/v1/sandboxes/sb_1/ports/8000/a%20b//c?x=%zz&y=1", 5);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.prefix, (std::vector<std::string>{"v1", "sandboxes", "sb_1", "ports", "8000"}));
  EXPECT_EQ(s.rest, "/a%20b//c?x=%zz&y=1");
  // Nothing after the prefix: the root of the relayed server.
  EXPECT_EQ(SplitRequestTarget("/v1/sandboxes/sb_1/ports/8000", 5).rest, "/");
  EXPECT_EQ(SplitRequestTarget("/v1/sandboxes/sb_1/ports/8000?q", 5).rest, "/?q");
  EXPECT_EQ(SplitRequestTarget("//v1//sandboxes/sb_1/ports/8000/", 5).rest, "/");
  // Counted like PathSegments; an escaped '/' stays inside its segment.
  auto e = SplitRequestTarget("/v1/sandboxes/sb%2F1/ports/80/", 5);
  ASSERT_TRUE(e.ok);
  EXPECT_EQ(e.prefix[2], "sb/1");
  EXPECT_FALSE(SplitRequestTarget("/v1/sandboxes/sb_1/ports", 5).ok);
  EXPECT_FALSE(SplitRequestTarget("/v1/sandboxes/sb_1/ports/8%zz/", 5).ok);
}
