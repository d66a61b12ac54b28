// Frame encoding and the incremental reader (any split, limits, errors).
#include <gtest/gtest.h>

#include "wire/frame.h"

using namespace hutch;
using namespace hutch::wire;

TEST(FrameReader, ParsesFramesSplitAtEveryByte) {
  std::string bytes =
      Encode(Type::kStdout, 7, "hello") + Encode(Type::kExit, 7, "{}") + EncodeCredit(7, 123456);
  FrameReader r;
  std::vector<Frame> got;
  for (char c : bytes) {
    ASSERT_TRUE(r.Feed(&c, 1).ok());
    Frame f;
    while (r.Next(&f)) got.push_back(f);
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].type, Type::kStdout);
  EXPECT_EQ(got[0].stream, 7u);
  EXPECT_EQ(got[0].payload, "hello");
  EXPECT_EQ(got[1].type, Type::kExit);
  EXPECT_EQ(DecodeCredit(got[2].payload), 123456u);
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(FrameReader, CarriesBinaryPayloadIntact) {
  std::string payload;
  for (int i = 0; i < 70000; ++i) payload.push_back(static_cast<char>(i * 31));
  std::string bytes = Encode(Type::kFsWriteData, 1, payload);
  FrameReader r;
  ASSERT_TRUE(r.Feed(bytes.data(), bytes.size()).ok());
  Frame f;
  ASSERT_TRUE(r.Next(&f));
  EXPECT_EQ(f.payload, payload);
}

TEST(FrameReader, RejectsOversizedLength) {
  std::string h = Encode(Type::kStdout, 1, "");
  h[0] = h[1] = h[2] = static_cast<char>(0xff);
  h[3] = 0x7f;
  FrameReader r;
  EXPECT_FALSE(r.Feed(h.data(), h.size()).ok());
  EXPECT_TRUE(r.failed());
  EXPECT_FALSE(r.Feed("x", 1).ok());
}

TEST(FrameReader, RejectsUnknownTypeAndReservedBits) {
  std::string a = Encode(Type::kStdout, 1, "x");
  a[4] = static_cast<char>(200);
  FrameReader r1;
  EXPECT_FALSE(r1.Feed(a.data(), a.size()).ok());
  std::string b = Encode(Type::kStdout, 1, "x");
  b[6] = 1;
  FrameReader r2;
  EXPECT_FALSE(r2.Feed(b.data(), b.size()).ok());
}

TEST(FrameCredit, MalformedCreditDecodesToZero) {
  EXPECT_EQ(DecodeCredit("abc"), 0u);
  EXPECT_EQ(DecodeCredit(""), 0u);
}

TEST(FrameProcStdin, RoundTripsBinaryBytesAndCloseFlag) {
  const std::string bytes("a\0b\xff", 4);
  std::string p = EncodeProcStdin(4242, true, bytes);
  ProcStdin in;
  ASSERT_TRUE(DecodeProcStdin(p, &in));
  EXPECT_EQ(in.pid, 4242u);
  EXPECT_TRUE(in.close);
  EXPECT_EQ(in.bytes, bytes);
  ASSERT_TRUE(DecodeProcStdin(EncodeProcStdin(7, false, ""), &in));
  EXPECT_EQ(in.pid, 7u);
  EXPECT_FALSE(in.close);
  EXPECT_TRUE(in.bytes.empty());
}

TEST(FrameProcStdin, RejectsShortPayloadAndUnknownFlags) {
  ProcStdin in;
  EXPECT_FALSE(DecodeProcStdin("abcd", &in));
  std::string p = EncodeProcStdin(1, false, "x");
  p[4] = 2;
  EXPECT_FALSE(DecodeProcStdin(p, &in));
}

TEST(FrameReader, AcceptsEveryProcessAndPtyType) {
  for (Type t : {Type::kProcStart, Type::kProcList, Type::kProcStatus, Type::kProcAttach,
                 Type::kProcStdin, Type::kProcSignal, Type::kPtyStart, Type::kPtyResize,
                 Type::kProcResult, Type::kProcDropped, Type::kIdentify, Type::kIdentifyResult}) {
    std::string b = Encode(t, 3, "{}");
    FrameReader r;
    ASSERT_TRUE(r.Feed(b.data(), b.size()).ok()) << static_cast<int>(t);
    Frame f;
    ASSERT_TRUE(r.Next(&f));
    EXPECT_EQ(f.type, t);
  }
}
