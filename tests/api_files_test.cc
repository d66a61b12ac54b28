// The file API end to end: big streamed transfers with flat server memory,
// Range, list/stat/mkdir/move/delete and their JSON errors, the disk quota,
// and the promise that no path, symlink or race reaches the host's files.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/test_server.h"

using namespace std::string_literals;
using hutch::client::Response;
using hutch::testing::TestServer;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

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

// Samples hutchd's RSS every 50 ms until destroyed; keeps the maximum.
class RssWatch {
 public:
  explicit RssWatch(const TestServer& s) : s_(s), t_([this] {
      while (!stop_) {
        size_t r = s_.RssBytes();
        if (r > max_) max_ = r;
        ++samples_;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }) {}
  ~RssWatch() { Stop(); }
  void Stop() {
    stop_ = true;
    if (t_.joinable()) t_.join();
  }
  size_t max() const { return max_; }
  int samples() const { return samples_; }

 private:
  const TestServer& s_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> max_{0};
  std::atomic<int> samples_{0};
  std::thread t_;
};

std::string RandomHex(size_t n) {
  std::random_device rd;
  std::mt19937_64 g(rd());
  std::string s;
  while (s.size() < n) s += "0123456789abcdef"[g() & 15];
  return s;
}

std::string Fs(const std::string& id, const std::string& path, const std::string& extra = "") {
  return "/v1/sandboxes/" + id + "/fs?path=" + path + extra;
}

std::string ReadHostFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every error is JSON with a stable code.
void ExpectError(const Response& r, int status, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  auto j = r.json();
  ASSERT_TRUE(j.is_object()) << "not JSON: " << r.body;
  EXPECT_EQ(j["code"], code) << r.body;
}

}  // namespace

TEST(ApiFiles, BigBinaryRoundTripStreamsWithFlatServerMemory) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox({{"disk_mb", 512}});
  ASSERT_FALSE(id.empty());
  auto c = s.Client();
  const uint64_t total = 200 * kMiB;
  const size_t rss_before = s.RssBytes();

  RssWatch watch(s);
  Sha256 sent_hash;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  uint64_t produced = 0;
  auto up = c.Upload(Fs(id, "/home/user/big.bin"), total, [&](char* buf, size_t max) {
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
  ASSERT_EQ(up.status, 201) << up.body;
  EXPECT_EQ(up.json()["size"], total);
  EXPECT_EQ(produced, total);
  const std::string want = sent_hash.Hex();

  Sha256 got_hash;
  uint64_t received = 0;
  auto down = c.Download(Fs(id, "/home/user/big.bin"), [&](const char* p, size_t n) {
    got_hash.Update(p, n);
    received += n;
  });
  watch.Stop();
  EXPECT_EQ(down.status, 200) << down.body;
  EXPECT_EQ(received, total);
  EXPECT_EQ(got_hash.Hex(), want);
  EXPECT_GT(watch.samples(), 5);
  std::cout << "200 MiB up+down: hutchd RSS " << rss_before / kMiB << " MiB before, peak " << watch.max() / kMiB
            << " MiB over " << watch.samples() << " samples\n";
  EXPECT_TRUE(hutch::testing::RssWithinBound(rss_before, watch.max())) << "hutchd RSS peaked at " << watch.max() / kMiB << " MiB (before: "
                                     << rss_before / kMiB << " MiB)";

  auto r = s.Exec(id, "sha256sum /home/user/big.bin");
  ASSERT_EQ(r["_status"], 200);
  EXPECT_EQ(r["stdout"].get<std::string>().substr(0, 64), want) << r.dump();
}

TEST(ApiFiles, RangeRequests) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  auto c = s.Client();
  const std::string data = "abcdefghijklmnopqrstuvwxyz";
  ASSERT_EQ(c.Request("PUT", Fs(id, "/home/user/abc.txt"), data).status, 201);

  struct Case {
    std::string range, body, content_range;
  };
  for (const Case& k : {Case{"bytes=0-9", "abcdefghij", "bytes 0-9/26"},
                        Case{"bytes=10-", "klmnopqrstuvwxyz", "bytes 10-25/26"},
                        Case{"bytes=-5", "vwxyz", "bytes 21-25/26"},
                        Case{"bytes=20-100", "uvwxyz", "bytes 20-25/26"},
                        Case{"bytes=-100", data, "bytes 0-25/26"}}) {
    auto r = c.Request("GET", Fs(id, "/home/user/abc.txt"), "", {{"Range", k.range}});
    EXPECT_EQ(r.status, 206) << k.range << ": " << r.body;
    EXPECT_EQ(r.body, k.body) << k.range;
    EXPECT_EQ(r.header("content-range"), k.content_range) << k.range;
    EXPECT_EQ(r.header("content-length"), std::to_string(k.body.size())) << k.range;
  }
  // Without Range: 200, the whole file, and ranges are advertised.
  auto whole = c.Request("GET", Fs(id, "/home/user/abc.txt"));
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.body, data);
  EXPECT_EQ(whole.header("accept-ranges"), "bytes");

  for (const char* past : {"bytes=26-", "bytes=26-30", "bytes=1000-2000"}) {
    auto r = c.Request("GET", Fs(id, "/home/user/abc.txt"), "", {{"Range", past}});
    ExpectError(r, 416, "range_not_satisfiable");
  }
  // A suffix range of length 0 is unsatisfiable (RFC 9110 §14.1.1): 416,
  // never a 206 with a malformed "Content-Range: bytes 26-25/26".
  {
    auto r = c.Request("GET", Fs(id, "/home/user/abc.txt"), "", {{"Range", "bytes=-0"}});
    ExpectError(r, 416, "range_not_satisfiable");
    EXPECT_EQ(r.header("content-range").find("26-25"), std::string::npos) << r.header("content-range");
  }
  // On an empty file a suffix range cannot be a 206 (it would need the
  // malformed "Content-Range: bytes 0--1/0"): 200 with the empty file, or 416.
  ASSERT_EQ(c.Request("PUT", Fs(id, "/home/user/empty.txt"), "").status, 201);
  {
    auto r = c.Request("GET", Fs(id, "/home/user/empty.txt"), "", {{"Range", "bytes=-5"}});
    EXPECT_TRUE(r.status == 200 || r.status == 416) << r.status << " Content-Range: " << r.header("content-range");
    EXPECT_EQ(r.header("content-range").find("0--1"), std::string::npos) << r.header("content-range");
    EXPECT_EQ(r.status == 200 ? r.body : "", "");
  }
  ExpectError(c.Request("GET", Fs(id, "/home/user/empty.txt"), "", {{"Range", "bytes=0-"}}), 416,
              "range_not_satisfiable");
  // The server keeps serving on the same connection.
  EXPECT_EQ(c.Request("GET", Fs(id, "/home/user/abc.txt")).body, data);
}

