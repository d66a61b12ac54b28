// The E2B dialect's pure parts: Connect envelopes and error codes, the
// proto3 JSON mapping, multipart and gzip streaming, key forms, watch
// diffs. (The SDK itself is driven by tests/compat/e2b.)
#include <gtest/gtest.h>

#include <random>

#include "api/common/multipart.h"
#include "api/e2b/connect_envelope.h"
#include "api/e2b/dir_watch.h"
#include "api/e2b/e2b_auth.h"
#include "api/e2b/gzip_stream.h"
#include "api/e2b/proto_json.h"
#include "auth/credentials.h"
#include "auth/sandbox_token.h"
#include "common/sha256.h"

namespace hutch::api::e2b {
namespace {

// The value of a Result the test expects to be ok.
template <class T>
T V(Result<T> r) {
  EXPECT_TRUE(r.ok());
  return std::move(r).value();
}

TEST(ConnectEnvelope, EncodesFlagAndBigEndianLength) {
  std::string e = EncodeEnvelope(0, "{\"a\":1}");
  ASSERT_EQ(e.size(), 5u + 7u);
  EXPECT_EQ(static_cast<uint8_t>(e[0]), 0);
  EXPECT_EQ(e.substr(1, 4), std::string("\0\0\0\x07", 4));
  EXPECT_EQ(e.substr(5), "{\"a\":1}");
  std::string big = EncodeEnvelope(0, std::string(0x010203, 'x'));
  EXPECT_EQ(big.substr(1, 4), std::string("\0\x01\x02\x03", 4));
}

TEST(ConnectEnvelope, EndStreamCarriesEmptyObjectOrError) {
  std::string ok = EndStreamEnvelope(nullptr);
  EXPECT_EQ(static_cast<uint8_t>(ok[0]), kEnvelopeEndStream);
  EXPECT_EQ(ok.substr(5), "{}");
  Error e = MakeError(Code::kProcessNotFound, "no such process");
  std::string bad = EndStreamEnvelope(&e);
  auto j = nlohmann::json::parse(bad.substr(5));
  EXPECT_EQ(j["error"]["code"], "not_found");
  EXPECT_EQ(j["error"]["message"], "no such process");
}

TEST(ConnectEnvelope, ReaderReassemblesSplitInput) {
  std::string stream = DataEnvelope(nlohmann::json{{"x", 1}}) + EndStreamEnvelope(nullptr);
  EnvelopeReader r(1 << 20);
  std::vector<Envelope> got;
  for (char c : stream) {  // one byte at a time
    r.Feed(std::string_view(&c, 1));
    auto n = r.Next();
    ASSERT_TRUE(n.ok());
    if (n.value()) got.push_back(*n.value());
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].flags, 0);
  EXPECT_EQ(got[0].payload, "{\"x\":1}");
  EXPECT_EQ(got[1].flags, kEnvelopeEndStream);
  EXPECT_EQ(r.pending(), 0u);
}

TEST(ConnectEnvelope, ReaderRejectsOversizedLength) {
  EnvelopeReader r(10);
  r.Feed(std::string("\0\0\0\0\x0b", 5));
  auto n = r.Next();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, Code::kPayloadTooLarge);
}

TEST(ConnectEnvelope, ErrorCodesAndStatuses) {
  EXPECT_STREQ(ConnectCodeName(Code::kFileNotFound), "not_found");
  EXPECT_STREQ(ConnectCodeName(Code::kConflict), "already_exists");
  EXPECT_STREQ(ConnectCodeName(Code::kInvalidRequest), "invalid_argument");
  EXPECT_STREQ(ConnectCodeName(Code::kUnauthorized), "unauthenticated");
  EXPECT_STREQ(ConnectCodeName(Code::kNotSupported), "unimplemented");
  EXPECT_EQ(ConnectHttpStatus("not_found"), 404);
  EXPECT_EQ(ConnectHttpStatus("already_exists"), 409);
  EXPECT_EQ(ConnectHttpStatus("invalid_argument"), 400);
  EXPECT_EQ(ConnectHttpStatus("unauthenticated"), 401);
  EXPECT_EQ(ConnectHttpStatus("unimplemented"), 501);
  EXPECT_EQ(ConnectHttpStatus("unavailable"), 503);
  EXPECT_EQ(ConnectHttpStatus("internal"), 500);
}

