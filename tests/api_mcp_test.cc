// /mcp at the wire, below what the SDK suites (tests/compat/mcp) see: the
// transport's refusals and their status codes, version negotiation,
// batches, notifications/cancelled reaching the command in the sandbox,
// per-key tool lists and tenant scope. Raw HTTP against the real hutchd.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "tests/support/test_server.h"

using hutch::client::HttpClient;
using hutch::client::Response;
using hutch::testing::TestServer;
using nlohmann::json;

namespace {

const std::string kAdmin = "hk_mcp_admin_0123456789";
const std::string kLimited = "hk_mcp_limited_0123456789";
const std::string kAlice = "hk_mcp_alice_0123456789";
const std::string kBob = "hk_mcp_bob_0123456789";

std::string KeysFile() {
  static const std::string path = hutch::testing::WriteTempFile(
      "hutch-mcp-keys", kAdmin + "\n" + kLimited + " mcp_tools=sandbox_list,exec\n" + kAlice +
                            " tenant=alice\n" + kBob + " tenant=bob\n");
  return path;
}

json Rpc(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

class Mcp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer({"--keys-file", KeysFile()}, /*with_env_key=*/false);
    ASSERT_TRUE(server_->ok()) << server_->Log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    unlink(KeysFile().c_str());
  }

  static HttpClient As(const std::string& key) {
    return HttpClient("127.0.0.1", server_->port(), key);
  }
  static Response Post(HttpClient& c, const json& body, const std::string& session = "",
                       std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> h = {{"Content-Type", "application/json"},
                                            {"Accept", "application/json"}};
    if (!session.empty()) h["Mcp-Session-Id"] = session;
    for (auto& [k, v] : extra) h[k] = v;
    return c.Request("POST", "/mcp", body.dump(), h);
  }
  // A new session of `key`; its id.
  static std::string Open(const std::string& key, const std::string& version = "2025-06-18") {
    auto c = As(key);
    auto r = Post(c, Rpc(1, "initialize",
                         {{"protocolVersion", version},
                          {"capabilities", json::object()},
                          {"clientInfo", {{"name", "api_mcp_test"}, {"version", "1"}}}}));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.header("mcp-session-id");
  }
  // tools/call in JSON mode; the result object.
  static json Call(const std::string& key, const std::string& session, const std::string& tool,
                   json args, int id = 7) {
    auto c = As(key);
    auto r =
        Post(c, Rpc(id, "tools/call", {{"name", tool}, {"arguments", std::move(args)}}), session);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["result"];
  }

  static json AdminExec(const std::string& id, const std::string& cmd) {
    return As(kAdmin).Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", cmd}}).json();
  }

  static inline TestServer* server_ = nullptr;
};

}  // namespace