TEST(ApiFiles, ListStatMkdirMoveDeleteAndErrors) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  auto c = s.Client();
  const std::string base = "/v1/sandboxes/" + id + "/fs";

  // mkdir creates the parents.
  auto mk = c.Json("POST", base + "/mkdir", {{"path", "/home/user/t/a/b/c"}});
  ASSERT_EQ(mk.status, 201) << mk.body;
  EXPECT_EQ(mk.json()["type"], "dir");
  EXPECT_EQ(mk.json()["path"], "/home/user/t/a/b/c");
  // An existing dir is fine.
  EXPECT_EQ(c.Json("POST", base + "/mkdir", {{"path", "/home/user/t/a"}}).status, 201);

  // PUT creates parents and honours mode.
  auto put = c.Request("PUT", Fs(id, "/home/user/t/x/y/run.sh", "&mode=0755"), "#!/bin/sh\necho run\n");
  ASSERT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(put.json()["size"], 19);
  EXPECT_EQ(put.json()["path"], "/home/user/t/x/y/run.sh");
  ASSERT_EQ(c.Request("PUT", Fs(id, "/home/user/t/a/f.txt"), "12345").status, 201);

  auto st = c.Request("GET", base + "/stat?path=/home/user/t/x/y/run.sh");
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(st.json()["type"], "file");
  EXPECT_EQ(st.json()["size"], 19);
  EXPECT_EQ(st.json()["mode"], 0755);
  EXPECT_EQ(st.json()["name"], "run.sh");
  EXPECT_TRUE(st.json()["mtime"].is_string()) << st.body;
  EXPECT_EQ(s.Exec(id, "/home/user/t/x/y/run.sh")["stdout"], "run\n");
  st = c.Request("GET", base + "/stat?path=/home/user/t/x");
  ASSERT_EQ(st.status, 200);
  EXPECT_EQ(st.json()["type"], "dir");
  st = c.Request("GET", base + "/stat?path=/home/user/t/a/f.txt");
  EXPECT_EQ(st.json()["mode"], 0644);
  EXPECT_EQ(st.json()["size"], 5);

  // list: depth 1 shows children only, depth 2 one level more.
  auto names = [](const Response& r) {
    std::set<std::string> out;
    const nlohmann::json j = r.json();
    for (auto& e : j["entries"]) out.insert(e["path"].get<std::string>() + ":" + e["type"].get<std::string>());
    return out;
  };
  auto l1 = c.Request("GET", base + "/list?path=/home/user/t");
  ASSERT_EQ(l1.status, 200) << l1.body;
  EXPECT_EQ(names(l1), (std::set<std::string>{"/home/user/t/a:dir", "/home/user/t/x:dir"}));
  auto l2 = c.Request("GET", base + "/list?path=/home/user/t&depth=2");
  ASSERT_EQ(l2.status, 200) << l2.body;
  EXPECT_EQ(names(l2), (std::set<std::string>{"/home/user/t/a:dir", "/home/user/t/x:dir", "/home/user/t/a/b:dir",
                                              "/home/user/t/a/f.txt:file", "/home/user/t/x/y:dir"}));
  const nlohmann::json l2j = l2.json();
  for (auto& e : l2j["entries"]) {
    if (e["path"] == "/home/user/t/a/f.txt") {
      EXPECT_EQ(e["size"], 5);
      EXPECT_EQ(e["name"], "f.txt");
    }
  }
  ExpectError(c.Request("GET", base + "/list?path=/home/user/t&depth=0"), 400, "invalid_request");

  // move: the old path is gone, the new one holds the content; parents of
  // the target are created.
  auto mv = c.Json("POST", base + "/move", {{"from", "/home/user/t/a/f.txt"}, {"to", "/home/user/t/m/n/g.txt"}});
  ASSERT_EQ(mv.status, 200) << mv.body;
  EXPECT_EQ(mv.json()["path"], "/home/user/t/m/n/g.txt");
  ExpectError(c.Request("GET", base + "/stat?path=/home/user/t/a/f.txt"), 404, "file_not_found");
  EXPECT_EQ(c.Request("GET", Fs(id, "/home/user/t/m/n/g.txt")).body, "12345");
  ExpectError(c.Json("POST", base + "/move", {{"from", "/home/user/t/nope"}, {"to", "/home/user/t/z"}}), 404,
              "file_not_found");

  // delete: a file; a non-empty dir needs recursive; an empty dir does not.
  EXPECT_EQ(c.Request("DELETE", Fs(id, "/home/user/t/m/n/g.txt")).status, 204);
  ExpectError(c.Request("GET", base + "/stat?path=/home/user/t/m/n/g.txt"), 404, "file_not_found");
  EXPECT_EQ(c.Request("DELETE", Fs(id, "/home/user/t/m/n")).status, 204);
  ExpectError(c.Request("DELETE", Fs(id, "/home/user/t/a")), 409, "conflict");
  EXPECT_EQ(c.Request("GET", base + "/stat?path=/home/user/t/a/b/c").status, 200);
  ExpectError(c.Request("DELETE", Fs(id, "/home/user/t/a", "&recursive=yes")), 400, "invalid_request");
  EXPECT_EQ(c.Request("DELETE", Fs(id, "/home/user/t/a", "&recursive=true")).status, 204);
  ExpectError(c.Request("GET", base + "/stat?path=/home/user/t/a"), 404, "file_not_found");
  ExpectError(c.Request("DELETE", Fs(id, "/home/user/t/a")), 404, "file_not_found");

  // Errors.
  ExpectError(c.Request("GET", Fs(id, "/home/user/t/missing")), 404, "file_not_found");
  ExpectError(c.Request("GET", Fs(id, "/home/user/t/x")), 422, "is_a_directory");
  ExpectError(c.Request("GET", base + "/list?path=/home/user/t/x/y/run.sh"), 422, "not_a_directory");
  ExpectError(c.Request("GET", base + "/list?path=/home/user/t/nope"), 404, "file_not_found");
  ExpectError(c.Request("PUT", Fs(id, "/home/user/t/x"), "data"), 422, "is_a_directory");
  ExpectError(c.Request("PUT", Fs(id, "/home/user/t/x/y/run.sh/sub"), "data"), 422, "not_a_directory");
  ExpectError(c.Json("POST", base + "/mkdir", {{"path", "/home/user/t/x/y/run.sh"}}), 409, "conflict");
  ExpectError(c.Request("GET", Fs(id, "/home/user/t/a%00b")), 400, "invalid_request");
  ExpectError(c.Request("PUT", Fs(id, "/home/user/t/a%00b"), "x"), 400, "invalid_request");
  ExpectError(c.Request("DELETE", Fs(id, "/home/user/t/a%00b")), 400, "invalid_request");
  ExpectError(c.Request("GET", base + "/stat?path=/home/user/%00"), 400, "invalid_request");
  ExpectError(c.Request("GET", base), 400, "invalid_request");
  ExpectError(c.Request("PUT", base, "x"), 400, "invalid_request");
  ExpectError(c.Request("GET", base + "/list"), 400, "invalid_request");
  ExpectError(c.Request("GET", base + "/stat?path="), 400, "invalid_request");
  ExpectError(c.Json("POST", base + "/mkdir", nlohmann::json::object()), 400, "invalid_request");
  ExpectError(c.Json("POST", base + "/move", {{"from", "/home/user/t/x"}}), 400, "invalid_request");
  ExpectError(c.Request("PUT", Fs(id, "/home/user/t/m.txt", "&mode=999"), "x"), 400, "invalid_request");
  ExpectError(c.Request("GET", "/v1/sandboxes/sb_nope/fs?path=/etc/hostname"), 404, "sandbox_not_found");
  // Nothing above broke the sandbox.
  EXPECT_EQ(s.Exec(id, "echo ok")["stdout"], "ok\n");
}

