// The path a new user walks with curl: create, exec, stream, upload,
// download, list, delete; and the documented JSON errors.
#include <gtest/gtest.h>

using namespace std::string_literals;

#include "tests/support/test_server.h"

using hutch::testing::TestServer;

TEST(ApiSmoke, CreateExecUploadDownloadDelete) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(id.rfind("sb_", 0), 0u);

  auto r = s.Exec(id, "echo hi; echo oops >&2; exit 3");
  EXPECT_EQ(r["_status"], 200);
  EXPECT_EQ(r["stdout"], "hi\n");
  EXPECT_EQ(r["stderr"], "oops\n");
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_EQ(r["timed_out"], false);

  auto c = s.Client();
  std::string data = "hello\0world"s;
  auto up = c.Request("PUT", "/v1/sandboxes/" + id + "/fs?path=/home/user/a.bin", data,
                      {{"Content-Type", "application/octet-stream"}});
  EXPECT_EQ(up.status, 201) << up.body;
  EXPECT_EQ(up.json()["size"], data.size());
  auto down = c.Request("GET", "/v1/sandboxes/" + id + "/fs?path=/home/user/a.bin");
  EXPECT_EQ(down.status, 200);
  EXPECT_EQ(down.body, data);

  auto list = c.Request("GET", "/v1/sandboxes");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.json()["items"].size(), 1u);

  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);  // idempotent
  auto gone = c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "true"}});
  EXPECT_EQ(gone.status, 409);
  EXPECT_EQ(gone.json()["code"], "sandbox_not_running");
}

TEST(ApiSmoke, DocumentedErrors) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  c.set_api_key("wrong");
  auto r = c.Request("GET", "/v1/sandboxes");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.json()["code"], "unauthorized");
  EXPECT_FALSE(r.header("x-request-id").empty());
  c.set_api_key(s.key());
  r = c.Request("POST", "/v1/sandboxes", "{bad json");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["code"], "invalid_request");
  r = c.Request("GET", "/v1/sandboxes/sb_doesnotexist");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["code"], "sandbox_not_found");
  EXPECT_EQ(r.json()["retryable"], false);
  r = c.Request("DELETE", "/v1/sandboxes/sb_doesnotexist");
  EXPECT_EQ(r.status, 404);
  r = c.Request("GET", "/nowhere");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["code"], "not_found");
  r = c.Request("PATCH", "/v1/sandboxes");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.json()["code"], "method_not_allowed");
  r = c.Request("GET", "/v1/sandboxes", "", {{"X-Request-Id", "my-req-1"}});
  EXPECT_EQ(r.header("x-request-id"), "my-req-1");
  r = c.Request("GET", "/healthz");
  EXPECT_EQ(r.status, 200);
}
