// What a blocking exec keeps for its answer (issue 32 #3): the encoding
// rule (text vs base64), the per-stream cap counted after encoding, the
// server-wide budget with its room for small answers, and UTF-8 checked
// across pieces.
#include <gtest/gtest.h>

#include <string>

#include "api/common/kept_output.h"
#include "api/common/output_budget.h"
#include "api/common/utf8.h"

using namespace hutch::api;

namespace {

std::string Joined(KeptOutput& k) {
  std::string all;
  for (auto& c : k.TakeChunks(SIZE_MAX)) all += c;
  return all;
}

}  // namespace

TEST(Utf8Check, FollowsCharactersAcrossPieces) {
  Utf8Check c;
  EXPECT_EQ(c.Feed("ab\xe2"), std::string_view::npos);
  EXPECT_EQ(c.pending(), 1u);
  EXPECT_EQ(c.Feed("\x82"), std::string_view::npos);
  EXPECT_EQ(c.Feed("\xac!"), std::string_view::npos);
  EXPECT_TRUE(c.complete());
  EXPECT_EQ(c.Feed("ok\xff"), 2u);
  EXPECT_FALSE(c.valid());
  Utf8Check d;
  EXPECT_EQ(d.Feed("\xe2"), std::string_view::npos);
  EXPECT_EQ(d.Feed("x"), 0u);  // the character began in the last piece
  EXPECT_FALSE(d.valid());
}

TEST(KeptOutput, TextStaysTextAndControlBytesGoBase64) {
  OutputBudget b(0);
  OutputBudget::Lease l(&b);
  KeptOutput text(1 << 20, &l);
  text.Add("hello \"world\"\n\x1b[1mbold\x1b[0m\n");
  text.Finish();
  EXPECT_TRUE(text.text());
  KeptOutput ctl(1 << 20, &l);
  ctl.Add(std::string(1000, '\x01'));
  ctl.Finish();
  EXPECT_FALSE(ctl.text());
  EXPECT_EQ(ctl.encoded_size(), KeptOutput::Base64Size(1000));
  KeptOutput bin(1 << 20, &l);
  bin.Add("a\xff");
  bin.Finish();
  EXPECT_FALSE(bin.text());
  // A short output with a few control characters is still text.
  KeptOutput few(1 << 20, &l);
  few.Add("\x01\x02\x03");
  few.Finish();
  EXPECT_TRUE(few.text());
  // Output ending inside a character is not text.
  KeptOutput cut(1 << 20, &l);
  cut.Add("x\xe2\x82");
  cut.Finish();
  EXPECT_FALSE(cut.text());
}

TEST(KeptOutput, CapCountsBytesAfterEncoding) {
  OutputBudget b(0);
  OutputBudget::Lease l(&b);
  KeptOutput text(1000, &l);
  for (int i = 0; i < 10; ++i) text.Add(std::string(300, 'b'));
  text.Finish();
  EXPECT_TRUE(text.text());
  EXPECT_TRUE(text.truncated());
  EXPECT_EQ(text.total(), 3000u);
  EXPECT_EQ(text.encoded_size(), 1000u);
  EXPECT_EQ(Joined(text), std::string(1000, 'b'));

  KeptOutput ctl(1000, &l);
  for (int i = 0; i < 10; ++i) ctl.Add(std::string(300, '\x01'));
  ctl.Finish();
  EXPECT_FALSE(ctl.text());
  EXPECT_TRUE(ctl.truncated());
  EXPECT_LE(ctl.encoded_size(), 1000u);
  EXPECT_GE(ctl.kept(), 700u);  // ~3/4 of the cap as raw bytes
}

TEST(KeptOutput, CutMovesBackToACharacterBoundary) {
  OutputBudget b(0);
  OutputBudget::Lease l(&b);
  KeptOutput k(10, &l);
  k.Add("abcdefghi\xe2\x82\xac");  // the euro sign would straddle the cap
  k.Finish();
  EXPECT_TRUE(k.text());
  EXPECT_TRUE(k.truncated());
  EXPECT_EQ(Joined(k), "abcdefghi");
}

TEST(OutputBudget, BoundsAllRequestsAndKeepsRoomForSmallAnswers) {
  OutputBudget b(1 << 20);
  OutputBudget::Lease big1(&b), big2(&b), small(&b);
  KeptOutput a(1 << 20, &big1), c(1 << 20, &big2);
  for (int i = 0; i < 20; ++i) a.Add(std::string(64 << 10, 'x'));
  for (int i = 0; i < 20; ++i) c.Add(std::string(64 << 10, 'x'));
  a.Finish();
  c.Finish();
  EXPECT_TRUE(a.truncated());
  EXPECT_TRUE(c.truncated());
  // Past its first 64 KiB, no answer grows the total beyond three quarters.
  EXPECT_LE(b.used(), (1u << 20) - (1u << 18) + 2 * OutputBudget::kSmallAnswer);
  EXPECT_GT(a.kept(), 0u);
  // A small answer still fits, from the quarter kept for them.
  KeptOutput s(1 << 20, &small);
  s.Add("ok\n");
  s.Finish();
  EXPECT_FALSE(s.truncated());
  EXPECT_EQ(Joined(s), "ok\n");
  // Leases give everything back.
  {
    OutputBudget::Lease l(&b);
    EXPECT_TRUE(l.TryGrow(1000));
    EXPECT_EQ(l.held(), 1000u);
  }
  const size_t before = b.used();
  EXPECT_EQ(small.held(), 4u);  // "ok\n" is 4 bytes in JSON
  small.Release(small.held());
  EXPECT_EQ(b.used(), before - 4);
}