TEST(ApiFiles, TraversalSymlinksAndRacesNeverReachHostFiles) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string token = RandomHex(16);
  const std::string name = "hutch-host-secret-" + token;
  const std::string marker = "/tmp/" + name;
  const std::string secret = "HOST-SECRET-" + RandomHex(32);
  {
    std::ofstream out(marker, std::ios::binary);
    out << secret;
  }
  ASSERT_EQ(ReadHostFile(marker), secret);
  struct Cleanup {
    std::string token;
    ~Cleanup() {
      std::error_code ec;
      for (auto& e : fs::directory_iterator("/tmp", ec))
        if (e.path().filename().string().find(token) != std::string::npos) fs::remove_all(e.path(), ec);
    }
  } cleanup{token};
  // The only host entries anywhere in /tmp or / that carry the token is the
  // marker, still with its own content.
  auto host_untouched = [&](const std::string& when) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const char* dir : {"/tmp", "/", "/root", "/home"})
      for (auto& e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().find(token) != std::string::npos) found.push_back(e.path().string());
    EXPECT_EQ(found, std::vector<std::string>{marker}) << when;
    EXPECT_EQ(ReadHostFile(marker), secret) << when;
  };

  std::string id = s.CreateSandbox();
  auto c = s.Client();
  const std::string base = "/v1/sandboxes/" + id + "/fs";
  auto never_host = [&](const Response& r, const std::string& what) {
    EXPECT_EQ(r.body.find(secret), std::string::npos) << what << " returned the host file";
    EXPECT_NE(r.status, 200) << what << ": " << r.body;
  };

  // `..` cannot climb above the sandbox's root.
  for (const std::string& p : {"/../../../../tmp/" + name, "../../../../../../tmp/" + name,
                               "/home/user/../../../../tmp/" + name, "/tmp/../../tmp/" + name}) {
    auto r = c.Request("GET", Fs(id, p));
    never_host(r, "GET " + p);
    ExpectError(r, 404, "file_not_found");
  }

  auto setup = s.Exec(id, "mkdir -p /home/user && cd /home/user && ln -s " + marker +
                              " abs && ln -s /proc/1/root p1 && ln -s /proc/self/root pself && ln -s /../../.. up && "
                              "ln -s /proc/1/cwd cwd1 && ln -s / slash && echo done");
  ASSERT_EQ(setup["stdout"], "done\n") << setup.dump();

  // An absolute symlink resolves inside the sandbox's root.
  {
    auto r = c.Request("GET", Fs(id, "/home/user/abs"));
    never_host(r, "GET abs symlink");
    ExpectError(r, 404, "file_not_found");
  }
  // Magic links to a process's root or cwd, and a chain of `..` links.
  for (const std::string& p :
       {"/home/user/p1/tmp/" + name, "/home/user/pself/tmp/" + name, "/home/user/cwd1/../../../tmp/" + name,
        "/home/user/up/tmp/" + name, "/home/user/slash/tmp/" + name, "/proc/1/root/tmp/" + name,
        "/proc/self/root/tmp/" + name, "/proc/1/cwd/../../tmp/" + name}) {
    auto r = c.Request("GET", Fs(id, p));
    never_host(r, "GET " + p);
    EXPECT_TRUE(r.status >= 400 && r.status < 500) << p << ": " << r.status << " " << r.body;
    auto l = c.Request("GET", base + "/list?path=" + p.substr(0, p.rfind('/')));
    EXPECT_EQ(l.body.find(token), std::string::npos) << "list of " << p << " shows the host marker: " << l.body;
  }
  // The sandbox itself cannot read the marker either.
  auto in = s.Exec(id, "cat " + marker + " /proc/1/root" + marker + " /home/user/abs 2>&1; ls /tmp /home/user/up/tmp");
  EXPECT_EQ(in["stdout"].get<std::string>().find(secret), std::string::npos) << in.dump();

  // Writes through the same paths stay inside (or fail).
  const std::string payload = "SANDBOX-WRITE-" + token;
  for (const std::string& p :
       {"/../../../../tmp/" + name, "/../../../../tmp/" + name + "-new", "../../../../../tmp/" + name + "-rel",
        "/home/user/abs"s, "/home/user/p1/tmp/" + name, "/home/user/p1/tmp/" + name + "-p1",
        "/home/user/pself/tmp/" + name + "-self", "/home/user/up/tmp/" + name + "-up",
        "/home/user/cwd1/../../tmp/" + name + "-cwd", "/proc/1/root/tmp/" + name + "-proc",
        "/home/user/p1/tmp/" + name + "-dir/deep/file"}) {
    auto r = c.Request("PUT", Fs(id, p), payload);
    EXPECT_TRUE(r.status == 201 || (r.status >= 400 && r.status < 500)) << "PUT " << p << ": " << r.body;
    auto mkd = c.Json("POST", base + "/mkdir", {{"path", p + "-mkdir"}});
    EXPECT_TRUE(mkd.status == 201 || (mkd.status >= 400 && mkd.status < 500)) << "mkdir " << p << ": " << mkd.body;
  }
  ASSERT_EQ(c.Request("PUT", Fs(id, "/home/user/mv-src"), payload).status, 201);
  auto mv = c.Json("POST", base + "/move", {{"from", "/home/user/mv-src"}, {"to", "/home/user/p1/tmp/" + name + "-mv"}});
  EXPECT_TRUE(mv.status >= 400 && mv.status < 500) << mv.body;
  mv = c.Json("POST", base + "/move", {{"from", "/home/user/mv-src"}, {"to", "/../../tmp/" + name + "-mv2"}});
  EXPECT_EQ(mv.status, 200) << mv.body;
  // DELETE through `..` and links never removes the host marker.
  for (const std::string& p : {"/../../../../tmp/" + name, "/home/user/p1/tmp/" + name, "/proc/1/root/tmp/" + name}) {
    auto r = c.Request("DELETE", Fs(id, p, "&recursive=true"));
    EXPECT_NE(r.status, 500) << p << ": " << r.body;
  }
  // The `..` write landed in the sandbox's own /tmp.
  auto mine = c.Request("GET", Fs(id, "/tmp/" + name + "-new"));
  EXPECT_EQ(mine.status, 200);
  EXPECT_EQ(mine.body, payload);
  host_untouched("after traversal reads and writes");

  // A symlink swapped under the operations: /home/user/race is atomically
  // exchanged (renameat2 RENAME_EXCHANGE, no forks, so thousands of flips a
  // second) between a real directory, a link to / and a link to
  // /proc/1/root. The loop is detached and bounded by `timeout`.
  const std::string flipper =
      "import ctypes,os\n"
      "os.chdir('/home/user')\n"
      "os.makedirs('race.dir/tmp', exist_ok=True)\n"
      "os.symlink('/', 'race')\n"
      "os.symlink('/proc/1/root', 'race.proc')\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "n = 0\n"
      "while True:\n"
      "  for other in (b'race.dir', b'race.proc', b'race.dir', b'race.proc'):\n"
      "    if libc.renameat2(-100, b'race', -100, other, 2) != 0: raise OSError(ctypes.get_errno(), 'renameat2')\n"
      "  n += 1\n";
  ASSERT_EQ(c.Request("PUT", Fs(id, "/home/user/flip.py"), flipper).status, 201);
  auto flip = c.Json("POST", "/v1/sandboxes/" + id + "/exec",
                     {{"cmd", "nohup timeout 60 python3 /home/user/flip.py >/home/user/flip.log 2>&1 </dev/null & "
                              "echo started"},
                      {"detach", true},
                      {"timeout_seconds", 70}});
  ASSERT_EQ(flip.status, 200) << flip.body;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string count_flipper = "ps -eo args | grep -c '^python3 /home/user/flip.py'; cat /home/user/flip.log";
  auto ps = s.Exec(id, count_flipper);
  ASSERT_EQ(ps["stdout"], "1\n") << "flipper not running: " << ps.dump();
  int puts_ok = 0, gets_sandbox = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string p = "/home/user/race/tmp/" + name;
    if (i % 2 == 0) {
      auto r = c.Request("GET", Fs(id, p));
      EXPECT_EQ(r.body.find(secret), std::string::npos) << "race GET " << i << " returned the host file";
      if (r.status == 200) {
        EXPECT_EQ(r.body, payload);
        ++gets_sandbox;
      }
    } else {
      auto r = c.Request("PUT", Fs(id, p), payload);
      EXPECT_NE(r.status, 500) << r.body;
      if (r.status == 201) ++puts_ok;
    }
  }
  std::cout << "race: " << puts_ok << " PUTs landed in the sandbox, " << gets_sandbox
            << " GETs read sandbox files\n";
  ps = s.Exec(id, count_flipper);
  EXPECT_EQ(ps["stdout"], "1\n") << "flipper died early: " << ps.dump();
  host_untouched("after the symlink race");
  EXPECT_EQ(s.Exec(id, "echo ok")["stdout"], "ok\n");
}

