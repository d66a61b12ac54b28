// src/common/header_value.h: Content-Disposition for names the sandbox
// chose, and the refusal of header values with control bytes (issue 32).
#include "common/header_value.h"

#include <gtest/gtest.h>

using hutch::ContentDisposition;
using hutch::IsSafeHeaderValue;

TEST(HeaderValue, PlainNamesAreQuotedAndEncoded) {
  EXPECT_EQ(ContentDisposition("inline", "report.txt"),
            "inline; filename=\"report.txt\"; filename*=UTF-8''report.txt");
  EXPECT_EQ(ContentDisposition("attachment", "a b.tar.gz"),
            "attachment; filename=\"a b.tar.gz\"; filename*=UTF-8''a%20b.tar.gz");
}

TEST(HeaderValue, CrLfQuotesAndBackslashesNeverReachTheHeader) {
  const std::string v = ContentDisposition("inline", "a\r\nSet-Cookie: x=1\"\\%");
  EXPECT_TRUE(IsSafeHeaderValue(v)) << v;
  EXPECT_EQ(v,
            "inline; filename=\"a__Set-Cookie: x=1___\"; "
            "filename*=UTF-8''a%0D%0ASet-Cookie%3A%20x%3D1%22%5C%25");
}

TEST(HeaderValue, NonAsciiRoundTripsInFilenameStar) {
  EXPECT_EQ(ContentDisposition("inline", "\xE2\x98\x83.txt"),
            "inline; filename=\"___.txt\"; filename*=UTF-8''%E2%98%83.txt");
  EXPECT_EQ(ContentDisposition("inline", ""),
            "inline; filename=\"download\"; filename*=UTF-8''download");
}

TEST(HeaderValue, ControlBytesAreUnsafe) {
  EXPECT_TRUE(IsSafeHeaderValue("bytes 0-1/2"));
  EXPECT_TRUE(IsSafeHeaderValue("a\tb"));
  EXPECT_FALSE(IsSafeHeaderValue("a\r\nb"));
  EXPECT_FALSE(IsSafeHeaderValue("a\nb"));
  EXPECT_FALSE(IsSafeHeaderValue(std::string("a\0b", 3)));
  EXPECT_FALSE(IsSafeHeaderValue("a\x7f"));
}
