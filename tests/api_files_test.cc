// The file API end to end: Range, list/stat/mkdir/move/delete and their
// JSON errors, the disk quota. (Big streamed transfers with flat server
// memory are Exhaustion.*UploadAndDownload*, and the promise that no path,
// symlink or race reaches the host's files is FilePath.*, both in
// tests/security/.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>

#include "tests/support/test_server.h"

using namespace std::string_literals;
using hutch::client::Response;
using hutch::testing::TestServer;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::string Fs(const std::string& id, const std::string& path, const std::string& extra = "") {
  return "/v1/sandboxes/" + id + "/fs?path=" + path + extra;
}

// Every error is JSON with a stable code.
void ExpectError(const Response& r, int status, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  auto j = r.json();
  ASSERT_TRUE(j.is_object()) << "not JSON: " << r.body;
  EXPECT_EQ(j["code"], code) << r.body;
}

}  // namespace

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
    EXPECT_EQ(r.header("content-range").find("26-25"), std::string::npos)
        << r.header("content-range");
  }
  // On an empty file a suffix range cannot be a 206 (it would need the
  // malformed "Content-Range: bytes 0--1/0"): 200 with the empty file, or 416.
  ASSERT_EQ(c.Request("PUT", Fs(id, "/home/user/empty.txt"), "").status, 201);
  {
    auto r = c.Request("GET", Fs(id, "/home/user/empty.txt"), "", {{"Range", "bytes=-5"}});
    EXPECT_TRUE(r.status == 200 || r.status == 416)
        << r.status << " Content-Range: " << r.header("content-range");
    EXPECT_EQ(r.header("content-range").find("0--1"), std::string::npos)
        << r.header("content-range");
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
  auto put =
      c.Request("PUT", Fs(id, "/home/user/t/x/y/run.sh", "&mode=0755"), "#!/bin/sh\necho run\n");
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
    for (auto& e : j["entries"])
      out.insert(e["path"].get<std::string>() + ":" + e["type"].get<std::string>());
    return out;
  };
  auto l1 = c.Request("GET", base + "/list?path=/home/user/t");
  ASSERT_EQ(l1.status, 200) << l1.body;
  EXPECT_EQ(names(l1), (std::set<std::string>{"/home/user/t/a:dir", "/home/user/t/x:dir"}));
  auto l2 = c.Request("GET", base + "/list?path=/home/user/t&depth=2");
  ASSERT_EQ(l2.status, 200) << l2.body;
  EXPECT_EQ(names(l2), (std::set<std::string>{"/home/user/t/a:dir", "/home/user/t/x:dir",
                                              "/home/user/t/a/b:dir", "/home/user/t/a/f.txt:file",
                                              "/home/user/t/x/y:dir"}));
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
  auto mv = c.Json("POST", base + "/move",
                   {{"from", "/home/user/t/a/f.txt"}, {"to", "/home/user/t/m/n/g.txt"}});
  ASSERT_EQ(mv.status, 200) << mv.body;
  EXPECT_EQ(mv.json()["path"], "/home/user/t/m/n/g.txt");
  ExpectError(c.Request("GET", base + "/stat?path=/home/user/t/a/f.txt"), 404, "file_not_found");
  EXPECT_EQ(c.Request("GET", Fs(id, "/home/user/t/m/n/g.txt")).body, "12345");
  ExpectError(
      c.Json("POST", base + "/move", {{"from", "/home/user/t/nope"}, {"to", "/home/user/t/z"}}),
      404, "file_not_found");

  // delete: a file; a non-empty dir needs recursive; an empty dir does not.
  EXPECT_EQ(c.Request("DELETE", Fs(id, "/home/user/t/m/n/g.txt")).status, 204);
  ExpectError(c.Request("GET", base + "/stat?path=/home/user/t/m/n/g.txt"), 404, "file_not_found");
  EXPECT_EQ(c.Request("DELETE", Fs(id, "/home/user/t/m/n")).status, 204);
  ExpectError(c.Request("DELETE", Fs(id, "/home/user/t/a")), 409, "conflict");
  EXPECT_EQ(c.Request("GET", base + "/stat?path=/home/user/t/a/b/c").status, 200);
  ExpectError(c.Request("DELETE", Fs(id, "/home/user/t/a", "&recursive=yes")), 400,
              "invalid_request");
  EXPECT_EQ(c.Request("DELETE", Fs(id, "/home/user/t/a", "&recursive=true")).status, 204);
  ExpectError(c.Request("GET", base + "/stat?path=/home/user/t/a"), 404, "file_not_found");
  ExpectError(c.Request("DELETE", Fs(id, "/home/user/t/a")), 404, "file_not_found");

  // Errors.
  ExpectError(c.Request("GET", Fs(id, "/home/user/t/missing")), 404, "file_not_found");
  ExpectError(c.Request("GET", Fs(id, "/home/user/t/x")), 422, "is_a_directory");
  ExpectError(c.Request("GET", base + "/list?path=/home/user/t/x/y/run.sh"), 422,
              "not_a_directory");
  ExpectError(c.Request("GET", base + "/list?path=/home/user/t/nope"), 404, "file_not_found");
  ExpectError(c.Request("PUT", Fs(id, "/home/user/t/x"), "data"), 422, "is_a_directory");
  ExpectError(c.Request("PUT", Fs(id, "/home/user/t/x/y/run.sh/sub"), "data"), 422,
              "not_a_directory");
  ExpectError(c.Json("POST", base + "/mkdir", {{"path", "/home/user/t/x/y/run.sh"}}), 409,
              "conflict");
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
  ExpectError(c.Request("PUT", Fs(id, "/home/user/t/m.txt", "&mode=999"), "x"), 400,
              "invalid_request");
  ExpectError(c.Request("GET", "/v1/sandboxes/sb_nope/fs?path=/etc/hostname"), 404,
              "sandbox_not_found");
  // Nothing above broke the sandbox.
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
  ExpectError(c.Request("GET", "/v1/sandboxes/" + id + "/fs/stat?path=/home/user/big.bin"), 404,
              "file_not_found");
  EXPECT_EQ(c.Request("GET", Fs(id, "/home/user/keep.bin")).body, "old content");
  // The space is free again: a file that fits goes through.
  std::string mb(16 * kMiB, 'q');
  auto fits = c.Request("PUT", Fs(id, "/home/user/fits.bin"), mb);
  EXPECT_EQ(fits.status, 201) << fits.body;
  auto df = s.Exec(id, "stat -c %s /home/user/fits.bin");
  EXPECT_EQ(df["stdout"], std::to_string(mb.size()) + "\n");
}