TEST(ApiFiles, UploadOverDiskQuotaFailsCleanly) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox({{"disk_mb", 32}});
  ASSERT_FALSE(id.empty());
  auto c = s.Client();
  ASSERT_EQ(c.Request("PUT", Fs(id, "/home/user/keep.bin"), "old content").status, 201);
  const uint64_t total = 64 * kMiB;
  for (const std::string target : {"/home/user/big.bin", "/home/user/keep.bin"}) {
    Response r;
    ASSERT_NO_THROW(r = c.Upload(Fs(id, target), total, [](char* buf, size_t n) {
      std::memset(buf, 'z', n);
      return n;
    })) << target;
    EXPECT_TRUE(r.status >= 400 && r.status < 500) << target << ": " << r.status << " " << r.body;
    ExpectError(r, 422, "no_space");
  }
  // The server keeps serving; the sandbox still runs commands.
  EXPECT_EQ(c.Request("GET", "/healthz").status, 200);
  auto e = s.Exec(id, "echo ok; ls -a /home/user");
  ASSERT_EQ(e["_status"], 200);
  EXPECT_EQ(e["stdout"].get<std::string>().substr(0, 3), "ok\n");
  // No half file: the new target does not exist, the old one is intact,
  // and no temp file is left beside them.
  EXPECT_EQ(e["stdout"].get<std::string>().find("big.bin"), std::string::npos) << e["stdout"];
  EXPECT_EQ(e["stdout"].get<std::string>().find(".hutch-"), std::string::npos) << e["stdout"];
  ExpectError(c.Request("GET", "/v1/sandboxes/" + id + "/fs/stat?path=/home/user/big.bin"), 404, "file_not_found");
  EXPECT_EQ(c.Request("GET", Fs(id, "/home/user/keep.bin")).body, "old content");
  // The space is free again: a file that fits goes through.
  std::string mb(16 * kMiB, 'q');
  auto fits = c.Request("PUT", Fs(id, "/home/user/fits.bin"), mb);
  EXPECT_EQ(fits.status, 201) << fits.body;
  auto df = s.Exec(id, "stat -c %s /home/user/fits.bin");
  EXPECT_EQ(df["stdout"], std::to_string(mb.size()) + "\n");
}