TEST_F(Mcp, InitializeNegotiatesTheRevisionAndHandsOutASession) {
  auto c = As(kAdmin);
  for (const std::string v : {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
    auto r = Post(c, Rpc(1, "initialize",
                         {{"protocolVersion", v},
                          {"capabilities", json::object()},
                          {"clientInfo", {{"name", "t"}, {"version", "1"}}}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["result"]["protocolVersion"], v);
    EXPECT_TRUE(r.json()["result"]["capabilities"].contains("tools"));
    EXPECT_EQ(r.json()["result"]["serverInfo"]["name"], "hutch");
    EXPECT_EQ(r.header("mcp-session-id").rfind("mcp_", 0), 0u) << r.header("mcp-session-id");
  }
  // A revision it does not know: answered with its newest.
  auto r = Post(c, Rpc(1, "initialize",
                       {{"protocolVersion", "1999-01-01"},
                        {"capabilities", json::object()},
                        {"clientInfo", {{"name", "t"}, {"version", "1"}}}}));
  EXPECT_EQ(r.json()["result"]["protocolVersion"], "2025-11-25");
}

TEST_F(Mcp, TheTransportRefusesWhatItCannotServeWithClearCodes) {
  auto c = As(kAdmin);
  // No key, a wrong key: 401 before anything else.
  HttpClient anon("127.0.0.1", server_->port());
  EXPECT_EQ(Post(anon, Rpc(1, "ping")).status, 401);
  auto wrong = As("hk_wrong");
  EXPECT_EQ(Post(wrong, Rpc(1, "ping")).status, 401);
  // No session, an unknown one.
  auto none = Post(c, Rpc(1, "ping"));
  EXPECT_EQ(none.status, 400) << none.body;
  EXPECT_EQ(none.json()["error"]["code"], -32600);
  auto unknown = Post(c, Rpc(1, "ping"), "mcp_00000000000000000000000000000000");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  const std::string s = Open(kAdmin);
  // Not JSON; not JSON-RPC; the wrong content type; an unsupported header.
  auto bad = c.Request("POST", "/mcp", "{nope",
                       {{"Content-Type", "application/json"}, {"Mcp-Session-Id", s}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["code"], -32700);
  auto not_rpc = Post(c, json{{"hello", 1}}, s);
  EXPECT_EQ(not_rpc.status, 400);
  EXPECT_EQ(not_rpc.json()["error"]["code"], -32600);
  auto text = c.Request("POST", "/mcp", Rpc(1, "ping").dump(),
                        {{"Content-Type", "text/plain"}, {"Mcp-Session-Id", s}});
  EXPECT_EQ(text.status, 415);
  auto version = Post(c, Rpc(1, "ping"), s, {{"MCP-Protocol-Version", "2001-01-01"}});
  EXPECT_EQ(version.status, 400);
  // Served: ping, an unknown method (JSON-RPC error), notifications (202).
  auto ping = Post(c, Rpc(2, "ping"), s, {{"MCP-Protocol-Version", "2025-06-18"}});
  EXPECT_EQ(ping.status, 200);
  EXPECT_EQ(ping.json()["id"], 2);
  EXPECT_TRUE(ping.json()["result"].is_object());
  auto method = Post(c, Rpc(3, "resources/list"), s);
  EXPECT_EQ(method.json()["error"]["code"], -32601) << method.body;
  auto note = Post(c, json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, s);
  EXPECT_EQ(note.status, 202);
  EXPECT_TRUE(note.body.empty());
  // A batch (2025-03-26): one answer per request, in order.
  auto batch = Post(c, json::array({Rpc(4, "ping"), Rpc(5, "tools/list")}), s);
  ASSERT_EQ(batch.status, 200) << batch.body;
  ASSERT_TRUE(batch.json().is_array());
  EXPECT_EQ(batch.json()[0]["id"], 4);
  EXPECT_EQ(batch.json()[1]["result"]["tools"].size(), 17u);
  // GET wants an event stream; DELETE ends the session.
  auto get = c.Request("GET", "/mcp", "", {{"Accept", "application/json"}, {"Mcp-Session-Id", s}});
  EXPECT_EQ(get.status, 406);
  EXPECT_EQ(c.Request("DELETE", "/mcp", "", {{"Mcp-Session-Id", s}}).status, 204);
  EXPECT_EQ(Post(c, Rpc(6, "ping"), s).status, 404);
  // And the server kept serving through all of it.
  EXPECT_EQ(c.Request("GET", "/healthz").status, 200);
}

TEST_F(Mcp, BadToolArgumentsAreToolErrorsTheAgentCanFix) {
  const std::string s = Open(kAdmin);
  auto unknown_tool = Call(kAdmin, s, "rm_rf", json::object());
  EXPECT_TRUE(unknown_tool["isError"].get<bool>());
  EXPECT_EQ(unknown_tool["structuredContent"]["error"]["code"], "invalid_request");
  auto missing = Call(kAdmin, s, "exec", {{"cmd", "true"}});
  EXPECT_TRUE(missing["isError"].get<bool>());
  EXPECT_NE(missing["content"][0]["text"].get<std::string>().find("sandbox_id"), std::string::npos);
  auto extra = Call(kAdmin, s, "sandbox_list", {{"colour", "red"}});
  EXPECT_TRUE(extra["isError"].get<bool>());
  auto both = Call(kAdmin, s, "run", {{"cmd", "true"}, {"code", "1"}});
  EXPECT_TRUE(both["isError"].get<bool>());
  auto wrong_type = Call(kAdmin, s, "sandbox_create", {{"ttl_seconds", "soon"}});
  EXPECT_TRUE(wrong_type["isError"].get<bool>());
}

TEST_F(Mcp, AKeysToolListLimitsWhatItSeesAndCalls) {
  const std::string s = Open(kLimited);
  auto c = As(kLimited);
  auto list = Post(c, Rpc(1, "tools/list"), s);
  std::set<std::string> names;
  const json tools = list.json()["result"]["tools"];  // a copy: json() is a temporary
  for (const auto& t : tools) names.insert(t["name"]);
  EXPECT_EQ(names, (std::set<std::string>{"sandbox_list", "exec"}));
  auto refused = Call(kLimited, s, "sandbox_create", json::object());
  EXPECT_TRUE(refused["isError"].get<bool>()) << refused.dump();
  auto allowed = Call(kLimited, s, "sandbox_list", json::object());
  EXPECT_FALSE(allowed["isError"].get<bool>()) << allowed.dump();
}

TEST_F(Mcp, ATenantSeesAnotherTenantsSandboxAsUnknown) {
  const std::string a = Open(kAlice), b = Open(kBob);
  auto made = Call(kAlice, a, "sandbox_create", {{"ttl_seconds", 300}});
  ASSERT_FALSE(made["isError"].get<bool>()) << made.dump();
  const std::string id = made["structuredContent"]["id"];
  auto theirs = Call(kBob, b, "exec", {{"sandbox_id", id}, {"cmd", "echo pwned > /tmp/p"}});
  auto missing = Call(kBob, b, "exec", {{"sandbox_id", "sb_0000000000000000"}, {"cmd", "true"}});
  EXPECT_TRUE(theirs["isError"].get<bool>());
  EXPECT_EQ(theirs["structuredContent"]["error"]["code"],
            missing["structuredContent"]["error"]["code"]);
  for (const char* tool : {"sandbox_get", "sandbox_kill", "file_list", "run_code"}) {
    json args = {{"sandbox_id", id}};
    if (std::string(tool) == "run_code") args["code"] = "1";
    auto r = Call(kBob, b, tool, args);
    EXPECT_TRUE(r["isError"].get<bool>()) << tool;
    EXPECT_EQ(r["structuredContent"]["error"]["code"], "sandbox_not_found") << tool;
  }
  auto bobs_list = Call(kBob, b, "sandbox_list", json::object());
  EXPECT_EQ(bobs_list["structuredContent"]["sandboxes"].dump().find(id), std::string::npos);
  // A session is its key's owner's: Alice's session id is unknown to Bob.
  auto c = As(kBob);
  EXPECT_EQ(Post(c, Rpc(1, "ping"), a).status, 404);
  auto still = Call(kAlice, a, "exec", {{"sandbox_id", id}, {"cmd", "ls /tmp/p 2>&1; true"}});
  EXPECT_NE(still["structuredContent"]["stdout"].get<std::string>().find("No such file"),
            std::string::npos);
  Call(kAlice, a, "sandbox_kill", {{"sandbox_id", id}});
}

TEST_F(Mcp, NotificationsCancelledKillsTheCommandInTheSandbox) {
  const std::string s = Open(kAdmin);
  auto made = Call(kAdmin, s, "sandbox_create", {{"ttl_seconds", 300}});
  const std::string id = made["structuredContent"]["id"];
  json result;
  std::thread caller([&] {
    result = Call(
        kAdmin, s, "exec",
        {{"sandbox_id", id}, {"cmd", "sleep 300; touch /tmp/finished"}, {"timeout_seconds", 0}},
        /*id=*/42);
  });
  // Running?
  bool running = false;
  for (int i = 0; i < 100 && !running; ++i) {
    auto ps = AdminExec(id, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '");
    running = ps.value("stdout", "").find("sleep 300") != std::string::npos;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(running);
  auto c = As(kAdmin);
  auto note = Post(c,
                   json{{"jsonrpc", "2.0"},
                        {"method", "notifications/cancelled"},
                        {"params", {{"requestId", 42}, {"reason", "changed my mind"}}}},
                   s);
  EXPECT_EQ(note.status, 202);
  caller.join();
  EXPECT_TRUE(result["isError"].get<bool>()) << result.dump();
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    auto ps = AdminExec(id, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '");
    gone = ps.value("stdout", "").find("sleep 300") == std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone);
  EXPECT_EQ(AdminExec(id, "test -e /tmp/finished; echo $?").value("stdout", ""), "1\n");
  Call(kAdmin, s, "sandbox_kill", {{"sandbox_id", id}});
}
