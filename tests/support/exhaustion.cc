#include "tests/support/exhaustion.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

#include <openssl/evp.h>

#include "tests/support/hostile.h"

namespace hutch::testing {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const char* p, size_t n) { EVP_DigestUpdate(ctx_, p, n); }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
      out += kHex[md[i] >> 4];
      out += kHex[md[i] & 15];
    }
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

void StdoutFloodWithSlowReader(uint64_t bytes) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  const size_t rss_before = s.RssBytes();
  RssWatch watch(s);
  uint64_t got = 0;
  int events = 0;
  std::string last_event;
  json exit;
  auto c = s.Client();
  const auto t0 = Clock::now();
  const json body = {{"cmd", "head -c " + std::to_string(bytes) + " /dev/zero | tr '\\0' x"},
                     {"timeout_seconds", 3600}};
  auto r = c.Sse("/v1/sandboxes/" + id + "/exec/stream", body, [&](const client::SseEvent& e) {
    ++events;
    last_event = e.event;
    auto j = json::parse(e.data, nullptr, false);
    if (e.event == "stdout" && j.is_object()) {
      if (j.contains("b64")) got += client::Base64Decode(j["b64"].get<std::string>()).size();
      else got += j.value("text", std::string()).size();
    }
    if (e.event == "exit") exit = j;
    // The slow reader: every event costs it a millisecond.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return true;
  });
  watch.Stop();
  const double secs = SecondsSince(t0);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(got, bytes);
  EXPECT_EQ(last_event, "exit");
  EXPECT_EQ(exit.is_object() ? exit.value("exit_code", -1) : -1, 0) << exit.dump();
  std::cout << bytes / kMiB << " MiB of stdout through a slow reader: " << events << " events in "
            << secs << " s; hutchd RSS " << rss_before / kMiB << " MiB before, peak "
            << watch.max() / kMiB << " MiB\n";
  ::testing::Test::RecordProperty("hutchd_rss_before_mb", static_cast<int>(rss_before / kMiB));
  ::testing::Test::RecordProperty("hutchd_rss_peak_mb", static_cast<int>(watch.max() / kMiB));
  EXPECT_TRUE(RssWithinBound(rss_before, watch.max()))
      << "hutchd RSS grew from " << rss_before / kMiB << " MiB to " << watch.max() / kMiB << " MiB";
  // The server and the sandbox are fine afterwards.
  EXPECT_EQ(StdoutOf(s.Exec(id, "echo ok")), "ok\n");
}

void UploadDownloadRoundTrip(uint64_t bytes) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  // Room for the file on the sandbox's disk; its memory (the default)
  // need not hold it (issue 32 #8: the disk is no tmpfs any more).
  const int64_t mb = static_cast<int64_t>(bytes / kMiB) + 128;
  std::string id = s.CreateSandbox({{"disk_mb", mb}});
  ASSERT_FALSE(id.empty());
  auto c = s.Client();
  const std::string target = "/v1/sandboxes/" + id + "/fs?path=/home/user/big.bin";
  const size_t rss_before = s.RssBytes();
  RssWatch watch(s);
  Sha256 sent_hash;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  uint64_t produced = 0;
  const auto t0 = Clock::now();
  auto up = c.Upload(target, bytes, [&](char* buf, size_t max) {
    size_t n = max & ~size_t{7};
    if (n == 0) n = max;
    for (size_t i = 0; i < n; i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(buf + i, &x, std::min<size_t>(8, n - i));
    }
    sent_hash.Update(buf, n);
    produced += n;
    return n;
  });
  const double up_secs = SecondsSince(t0);
  ASSERT_EQ(up.status, 201) << up.body;
  EXPECT_EQ(up.json()["size"], bytes);
  EXPECT_EQ(produced, bytes);
  const std::string want = sent_hash.Hex();
  Sha256 got_hash;
  uint64_t received = 0;
  const auto t1 = Clock::now();
  auto down = c.Download(target, [&](const char* p, size_t n) {
    got_hash.Update(p, n);
    received += n;
  });
  const double down_secs = SecondsSince(t1);
  watch.Stop();
  EXPECT_EQ(down.status, 200) << down.body;
  EXPECT_EQ(received, bytes);
  EXPECT_EQ(got_hash.Hex(), want);
  EXPECT_GT(watch.samples(), 5);
  std::cout << bytes / kMiB << " MiB up in " << up_secs << " s, down in " << down_secs
            << " s; hutchd RSS " << rss_before / kMiB << " MiB before, peak " << watch.max() / kMiB
            << " MiB over " << watch.samples() << " samples\n";
  ::testing::Test::RecordProperty("hutchd_rss_before_mb", static_cast<int>(rss_before / kMiB));
  ::testing::Test::RecordProperty("hutchd_rss_peak_mb", static_cast<int>(watch.max() / kMiB));
  EXPECT_TRUE(RssWithinBound(rss_before, watch.max()))
      << "hutchd RSS peaked at " << watch.max() / kMiB << " MiB (before: " << rss_before / kMiB
      << " MiB)";
  auto r = s.Exec(id, "sha256sum /home/user/big.bin", 600);
  EXPECT_EQ(StdoutOf(r).substr(0, 64), want) << r.dump();
}