TEST(ProtoJson, ReadsScalarsLeniently) {
  auto m = nlohmann::json::parse(
      R"({"a":"42","b":7,"c":null,"d":true,"e":"-9000000000","f":4294967295})");
  EXPECT_EQ(V(PjUint32(m, "a")), 42u);
  EXPECT_EQ(V(PjUint32(m, "b")), 7u);
  EXPECT_EQ(V(PjUint32(m, "c")), 0u);        // null = default
  EXPECT_EQ(V(PjUint32(m, "missing")), 0u);  // absent = default
  EXPECT_EQ(V(PjUint32(m, "f")), 4294967295u);
  EXPECT_TRUE(V(PjBool(m, "d")));
  EXPECT_EQ(V(PjInt64(m, "e")), -9000000000);
  EXPECT_FALSE(PjUint32(m, "e").ok());  // negative
  EXPECT_FALSE(PjString(m, "b").ok());  // wrong type
  EXPECT_FALSE(PjBool(m, "a").ok());
}

TEST(ProtoJson, BytesAcceptBothAlphabetsAndOptionalPadding) {
  auto m = nlohmann::json::parse(
      R"({"std":"aGkK","pad":"aGk=","nopad":"aGk","url":"-_8=","bad":"a$b"})");
  EXPECT_EQ(V(PjBytes(m, "std")), "hi\n");
  EXPECT_EQ(V(PjBytes(m, "pad")), "hi");
  EXPECT_EQ(V(PjBytes(m, "nopad")), "hi");
  EXPECT_EQ(V(PjBytes(m, "url")), std::string("\xfb\xff", 2));
  EXPECT_FALSE(PjBytes(m, "bad").ok());
  EXPECT_EQ(PjBase64("hi\n"), "aGkK");
  EXPECT_EQ(PjBase64("hi"), "aGk=");
  EXPECT_EQ(PjBase64(""), "");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  nlohmann::json rt = {{"b", PjBase64(all)}};
  EXPECT_EQ(V(PjBytes(rt, "b")), all);
}

TEST(ProtoJson, EnumsByNameOrNumber) {
  const std::vector<std::pair<const char*, int>> names = {{"SIGNAL_UNSPECIFIED", 0},
                                                          {"SIGNAL_SIGKILL", 9}};
  auto m = nlohmann::json::parse(R"({"s":"SIGNAL_SIGKILL","n":15,"x":"SIGNAL_NOPE"})");
  EXPECT_EQ(V(PjEnum(m, "s", names)), 9);
  EXPECT_EQ(V(PjEnum(m, "n", names)), 15);
  EXPECT_EQ(V(PjEnum(m, "absent", names)), 0);
  EXPECT_FALSE(PjEnum(m, "x", names).ok());
}

