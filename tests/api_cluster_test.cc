// Nodes of hutchd as one service through a real etcd (issue 27): two
// nodes on loopback, each its own state dir and network pool. Through one
// node: nodes listed, a create placed on the other by affinity and on the
// emptier one by capacity, exec, an exec stream, a file upload and
// download of several MiB for a sandbox the other node holds, the list of
// the whole cluster; then kill -9 of a node: the survivor reports its
// sandbox failed naming it, creates go on, and the node that comes back
// deletes the sandbox instead of resurrecting it.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <memory>
#include <thread>

#include "client/http_client.h"
#include "tests/support/etcd_process.h"
#include "tests/support/exposition.h"
#include "tests/support/test_server.h"

namespace hutch::testing {
namespace {

using client::SseEvent;

std::vector<std::string> NodeArgs(const EtcdProcess& etcd, const std::string& name) {
  return {"--cluster-etcd", etcd.url(), "--node-name", name, "--cluster-lease-ttl", "3"};
}

// The node names GET /v1/nodes lists on `s`.
std::set<std::string> NodesOf(const TestServer& s) {
  auto c = s.Client();
  auto r = c.Request("GET", "/v1/nodes");
  std::set<std::string> out;
  auto j = r.json();
  if (r.status != 200 || !j.contains("items")) return out;
  for (const auto& n : j["items"]) out.insert(n.value("name", ""));
  return out;
}

bool WaitFor(const std::function<bool()>& f, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Opens the sandbox's terminal on `port` (a WebSocket), types a line and
// returns what the terminal printed until the answer showed (or 200
// messages went by).
std::string TerminalAnswer(int port, const std::string& key, const std::string& id) {
  namespace beast = boost::beast;
  namespace websocket = beast::websocket;
  boost::asio::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  beast::get_lowest_layer(ws).connect(
      {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  beast::get_lowest_layer(ws).expires_after(std::chrono::seconds(30));
  ws.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
    req.set(beast::http::field::authorization, "Bearer " + key);
  }));
  ws.handshake("127.0.0.1", "/v1/sandboxes/" + id + "/pty?cols=80&rows=24");
  ws.binary(true);
  ws.write(boost::asio::buffer(std::string("echo pty-$((6*7))\n")));
  std::string out;
  beast::flat_buffer buf;
  for (int i = 0; i < 200 && out.find("pty-42\r\n") == std::string::npos; ++i) {
    ws.read(buf);
    out += beast::buffers_to_string(buf.data());
    buf.consume(buf.size());
  }
  beast::error_code ec;
  ws.close(websocket::close_code::normal, ec);
  return out;
}

// Every server up and listing exactly `names` as the cluster's nodes.
::testing::AssertionResult Joined(const std::vector<TestServer*>& servers,
                                  const std::set<std::string>& names) {
  for (TestServer* s : servers)
    if (!s->ok()) return ::testing::AssertionFailure() << "a node did not start: " << s->Log();
  const bool joined = WaitFor(
      [&] {
        for (TestServer* s : servers)
          if (NodesOf(*s) != names) return false;
        return true;
      },
      15);
  if (!joined)
    return ::testing::AssertionFailure() << "not every node joined: " << servers[0]->Log();
  return ::testing::AssertionSuccess();
}

std::string Fs(const std::string& id, const std::string& path) {
  return "/v1/sandboxes/" + id + "/fs?path=" + path;
}

TEST(ApiCluster, OneServiceThroughAnyNode) {
  if (!EtcdProcess::Available())
    GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup installs etcd-server)";
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok());
  TestServer a(NodeArgs(etcd, "node-a"));
  TestServer b(NodeArgs(etcd, "node-b"));
  const std::set<std::string> both = {"node-a", "node-b"};
  ASSERT_TRUE(Joined({&a, &b}, both));
  {
    auto c = a.Client();
    auto nodes = c.Request("GET", "/v1/nodes").json();
    for (const auto& n : nodes["items"]) {
      EXPECT_TRUE(n.contains("advertise")) << n.dump();
      EXPECT_GT(n["capacity"].value("sandboxes", 0), 0) << n.dump();
      EXPECT_TRUE(n["templates"].is_array()) << n.dump();
      EXPECT_EQ(n.value("state", ""), "ready");
    }
  }

