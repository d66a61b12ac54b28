// SSE output encoding: UTF-8 validation, split characters, JSON escaping
// that parses back exactly, and the base64 fallback.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/common/utf8.h"
#include "client/http_client.h"

using namespace hutch::api;

TEST(Utf8, ValidPrefixStopsAtCutCharacterAndFlagsInvalid) {
  bool bad = false;
  EXPECT_EQ(Utf8ValidPrefix("abc\xe2\x82", &bad), 3u);
  EXPECT_FALSE(bad);
  EXPECT_EQ(Utf8ValidPrefix("ab\xff", &bad), 2u);
  EXPECT_TRUE(bad);
  EXPECT_EQ(Utf8ValidPrefix("\xc0\xaf", &bad), 0u);  // overlong '/'
  EXPECT_TRUE(bad);
  EXPECT_EQ(Utf8ValidPrefix("\xed\xa0\x80", &bad), 0u);  // surrogate
  EXPECT_TRUE(bad);
}

TEST(Utf8Splitter, JoinsCharacterSplitAcrossChunks) {
  Utf8Splitter s;
  auto a = s.Feed("x\xe2\x82");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].text);
  EXPECT_EQ(a[0].bytes, "x");
  auto b = s.Feed("\xac\n");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_TRUE(b[0].text);
  EXPECT_EQ(b[0].bytes, "\xe2\x82\xac\n");
  EXPECT_TRUE(s.Flush().empty());
}

TEST(Utf8Splitter, InvalidBytesGoOutAsBytesAndTrailingCutIsFlushed) {
  Utf8Splitter s;
  auto a = s.Feed("\xff\xfe");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_FALSE(a[0].text);
  EXPECT_EQ(a[0].bytes, "\xff\xfe");
  s.Feed("ok\xe2");
  auto f = s.Flush();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].text);
  EXPECT_EQ(f[0].bytes, "\xe2");
}

TEST(JsonEscape, RoundTripsThroughAJsonParser) {
  std::string s = "quote\" back\\ nl\n tab\t cr\r nul";
  s.push_back('\0');
  s += "\x01\x1f\x7f é €";
  std::string lit = "\"";
  AppendJsonEscaped(&lit, s);
  lit += "\"";
  EXPECT_EQ(nlohmann::json::parse(lit).get<std::string>(), s);
  EXPECT_EQ(JsonEscapedSize(s), lit.size() - 2);
}

TEST(OutputEvent, ControlHeavyTextFallsBackToBase64) {
  std::string zeros(1000, '\0');
  std::string ev = OutputEvent("stdout", true, zeros);
  ASSERT_NE(ev.find("\"b64\""), std::string::npos);
  auto data = nlohmann::json::parse(ev.substr(ev.find("data: ") + 6));
  EXPECT_EQ(hutch::client::Base64Decode(data["b64"].get<std::string>()), zeros);
  std::string text = OutputEvent("stderr", true, "hello\n");
  EXPECT_EQ(text, "event: stderr\ndata: {\"text\":\"hello\\n\"}\n\n");
}

TEST(Base64, RoundTripsEveryLengthAndRefusesMalformedText) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    const std::string enc = hutch::Base64Encode(bytes);
    EXPECT_EQ(enc.size() % 4, 0u);
    std::string dec;
    ASSERT_TRUE(hutch::Base64Decode(enc, &dec)) << enc;
    EXPECT_EQ(dec, bytes);
    // Padding is optional.
    std::string bare = enc;
    while (!bare.empty() && bare.back() == '=') bare.pop_back();
    ASSERT_TRUE(hutch::Base64Decode(bare, &dec)) << bare;
    EXPECT_EQ(dec, bytes);
    bytes += static_cast<char>(n * 37 + 251);
  }
  std::string dec;
  EXPECT_TRUE(hutch::Base64Decode("-_-_", &dec));  // URL-safe alphabet
  EXPECT_EQ(dec, "\xfb\xff\xbf");
  EXPECT_FALSE(hutch::Base64Decode("aGk=aGk=", &dec));  // '=' inside
  EXPECT_FALSE(hutch::Base64Decode("aGkK!", &dec));     // stray character
  EXPECT_FALSE(hutch::Base64Decode("aGkKa", &dec));     // a lone trailing character
  EXPECT_FALSE(hutch::Base64Decode("aG k", &dec));      // whitespace is not skipped
}