TEST(ProtoJson, MapsListsMessagesAndTimestamps) {
  auto m = nlohmann::json::parse(
      R"({"envs":{"A":"1"},"args":["-l","-c"],"sub":{"pid":3},"bad":{"A":1}})");
  auto envs = PjStringMap(m, "envs");
  ASSERT_TRUE(envs.ok());
  ASSERT_EQ(envs->size(), 1u);
  EXPECT_EQ((*envs)[0].second, "1");
  EXPECT_FALSE(PjStringMap(m, "bad").ok());
  EXPECT_EQ(PjStringList(m, "args")->size(), 2u);
  EXPECT_EQ(V(PjMessage(m, "sub"))["pid"], 3);
  EXPECT_TRUE(PjMessage(m, "none")->empty());
  EXPECT_EQ(PjTimestamp(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(PjTimestamp(1700000000, 500000000), "2023-11-14T22:13:20.500Z");
  EXPECT_EQ(PjInt64String(int64_t{1} << 40), "1099511627776");
}

TEST(E2bAuth, KeyFormsAndTokens) {
  auto c = KeyCandidates("e2b_00ff");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], "e2b_00ff");
  EXPECT_EQ(c[1], "00ff");
  EXPECT_EQ(c[2], "hk_00ff");
  EXPECT_EQ(KeyCandidates("plain").size(), 1u);
  EXPECT_TRUE(KeyCandidates("").empty());
  using auth::SandboxToken;
  using auth::SandboxTokenKind;
  const auto envd = SandboxTokenKind::kE2bEnvd;
  const std::string k = "0123456789abcdef0123456789abcdef";
  EXPECT_EQ(SandboxToken(envd, k, "h", "sb_1"), SandboxToken(envd, k, "h", "sb_1"));
  EXPECT_NE(SandboxToken(envd, k, "h", "sb_1"), SandboxToken(envd, k, "h", "sb_2"));
  EXPECT_NE(SandboxToken(envd, k, "h", "sb_1"), SandboxToken(envd, k, "g", "sb_1"));
  // Another server secret, other tokens: a copy of state.db mints none.
  EXPECT_NE(SandboxToken(envd, k, "h", "sb_1"), SandboxToken(envd, k + "x", "h", "sb_1"));
  EXPECT_EQ(SandboxToken(envd, "", "h", "sb_1"), "");
  // HMAC-SHA-256(secret, label \n owner \n id), byte for byte (vectors
  // from Python's hmac module).
  EXPECT_EQ(SandboxToken(envd, k, "h", "sb_1"),
            "a85710b9f10f55c6904c86d1f9bf5883ac742f934299da55166bdd0185085974");
  EXPECT_EQ(SandboxToken(SandboxTokenKind::kE2bTraffic, k, "h", "sb_1"),
            "5ed12ec0c3a6b755f6b6a0ed9cecbaf516fec2ac66b761af836c62cc942bad53");
  EXPECT_EQ(SandboxToken(SandboxTokenKind::kOpenSandboxExecd, k, "h", "sb_1"),
            "9d4381e63329e4f93cebfd1201313fd084f9982cec37bcd31cae889495b067a0");
  EXPECT_TRUE(auth::SandboxTokenMatches(envd, k, SandboxToken(envd, k, "h", "sb_1"), "h", "sb_1"));
  EXPECT_FALSE(auth::SandboxTokenMatches(envd, k, "", "h", "sb_1"));
  EXPECT_FALSE(auth::SandboxTokenMatches(envd, "", "", "h", "sb_1"));
  EXPECT_EQ(auth::BearerToken("bearer abc"), "abc");
  EXPECT_EQ(auth::BearerToken("Bearer "), "");
  EXPECT_EQ(auth::BearerToken("Basic abc"), "");
  EXPECT_EQ(BasicAuthUser("Basic dXNlcjo="), "user");  // "user:"
  EXPECT_EQ(BasicAuthUser("basic cm9vdDo="), "root");
  EXPECT_EQ(BasicAuthUser("Bearer x"), "");
  EXPECT_EQ(BasicAuthUser(""), "");
}

std::vector<MultipartReader::Event> FeedAll(MultipartReader& r, const std::string& body,
                                            size_t step) {
  std::vector<MultipartReader::Event> all;
  for (size_t i = 0; i < body.size(); i += step) {
    auto ev = r.Feed(std::string_view(body).substr(i, step));
    EXPECT_TRUE(ev.ok());
    if (ev.ok()) all.insert(all.end(), ev->begin(), ev->end());
  }
  return all;
}

TEST(Multipart, StreamsPartsAcrossEveryChunkSplit) {
  EXPECT_EQ(MultipartBoundary("multipart/form-data; boundary=----formdata-x1"), "----formdata-x1");
  EXPECT_EQ(MultipartBoundary("multipart/form-data; boundary=\"q b\""), "q b");
  EXPECT_EQ(MultipartBoundary("application/json"), "");
  std::string payload1 = "line1\r\n--not-the-boundary\r\n\r\n--b";  // near-misses inside the data
  std::string payload2(3000, '\0');
  std::mt19937 rng(7);
  for (auto& c : payload2) c = static_cast<char>(rng());
  const std::string body =
      "preamble\r\n--bX\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"/home/user/a.txt\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n" +
      payload1 + "\r\n--bX\r\n" +
      "Content-Disposition: form-data; name=\"file\"; filename=\"rel/b \\\"q\\\".bin\"\r\n\r\n" +
      payload2 + "\r\n--bX--\r\nepilogue";
  for (size_t step : {size_t{1}, size_t{3}, size_t{64}, body.size()}) {
    MultipartReader r("bX");
    auto ev = FeedAll(r, body, step);
    EXPECT_TRUE(r.done()) << step;
    std::vector<std::string> names, data(1);
    for (auto& e : ev) {
      if (e.kind == MultipartReader::Event::kPartBegin) names.push_back(e.filename);
      else if (e.kind == MultipartReader::Event::kData) data.back() += e.data;
      else data.emplace_back();
    }
    ASSERT_EQ(names.size(), 2u) << step;
    EXPECT_EQ(names[0], "/home/user/a.txt");
    EXPECT_EQ(names[1], "rel/b \"q\".bin");
    ASSERT_EQ(data.size(), 3u);
    EXPECT_EQ(data[0], payload1) << step;
    EXPECT_EQ(data[1], payload2) << step;
  }
}