  auto ca = a.Client();
  // Affinity: asked of A, made on B.
  auto made = ca.Json("POST", "/v1/sandboxes", {{"node", "node-b"}, {"ttl_seconds", 600}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.json().value("id", "");
  EXPECT_EQ(made.json().value("node", ""), "node-b");
  // B holds it; A does not.
  EXPECT_EQ(b.Client().Request("GET", "/v1/sandboxes/" + id, "", {{"X-Hutch-Relayed", "t"}}).status,
            200);
  EXPECT_EQ(ca.Request("GET", "/v1/sandboxes/" + id, "", {{"X-Hutch-Relayed", "t"}}).status, 404);

  // Unary exec through A.
  auto r = a.Exec(id, "echo on-$((40+2))");
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r.value("stdout", ""), "on-42\n");

  // An exec stream through A: events arrive, the last is the exit.
  std::string out, last;
  auto sse = ca.Sse("/v1/sandboxes/" + id + "/exec/stream",
                    {{"cmd", "for i in 1 2 3; do echo line$i; done"}}, [&](const SseEvent& e) {
                      last = e.event;
                      if (e.event == "stdout") {
                        auto j = nlohmann::json::parse(e.data, nullptr, false);
                        if (j.is_object()) out += j.value("text", "");
                      }
                      return true;
                    });
  EXPECT_EQ(sse.status, 200) << sse.body;
  EXPECT_EQ(out, "line1\nline2\nline3\n");
  EXPECT_EQ(last, "exit");

  // A file of 5 MiB up and down through A.
  const uint64_t total = 5 << 20;
  uint64_t sent = 0;
  auto up = ca.Upload(Fs(id, "/tmp/big.bin"), total, [&](char* buf, size_t n) {
    const size_t k = std::min<uint64_t>(n, total - sent);
    for (size_t i = 0; i < k; ++i) buf[i] = static_cast<char>((sent + i) % 251);
    sent += k;
    return k;
  });
  EXPECT_EQ(up.status, 201) << up.body;
  uint64_t got = 0;
  bool same = true;
  auto down = ca.Download(Fs(id, "/tmp/big.bin"), [&](const char* d, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (d[i] != static_cast<char>((got + i) % 251)) same = false;
    got += n;
  });
  EXPECT_EQ(down.status, 200);
  EXPECT_EQ(got, total);
  EXPECT_TRUE(same);

  // The terminal (a WebSocket upgrade, then a byte pipe) through A.
  std::string term;
  EXPECT_NO_THROW(term = TerminalAnswer(a.port(), a.key(), id));
  EXPECT_NE(term.find("pty-42\r\n"), std::string::npos) << term;

  // etcd restarted mid-run: B keeps serving its own sandbox meanwhile;
  // afterwards the relay through A finds it again, nothing lost.
  etcd.Stop();
  auto own = b.Exec(id, "echo still");
  EXPECT_EQ(own.value("stdout", ""), "still\n") << own.dump();
  ASSERT_TRUE(etcd.Start());
  nlohmann::json again;
  EXPECT_TRUE(WaitFor(
      [&] {
        again = a.Exec(id, "echo back");
        return again.value("stdout", "") == "back\n";
      },
      20))
      << again.dump();

  // Capacity: B holds one, A none: a create without affinity goes to A.
  auto placed = ca.Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}});
  ASSERT_EQ(placed.status, 201) << placed.body;
  EXPECT_EQ(placed.json().value("node", ""), "node-a");
  // An unknown node is refused.
  auto nowhere = ca.Json("POST", "/v1/sandboxes", {{"node", "node-z"}});
  EXPECT_EQ(nowhere.status, 400) << nowhere.body;

  // Each node lists the cluster.
  for (TestServer* s : {&a, &b}) {
    auto list = s->Client().Request("GET", "/v1/sandboxes").json();
    std::map<std::string, std::string> where;
    for (const auto& it : list["items"]) where[it.value("id", "")] = it.value("node", "");
    EXPECT_EQ(where[id], "node-b") << list.dump();
    EXPECT_EQ(where[placed.json().value("id", "")], "node-a") << list.dump();
  }

  // The other dialects through the same hook: E2B's and OpenSandbox's
  // routes for the sandbox, asked of A, are answered by B.
  auto e2b = ca.Request("GET", "/e2b/sandboxes/" + id, "", {{"X-API-Key", a.key()}});
  EXPECT_EQ(e2b.status, 200) << e2b.body;
  auto osb =
      ca.Request("GET", "/opensandbox/v1/sandboxes/" + id, "", {{"OPEN-SANDBOX-API-KEY", a.key()}});
  EXPECT_EQ(osb.status, 200) << osb.body;

  // B dies: A reports its sandbox failed, naming it, once its lease ran
  // out (3 s here); creates keep working on A.
  b.Kill9();
  nlohmann::json seen;
  EXPECT_TRUE(WaitFor(
      [&] {
        seen = ca.Request("GET", "/v1/sandboxes/" + id).json();
        return seen.value("status", "") == "failed";
      },
      20))
      << seen.dump();
  EXPECT_NE(seen.value("reason", "").find("node-b"), std::string::npos) << seen.dump();
  auto exec_lost = ca.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "true"}});
  EXPECT_EQ(exec_lost.status, 409) << exec_lost.body;
  auto after = ca.Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}});
  EXPECT_EQ(after.status, 201) << after.body;
  EXPECT_EQ(after.json().value("node", ""), "node-a");

  // B comes back: it deletes what the cluster failed while it was gone.
  b.Restart();
  ASSERT_TRUE(b.ok()) << b.Log();
  EXPECT_TRUE(WaitFor([&] { return NodesOf(a) == both; }, 15));
  auto on_b = b.Client().Request("GET", "/v1/sandboxes/" + id, "", {{"X-Hutch-Relayed", "t"}});
  EXPECT_TRUE(on_b.status == 404 || on_b.json().value("status", "") == "stopped") << on_b.body;
  auto via_a = ca.Request("GET", "/v1/sandboxes/" + id);
  EXPECT_TRUE(via_a.status == 404 || via_a.json().value("status", "") == "stopped") << via_a.body;
}