int OpenSseStream(int port, const std::string& key, const std::string& target, int* status) {
  *status = 0;
  int fd = RawConnect(port);
  if (fd < 0) return -1;
  const std::string req = "GET " + target +
                          " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key +
                          "\r\nAccept: text/event-stream\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return -1;
  }
  std::string got;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (got.find("\r\n\r\n") == std::string::npos) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[2048];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  if (got.rfind("HTTP/1.1 ", 0) == 0 && got.size() >= 12) *status = std::atoi(got.c_str() + 9);
  if (*status != 200) {
    close(fd);
    return -1;
  }
  return fd;
}

void ManyOpenSseStreams(int n) {
  // The client's side needs n fds as well (and hutchd, which inherits the
  // limit, n plus its own).
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur < static_cast<rlim_t>(n) + 2048)
    GTEST_SKIP() << "RLIMIT_NOFILE " << rl.rlim_cur << " is too small for " << n << " streams";
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  std::string neighbour = s.CreateSandbox();
  auto c = s.Client();
  auto p =
      c.Json("POST", "/v1/sandboxes/" + id + "/processes", {{"cmd", "echo started; sleep 3600"}});
  ASSERT_EQ(p.status, 201) << p.body;
  const std::string target = "/v1/sandboxes/" + id + "/processes/" +
                             std::to_string(p.json()["pid"].get<int>()) + "/stream";
  // Each pooled disk holds fds: the baseline waits for the pool to be full.
  ASSERT_TRUE(s.WaitForPoolsFilled());
  const size_t fds_before = FdCount(s.pid());
  const size_t rss_before = s.RssBytes();
  std::vector<int> socks;
  std::map<int, int> statuses;
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    int st = 0;
    int fd = OpenSseStream(s.port(), s.key(), target, &st);
    ++statuses[st];
    if (fd >= 0) socks.push_back(fd);
  }
  const double open_secs = SecondsSince(t0);
  EXPECT_EQ(statuses[200], n) << "statuses: " << ::testing::PrintToString(statuses);
  const size_t fds_open = FdCount(s.pid());
  const size_t rss_open = s.RssBytes();
  std::cout << n << " SSE streams open in " << open_secs << " s; hutchd fds " << fds_before
            << " -> " << fds_open << ", RSS " << rss_before / kMiB << " -> " << rss_open / kMiB
            << " MiB ("
            << (rss_open > rss_before ? (rss_open - rss_before) / static_cast<size_t>(n) : 0)
            << " bytes/stream)\n";
  ::testing::Test::RecordProperty("streams", n);
  ::testing::Test::RecordProperty(
      "hutchd_rss_delta_mb", static_cast<int>((rss_open - std::min(rss_open, rss_before)) / kMiB));
  // hutchd keeps serving everything else meanwhile.
  EXPECT_EQ(c.Request("GET", "/healthz").status, 200);
  EXPECT_EQ(StdoutOf(s.Exec(neighbour, "echo ok")), "ok\n");
  int st = 0;
  int one_more = OpenSseStream(s.port(), s.key(), target, &st);
  EXPECT_EQ(st, 200);
  if (one_more >= 0) close(one_more);
  for (int fd : socks) close(fd);
  // Closing them gives hutchd's fds back (each stream holds its socket).
  size_t fds_after = FdCount(s.pid());
  for (int i = 0; i < 300 && fds_after > fds_before + 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fds_after = FdCount(s.pid());
  }
  EXPECT_LE(fds_after, fds_before + 8)
      << "hutchd fds: " << fds_before << " before, " << fds_after << " after";
  EXPECT_EQ(StdoutOf(s.Exec(id, "pgrep -xc sleep")), "1\n")
      << "the followed process must outlive its readers";
}

}  // namespace hutch::testing
