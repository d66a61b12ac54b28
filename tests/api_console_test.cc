// The web console's assets as hutchd serves them under /ui/ (docs/console.md):
// no key needed, index revalidated and content-hashed assets immutable,
// ETag revalidation, the Content-Security-Policy on every answer, and a
// JSON 404 for a path that is not an asset (or for a server whose console
// was not built). The console itself is driven in a real browser by
// console/tests (console_browser_test).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/test_server.h"

using hutch::testing::TempDir;
using hutch::testing::TestServer;

namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& body) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << body;
}

class ApiConsole : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempDir("hutch-ui"));
    Write(*dir_ + "/index.html", "<!doctype html><title>hutch</title>");
    Write(*dir_ + "/assets/app-ABCD1234.js", "console.log(1)");
    Write(*dir_ + "/assets/app-ABCD1234.css", "body{}");
    server_ = new TestServer({"--ui-dir", *dir_});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    fs::remove_all(*dir_);
    delete dir_;
  }
  // A client without a key.
  static hutch::client::HttpClient Anonymous() {
    return hutch::client::HttpClient("127.0.0.1", server_->port());
  }
  static TestServer* server_;
  static std::string* dir_;
};

TestServer* ApiConsole::server_ = nullptr;
std::string* ApiConsole::dir_ = nullptr;

TEST_F(ApiConsole, IndexNeedsNoKeyAndIsRevalidated) {
  ASSERT_TRUE(server_->ok());
  auto c = Anonymous();
  auto r = c.Request("GET", "/ui/");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "<!doctype html><title>hutch</title>");
  EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(r.header("cache-control"), "no-cache");
  const std::string csp = r.header("content-security-policy");
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe-eval"), std::string::npos) << csp;
  EXPECT_EQ(r.header("x-content-type-options"), "nosniff");
  EXPECT_EQ(r.header("referrer-policy"), "no-referrer");
  const std::string etag = r.header("etag");
  ASSERT_FALSE(etag.empty());
  r = c.Request("GET", "/ui/index.html", "", {{"If-None-Match", etag}});
  EXPECT_EQ(r.status, 304) << r.body;
  EXPECT_EQ(r.body, "");
  r = c.Request("GET", "/ui/", "", {{"If-None-Match", "\"other\""}});
  EXPECT_EQ(r.status, 200);
}

TEST_F(ApiConsole, HashedAssetsAreImmutable) {
  auto c = Anonymous();
  auto r = c.Request("GET", "/ui/assets/app-ABCD1234.js");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "console.log(1)");
  EXPECT_EQ(r.header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(r.header("cache-control"), "public, max-age=31536000, immutable");
  r = c.Request("GET", "/ui/assets/app-ABCD1234.css");
  EXPECT_EQ(r.header("content-type"), "text/css; charset=utf-8");
}

TEST_F(ApiConsole, UiRedirectsToItsFolder) {
  auto r = Anonymous().Request("GET", "/ui");
  EXPECT_EQ(r.status, 308);
  EXPECT_EQ(r.header("location"), "/ui/");
}

TEST_F(ApiConsole, UnknownPathsAreJsonNotFound) {
  auto c = Anonymous();
  for (const char* path : {"/ui/nope.js", "/ui/assets/../index.html", "/ui/%2e%2e/state.db",
                           "/ui/assets", "/ui/..%2f..%2fetc%2fpasswd"}) {
    auto r = c.Request("GET", path);
    EXPECT_EQ(r.status, 404) << path << " " << r.body;
    EXPECT_EQ(r.json().value("code", ""), "not_found") << path << " " << r.body;
  }
  auto r = c.Request("POST", "/ui/");
  EXPECT_EQ(r.status, 405) << r.body;
}

TEST(ApiConsoleMissing, SaysHowToBuildIt) {
  const std::string empty = TempDir("hutch-ui-none");
  TestServer server({"--ui-dir", empty + "/absent"});
  ASSERT_TRUE(server.ok());
  auto c = server.Client();
  c.set_api_key("");
  auto r = c.Request("GET", "/ui/");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.json().value("message", "").find("not built"), std::string::npos) << r.body;
  fs::remove_all(empty);
}

}  // namespace