// 30 creates through one node of three, none naming a node: placement by
// free slots spreads them over all three; each node lists all 30.
TEST(ApiCluster, CreatesThroughOneNodeSpreadOverThree) {
  if (!EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok());
  TestServer a(NodeArgs(etcd, "node-a"));
  TestServer b(NodeArgs(etcd, "node-b"));
  TestServer c(NodeArgs(etcd, "node-c"));
  const std::set<std::string> all = {"node-a", "node-b", "node-c"};
  ASSERT_TRUE(Joined({&a, &b, &c}, all));
  auto ca = a.Client();
  std::map<std::string, int> per_node;
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    auto r = ca.Json("POST", "/v1/sandboxes", {{"ttl_seconds", 300}});
    ASSERT_EQ(r.status, 201) << r.body;
    ++per_node[r.json().value("node", "")];
    ids.push_back(r.json().value("id", ""));
  }
  for (const auto& n : all) EXPECT_GE(per_node[n], 5) << n;
  // Cluster totals, on any node: GET /v1/nodes and /metrics add up the
  // records (each node republishes its count every tick).
  auto total = [](const TestServer& s) {
    return s.Client().Request("GET", "/v1/nodes").json()["totals"].value("sandboxes", -1);
  };
  EXPECT_TRUE(WaitFor([&] { return total(c) == 30; }, 10)) << total(c);
  PromParse prom;
  EXPECT_TRUE(WaitFor(
      [&] {
        prom = ParseExposition(b.Client().Request("GET", "/metrics").body);
        return prom.Value("hutch_cluster_sandboxes") == 30;
      },
      10));
  ASSERT_TRUE(prom.ok()) << prom.error;
  EXPECT_EQ(prom.Value("hutch_cluster_nodes"), 3);
  EXPECT_GT(prom.Value("hutch_cluster_capacity_sandboxes").value_or(0), 30);
  for (TestServer* s : {&a, &b, &c}) {
    auto list = s->Client().Request("GET", "/v1/sandboxes?limit=1000").json();
    std::set<std::string> listed;
    for (const auto& it : list["items"]) listed.insert(it.value("id", ""));
    for (const auto& id : ids) EXPECT_TRUE(listed.count(id)) << id;
  }
  // Through a node that holds none of them: each owner is read from etcd
  // once, then from the cache.
  for (int round = 0; round < 2; ++round)
    for (const auto& id : ids) c.Client().Request("GET", "/v1/sandboxes/" + id);
  auto lookups = ParseExposition(c.Client().Request("GET", "/metrics").body);
  EXPECT_GE(lookups.Value("hutch_cluster_owner_lookups_total", {{"source", "cache"}}).value_or(0),
            per_node["node-a"] + per_node["node-b"]);
  for (const auto& id : ids) EXPECT_EQ(ca.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// Three etcd members, one of them lost: the nodes pass over it (the client
// tries the next URL) and the quorum of two keeps the cluster working.
TEST(ApiCluster, KeepsWorkingWithOneEtcdMemberOfThreeDown) {
  if (!EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
  EtcdProcess etcd(3);
  ASSERT_TRUE(etcd.ok());
  TestServer a(NodeArgs(etcd, "node-a"));
  TestServer b(NodeArgs(etcd, "node-b"));
  const std::set<std::string> both = {"node-a", "node-b"};
  ASSERT_TRUE(Joined({&a, &b}, both));
  // The first URL every node tries is gone.
  etcd.StopMember(0);
  auto ca = a.Client();
  auto made = ca.Json("POST", "/v1/sandboxes", {{"node", "node-b"}, {"ttl_seconds", 600}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.json().value("id", "");
  auto r = a.Exec(id, "echo quorum");
  EXPECT_EQ(r.value("stdout", ""), "quorum\n") << r.dump();
  // Both nodes stay members (their leases kept alive through the others).
  std::this_thread::sleep_for(std::chrono::seconds(4));
  EXPECT_EQ(NodesOf(a), both);
  EXPECT_EQ(NodesOf(b), both);
}

// One etcd and two joined nodes, node-a and node-b.
class ApiClusterTwoNodes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
    etcd_ = std::make_unique<EtcdProcess>();
    ASSERT_TRUE(etcd_->ok());
    auto args = NodeArgs(*etcd_, "node-a");
    args.insert(args.end(), a_extra_.begin(), a_extra_.end());
    a_ = std::make_unique<TestServer>(args);
    b_ = std::make_unique<TestServer>(NodeArgs(*etcd_, "node-b"));
    ASSERT_TRUE(Joined({a_.get(), b_.get()}, {"node-a", "node-b"}));
  }
  // Nodes first, etcd last.
  void TearDown() override {
    b_.reset();
    a_.reset();
    etcd_.reset();
  }
  std::vector<std::string> a_extra_;  // more flags for node-a
  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<TestServer> a_, b_;
};

// The same with room for one sandbox on node-a.
class ApiClusterSmallA : public ApiClusterTwoNodes {
 protected:
  ApiClusterSmallA() { a_extra_ = {"--max-sandboxes", "1"}; }
};

// A template built on one node is usable on another: the first create of
// it goes to the node that has it; with that node full, the next goes to
// the other, which copies the build first (a tar stream of its build dirs
// from the node that has it), and the sandbox runs from the copy, files
// and defaults as built.
TEST_F(ApiClusterSmallA, TemplateBuiltOnOneNodeRunsOnAnother) {
  TestServer& a = *a_;
  TestServer& b = *b_;
  const std::string spec = R"(
name = "copied"
from = "base"
run = ["mkdir -p /opt/c && echo built-on-a > /opt/c/where.txt"]
workdir = "/opt/c"

[env]
COPIED = "yes"
)";
  auto built =
      a.Client().SseRequest("POST", "/v1/templates", spec,
                            {{"Content-Type", "application/toml"}, {"Accept", "text/event-stream"}},
                            [](const client::SseEvent&) { return true; });
  ASSERT_EQ(built.status, 200) << built.body;
  // A's record lists it (republished each tick); B has none of it.
  auto lists = [](const TestServer& s, const std::string& node) {
    auto j = s.Client().Request("GET", "/v1/nodes").json();
    for (const auto& n : j["items"])
      if (n.value("name", "") == node)
        for (const auto& t : n["templates"])
          if (t == "copied") return true;
    return false;
  };
  ASSERT_TRUE(WaitFor([&] { return lists(a, "node-a"); }, 10));
  EXPECT_FALSE(lists(a, "node-b"));

  auto ca = a.Client();
  const nlohmann::json create = {{"template", "copied"}, {"ttl_seconds", 300}};
  auto first = ca.Json("POST", "/v1/sandboxes", create);
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(first.json().value("node", ""), "node-a");
  auto made = ca.Json("POST", "/v1/sandboxes", create);
  ASSERT_EQ(made.status, 201) << made.body << b.Log();
  const std::string id = made.json().value("id", "");
  EXPECT_EQ(made.json().value("node", ""), "node-b");
  auto r = a.Exec(id, "cat where.txt; echo $COPIED");
  EXPECT_EQ(r.value("stdout", ""), "built-on-a\nyes\n") << r.dump();
  // B now lists the template as its own; a second create needs no copy.
  EXPECT_TRUE(WaitFor([&] { return lists(b, "node-b"); }, 10));
  auto again = b.Client().Json("POST", "/v1/sandboxes",
                               {{"template", "copied"}, {"node", "node-b"}, {"ttl_seconds", 300}});
  EXPECT_EQ(again.status, 201) << again.body;
  // The copy routes want a key, as every route.
  client::HttpClient wrong("127.0.0.1", a.port(), "wrong-key");
  EXPECT_EQ(wrong.Request("GET", "/v1/cluster/templates/copied/export").status, 401);
}

// One service for what a create refers to: a volume made on B pins the
// sandboxes that mount it to B (a create through A lands there; affinity
// elsewhere is refused; the volume's routes answer through A); its name is
// one cluster-wide; a create retried with the same Idempotency-Key
// through the other node returns the same sandbox; E2B and OpenSandbox
// creates through one node are placed over both.
TEST_F(ApiClusterTwoNodes, VolumesIdempotencyAndDialectCreatesAreClusterWide) {
  TestServer& a = *a_;
  TestServer& b = *b_;
  auto ca = a.Client();
  auto cb = b.Client();

  auto vol = cb.Json("POST", "/v1/volumes", {{"name", "shared"}, {"size_mb", 64}});
  ASSERT_EQ(vol.status, 201) << vol.body;
  EXPECT_EQ(ca.Json("POST", "/v1/volumes", {{"name", "shared"}}).status, 409);
  const nlohmann::json mounts = {{{"name", "shared"}, {"path", "/data"}}};
  auto pinned = ca.Json("POST", "/v1/sandboxes", {{"volumes", mounts}, {"ttl_seconds", 300}});
  ASSERT_EQ(pinned.status, 201) << pinned.body;
  EXPECT_EQ(pinned.json().value("node", ""), "node-b");
  auto w = a.Exec(pinned.json().value("id", ""), "echo kept > /data/f && cat /data/f");
  EXPECT_EQ(w.value("stdout", ""), "kept\n") << w.dump();
  auto elsewhere = ca.Json("POST", "/v1/sandboxes",
                           {{"volumes", mounts}, {"node", "node-a"}, {"ttl_seconds", 300}});
  EXPECT_EQ(elsewhere.status, 409) << elsewhere.body;
  EXPECT_NE(elsewhere.body.find("node-b"), std::string::npos) << elsewhere.body;
  auto got = ca.Request("GET", "/v1/volumes/shared");
  EXPECT_EQ(got.status, 200) << got.body;

  const std::string body = nlohmann::json{{"ttl_seconds", 300}}.dump();
  const std::map<std::string, std::string> idem = {{"Content-Type", "application/json"},
                                                   {"Idempotency-Key", "retry-1"}};
  auto first = ca.Request("POST", "/v1/sandboxes", body, idem);
  ASSERT_EQ(first.status, 201) << first.body;
  auto again = cb.Request("POST", "/v1/sandboxes", body, idem);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json().value("id", ""), first.json().value("id", ""));

  std::set<std::string> e2b_nodes;
  for (int i = 0; i < 4; ++i) {
    auto r = ca.Request("POST", "/e2b/sandboxes", nlohmann::json{{"templateID", "base"}}.dump(),
                        {{"X-API-Key", a.key()}, {"Content-Type", "application/json"}});
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string id = r.json().value("sandboxID", "");
    e2b_nodes.insert(ca.Request("GET", "/v1/sandboxes/" + id).json().value("node", ""));
  }
  EXPECT_EQ(e2b_nodes, (std::set<std::string>{"node-a", "node-b"}));
  // OpenSandbox's creates through A likewise.
  std::set<std::string> osb_nodes;
  const nlohmann::json osb_body = {{"image", {{"uri", "ubuntu:22.04"}}},
                                   {"entrypoint", nlohmann::json::array({"sleep", "600"})},
                                   {"resourceLimits", {{"cpu", "500m"}, {"memory", "256Mi"}}}};
  for (int i = 0; i < 4; ++i) {
    auto r = ca.Request("POST", "/opensandbox/v1/sandboxes", osb_body.dump(),
                        {{"OPEN-SANDBOX-API-KEY", a.key()}, {"Content-Type", "application/json"}});
    ASSERT_TRUE(r.status == 200 || r.status == 201 || r.status == 202) << r.body;
    const std::string id = r.json().value("id", "");
    osb_nodes.insert(ca.Request("GET", "/v1/sandboxes/" + id).json().value("node", ""));
  }
  EXPECT_EQ(osb_nodes, (std::set<std::string>{"node-a", "node-b"}));
}