TEST(Multipart, BodyStartingWithBoundaryAndMalformedLine) {
  MultipartReader r("b");
  auto ev = FeedAll(
      r, "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nX\r\n--b--",
      5);
  EXPECT_TRUE(r.done());
  ASSERT_GE(ev.size(), 3u);
  MultipartReader bad("b");
  auto e = bad.Feed("--bXYZ");
  EXPECT_FALSE(e.ok());
}

TEST(Gzip, RoundTripInPieces) {
  std::string plain;
  for (int i = 0; i < 200000; ++i) plain += static_cast<char>('a' + i % 7);
  GzipDeflater d;
  std::string z;
  for (size_t i = 0; i < plain.size(); i += 10000)
    z += d.Feed(std::string_view(plain).substr(i, 10000));
  z += d.Finish();
  EXPECT_LT(z.size(), plain.size() / 10);
  GzipInflater inf;
  std::string back;
  for (size_t i = 0; i < z.size(); i += 777) {
    auto p = inf.Feed(std::string_view(z).substr(i, 777));
    ASSERT_TRUE(p.ok());
    back += *p;
  }
  EXPECT_TRUE(inf.finished());
  EXPECT_EQ(back, plain);
  GzipInflater junk;
  EXPECT_FALSE(junk.Feed("definitely not gzip").ok());
}

TEST(DirWatch, DiffsListingsIntoEvents) {
  auto listing = [](std::vector<nlohmann::json> entries) {
    return nlohmann::json{{"entries", entries}};
  };
  auto entry = [](const std::string& path, const std::string& type, int64_t size, int64_t mtime,
                  int mode) {
    return nlohmann::json{{"path", path},   {"name", path.substr(path.rfind('/') + 1)},
                          {"type", type},   {"size", size},
                          {"mtime", mtime}, {"mode", mode}};
  };
  WatchSnapshot a = SnapshotFromListing(
      listing({entry("/w/old", "file", 1, 10, 0644), entry("/w/keep", "file", 1, 10, 0644),
               entry("/w/d", "dir", 0, 10, 0755)}),
      "/w");
  WatchSnapshot b = SnapshotFromListing(
      listing({entry("/w/keep", "file", 5, 11, 0600), entry("/w/d", "dir", 0, 10, 0755),
               entry("/w/new", "file", 3, 12, 0644), entry("/w/empty", "file", 0, 12, 0644)}),
      "/w/");
  ASSERT_EQ(b.count("keep"), 1u);
  auto ev = DiffSnapshots(a, b);
  auto has = [&](const std::string& n, int t) {
    for (auto& e : ev)
      if (e.name == n && e.type == t) return true;
    return false;
  };
  EXPECT_TRUE(has("old", kWatchRemove));
  EXPECT_TRUE(has("keep", kWatchWrite));
  EXPECT_TRUE(has("keep", kWatchChmod));
  EXPECT_TRUE(has("new", kWatchCreate));
  EXPECT_TRUE(has("new", kWatchWrite));
  EXPECT_TRUE(has("empty", kWatchCreate));
  EXPECT_FALSE(has("empty", kWatchWrite));
  EXPECT_FALSE(has("d", kWatchWrite));
  EXPECT_EQ(ev.size(), 6u);
  EXPECT_STREQ(WatchEventTypeName(kWatchCreate), "EVENT_TYPE_CREATE");
  EXPECT_TRUE(DiffSnapshots(b, b).empty());
}

}  // namespace
}  // namespace hutch::api::e2b