// Nodes joined through an etcd that speaks only TLS and wants client
// certificates (--cluster-etcd https://… with --cluster-etcd-ca/-cert/-key):
// both are listed and a create through one is made on the other.
TEST(ApiCluster, JoinsThroughTlsEtcd) {
  if (!EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
  EtcdProcess etcd(1, /*tls=*/true);
  ASSERT_TRUE(etcd.ok());
  auto args = [&](const std::string& name) {
    auto a = NodeArgs(etcd, name);
    a.insert(a.end(), {"--cluster-etcd-ca", etcd.ca(), "--cluster-etcd-cert", etcd.client_cert(),
                       "--cluster-etcd-key", etcd.client_key()});
    return a;
  };
  TestServer a(args("node-a"));
  TestServer b(args("node-b"));
  ASSERT_TRUE(Joined({&a, &b}, {"node-a", "node-b"}));
  auto made = a.Client().Json("POST", "/v1/sandboxes", {{"node", "node-b"}, {"ttl_seconds", 60}});
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.json().value("node", ""), "node-b");
  // Without the client certificate a node does not start.
  TestServer c(NodeArgs(etcd, "node-c"));
  EXPECT_TRUE(!c.ok() || NodesOf(c).empty());
}

TEST(ApiCluster, SingleHutchdIsUnchanged) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  EXPECT_EQ(c.Request("GET", "/v1/nodes").status, 501);
  auto made = c.Json("POST", "/v1/sandboxes", {{"node", "x"}});
  EXPECT_EQ(made.status, 400) << made.body;
  auto ok = c.Json("POST", "/v1/sandboxes", {{"ttl_seconds", 60}});
  ASSERT_EQ(ok.status, 201);
  EXPECT_FALSE(ok.json().contains("node"));
}

}  // namespace
}  // namespace hutch::testing
