// Sandbox networking, end to end: egress modes and policies, DNS-based
// domain rules, runtime policy changes, the always-blocked destinations,
// and that nothing (namespace, veth, nftables table) outlives the sandboxes
// or a crashed server.
//
// Each test builds its own "outside world" in a network namespace it
// creates (NetWorld): two HTTP servers on 198.19.<n>.2 and .3, a DNS
// server on .2 answering allowed.test and denied.test, and a fake cloud
// metadata server on 169.254.169.254, a server on non-public addresses
// (172.31.<n>.2, 100.100.100.200, 168.63.129.16). Traffic goes only there and to
// loopback; everything is removed when the test ends.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/exposition.h"
#include "tests/support/host_probe.h"
#include "tests/support/net_env.h"

namespace hutch::testing {
namespace {

using json = nlohmann::json;
using namespace std::string_literals;
namespace fs = std::filesystem;

std::string Out(const json& r) { return r.value("stdout", ""s); }

TEST(Network, NoneModeReachesNothingButLoopback) {
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  std::string id = s.CreateSandbox();
  auto r = s.Exec(id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
  EXPECT_EQ(Trim(Out(r)), "lo") << r.dump();
  EXPECT_EQ(Trim(Out(s.Exec(id, Connect(e.world->Addr(2), 8080)))), "FAIL OSError");
  EXPECT_NE(Out(s.Exec(id, Resolve("allowed.test"))).rfind("FAIL", 0), std::string::npos);
  // Loopback works.
  r = s.Exec(id,
             "nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 </dev/null & " +
                 WaitLocal8000() + "; " + HttpGet("http://127.0.0.1:8000/"));
  EXPECT_EQ(Out(r).find("FAIL"), std::string::npos) << r.dump();
  auto g = s.Client().Request("GET", "/v1/sandboxes/" + id + "/network");
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(g.json()["mode"], "none");
}

TEST(Network, PolicyAllowsNamedHostDeniesTheRestAndPutChangesItLive) {
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  auto c = s.Client();
  auto cr = c.Json(
      "POST", "/v1/sandboxes",
      json{{"network", {{"mode", "policy"}, {"default", "deny"}, {"allow", {"allowed.test"}}}}});
  ASSERT_EQ(cr.status, 201) << cr.body;
  std::string id = cr.json()["id"];
  EXPECT_EQ(cr.json()["network"]["mode"], "policy");

  ExpectNamedPolicyHoldsAndChangesLive(s, *e.world, id);
  auto g = c.Request("GET", "/v1/sandboxes/" + id + "/network");
  ASSERT_EQ(g.status, 200);
  EXPECT_EQ(g.json()["allow"], json({"allowed.test", "denied.test"}));

  // A CIDR rule admits raw IPs; a deny rule beats it.
  auto put = c.Json("PUT", "/v1/sandboxes/" + id + "/network",
                    json{{"mode", "policy"},
                         {"default", "deny"},
                         {"allow", {e.world->Addr(0) + "/24"}},
                         {"deny", {e.world->Addr(3)}}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://" + e.world->Addr(2) + ":8080/")))),
            "allowed-server");
  EXPECT_EQ(
      Trim(Out(s.Exec(id, HttpGet("http://" + e.world->Addr(3) + ":8080/")))).rfind("FAIL", 0), 0u);

  // Bad policies are refused and change nothing.
  auto bad = c.Json("PUT", "/v1/sandboxes/" + id + "/network",
                    json{{"mode", "policy"}, {"allow", {"not a name!"}}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://" + e.world->Addr(2) + ":8080/")))),
            "allowed-server");
}

TEST(Network, HostPortsNeighboursAndMetadataAreUnreachableInEveryMode) {
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  auto c = s.Client();
  // A service on the host, on the world-facing address (hutchd itself
  // listens on loopback in tests; this stands for any host port).
  pid_t host_srv = fork();
  if (host_srv == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(null, 2);
    execlp("python3", "python3", "-m", "http.server", "18080", "--bind", e.world->Addr(1).c_str(),
           nullptr);
    _exit(127);
  }
  std::vector<json> modes = {
      json{{"mode", "all"}}, json{{"mode", "policy"}, {"default", "allow"}},
      json{{"mode", "policy"}, {"default", "deny"}, {"allow", {"0.0.0.0/0"}}}};
  std::vector<std::string> ids;
  for (const auto& m : modes) {
    auto cr = c.Json("POST", "/v1/sandboxes", json{{"network", m}});
    ASSERT_EQ(cr.status, 201) << cr.body;
    ids.push_back(cr.json()["id"]);
  }
  // A neighbour with a server on its own address.
  std::string b = ids[0];
  std::string b_addr =
      Trim(Out(s.Exec(b, "python3 -c \"import socket;s=socket.socket(2,2);s.connect(('" +
                             e.world->Addr(2) + "',53));print(s.getsockname()[0])\"")));
  ASSERT_EQ(b_addr.rfind("198.18.", 0), 0u) << b_addr;
  s.Exec(b, "nohup python3 -m http.server 8000 >/dev/null 2>&1 </dev/null & " + WaitLocal8000());
  EXPECT_EQ(Trim(Out(s.Exec(b, Connect(b_addr, 8000)))), "CONNECTED");
  // The host reaches it all (the servers are really there).
  EXPECT_EQ(HostSh("curl -s -m 2 http://169.254.169.254/"), "metadata-server\n");
  std::string host_code;
  for (int i = 0; i < 100 && host_code != "200"; ++i) {
    host_code = HostSh("curl -s -m 2 -o /dev/null -w '%{http_code}' http://" + e.world->Addr(1) +
                       ":18080/");
    if (host_code != "200") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(host_code, "200");

  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& id = ids[i];
    SCOPED_TRACE(modes[i].dump());
    // The world is reachable in these modes...
    EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://" + e.world->Addr(2) + ":8080/")))),
              "allowed-server");
    // ...but not the host's own ports, its gateway, the metadata address,
    // or a neighbour.
    std::string gw = Trim(Out(s.Exec(id, "awk '/nameserver/{print $2}' /etc/resolv.conf")));
    ASSERT_EQ(gw.rfind("198.18.", 0), 0u) << gw;
    EXPECT_EQ(Trim(Out(s.Exec(id, Connect(e.world->Addr(1), 18080)))).rfind("FAIL", 0), 0u);
    EXPECT_EQ(Trim(Out(s.Exec(id, Connect(gw, 18080)))).rfind("FAIL", 0), 0u);
    EXPECT_EQ(Trim(Out(s.Exec(id, Connect(gw, s.port())))).rfind("FAIL", 0), 0u);
    EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://169.254.169.254/")))).rfind("FAIL", 0), 0u);
    if (id != b) {
      EXPECT_EQ(Trim(Out(s.Exec(id, Connect(b_addr, 8000)))).rfind("FAIL", 0), 0u);
    }
    // No IPv6 route out.
    EXPECT_EQ(Trim(Out(s.Exec(id, "ip -6 route 2>/dev/null | grep -c default || true"))), "0");
  }
  kill(host_srv, SIGKILL);
  waitpid(host_srv, nullptr, 0);
}

// Mode `all` means the public internet: private (RFC 1918), shared
// (CGNAT, where Alibaba's metadata lives) and cloud fabric addresses
// (Azure's 168.63.129.16) are refused in every mode, even when a
// sandbox's own policy allows them, until the operator lets a range
// through with --net-allow-private.
TEST(Network, PrivateAndCloudFabricAddressesAreRefusedUnlessTheOperatorAllowsThem) {
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  auto c = s.Client();
  const std::vector<std::string> fabric = {"100.100.100.200", "168.63.129.16"};
  // The host reaches all of them (the servers are really there).
  for (const auto& a : std::vector<std::string>{e.world->PrivateAddr(), fabric[0], fabric[1]})
    EXPECT_EQ(HostSh("curl -s -m 2 http://" + a + ":8081/"), "private-server\n") << a;
  std::vector<json> modes = {json{{"mode", "all"}}, json{{"mode", "policy"}, {"default", "allow"}},
                             json{{"mode", "policy"},
                                  {"default", "deny"},
                                  {"allow", {"0.0.0.0/0", e.world->PrivateNet()}}}};
  for (const auto& m : modes) {
    SCOPED_TRACE(m.dump());
    auto cr = c.Json("POST", "/v1/sandboxes", json{{"network", m}});
    ASSERT_EQ(cr.status, 201) << cr.body;
    std::string id = cr.json()["id"];
    EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://" + e.world->Addr(2) + ":8080/")))),
              "allowed-server");
    EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://" + e.world->PrivateAddr() + ":8081/"))))
                  .rfind("FAIL", 0),
              0u);
    for (const auto& a : fabric)
      EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://" + a + ":8081/")))).rfind("FAIL", 0), 0u) << a;
  }
  // The operator opens the world's private network, and only it.
  s.Stop();
  s.SetArgs({"--net-warm", "2", "--dns-upstream", e.world->Dns(), "--net-allow-private",
             e.world->PrivateNet()});
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto cr = s.Client().Json("POST", "/v1/sandboxes", json{{"network", {{"mode", "all"}}}});
  ASSERT_EQ(cr.status, 201) << cr.body;
  std::string id = cr.json()["id"];
  EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://" + e.world->PrivateAddr() + ":8081/")))),
            "private-server");
  for (const auto& a : fabric)
    EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://" + a + ":8081/")))).rfind("FAIL", 0), 0u) << a;
}

// A template build's apt-get goes to the host's apt mirror, which on many
// networks is an apt cache on a private or reserved address: the build
// sandbox, and only it, may reach the hosts of the host's apt sources
// (--apt-dir) although mode `all` refuses non-public addresses (#7). Failed
// before: the build's request was refused like any sandbox's, so every
// `packages` step failed on a machine whose mirror is not public.
TEST(Network, OnlyABuildSandboxReachesTheHostsAptMirrorOnANonPublicAddress) {
  const fs::path apt = fs::temp_directory_path() / ("hutch-apt-" + std::to_string(getpid()));
  fs::remove_all(apt);
  fs::create_directories(apt / "sources.list.d");
  NetEnv e = MakeNetEnv({"--apt-dir", apt.string()});
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  // The apt sources name the world's private server (read at each build).
  std::ofstream(apt / "sources.list")
      << "deb http://" << e.world->PrivateAddr() << ":8081/debian bookworm main\n";
  const std::string mirror = "http://" + e.world->PrivateAddr() + ":8081/";
  auto plain = s.Client().Json("POST", "/v1/sandboxes", json{{"network", {{"mode", "all"}}}});
  ASSERT_EQ(plain.status, 201) << plain.body;
  const std::string before = plain.json()["id"];
  EXPECT_EQ(Trim(Out(s.Exec(before, HttpGet(mirror)))).rfind("FAIL", 0), 0u);
  // The build reaches the mirror and still not the rest of the non-public
  // world (each step fails the build if not).
  auto fetch = [](const std::string& url, bool want) {
    return "\"python3 -c \\\"import urllib.request\\ntry:\\n b = "
           "urllib.request.urlopen('" +
           url +
           "', timeout=4).read().decode().strip()\\nexcept Exception as x:\\n b = "
           "repr(x)\\nprint(b)\\nraise SystemExit(0 if (b == 'private-server') == " +
           (want ? "True" : "False") + " else 9)\\\"\"";
  };
  const std::string spec = "name = \"mirrorcheck\"\nfrom = \"base\"\nrun = [\n  " +
                           fetch(mirror, true) + ",\n  " +
                           fetch("http://100.100.100.200:8081/", false) + ",\n]\n";
  auto b =
      s.Client().Request("POST", "/v1/templates", spec, {{"Content-Type", "application/toml"}});
  EXPECT_EQ(b.status, 201) << b.body;
  // Once the build sandbox is gone its exception is too: new sandboxes
  // (which may take its slot) and the one from before are refused.
  EXPECT_EQ(Trim(Out(s.Exec(before, HttpGet(mirror)))).rfind("FAIL", 0), 0u);
  for (int i = 0; i < 3; ++i) {
    auto cr = s.Client().Json("POST", "/v1/sandboxes", json{{"network", {{"mode", "all"}}}});
    ASSERT_EQ(cr.status, 201) << cr.body;
    const std::string id = cr.json()["id"];
    EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet(mirror)))).rfind("FAIL", 0), 0u) << i;
  }
  const std::string tag = probe::TagOf(s);
  EXPECT_EQ(HostSh("nft list set inet hutch_" + tag + " privslot | grep -c elements || true"),
            "0\n");
  fs::remove_all(apt);
}

// The host's conntrack table is shared by every sandbox and the host
// itself: a sandbox's DNS queries to its resolver are not tracked at all,
// and its own connections are capped (--net-max-connections), so a flood
// of either leaves the table to everyone else.
TEST(Network, ConnectionTrackingEntriesOfOneSandboxAreBounded) {
  if (access("/proc/net/nf_conntrack", R_OK) != 0) GTEST_SKIP() << "no /proc/net/nf_conntrack";
  NetEnv e = MakeNetEnv({"--net-max-connections", "300"});
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  auto c = s.Client();
  auto entries_from = [](const std::string& addr, const std::string& also) {
    return std::stoi("0" +
                     Trim(HostSh("grep -F 'src=" + addr + " ' /proc/net/nf_conntrack | grep -cF '" +
                                 also + "' || true")));
  };
  auto address_of = [&](const std::string& id) {
    return Trim(Out(s.Exec(id, "python3 -c \"import socket;s=socket.socket(2,2);s.connect(('" +
                                   e.world->Addr(2) + "',53));print(s.getsockname()[0])\"")));
  };
  // A deny-all sandbox floods its resolver from 3000 source ports.
  auto deny =
      c.Json("POST", "/v1/sandboxes", json{{"network", {{"mode", "policy"}, {"default", "deny"}}}});
  ASSERT_EQ(deny.status, 201) << deny.body;
  std::string d = deny.json()["id"];
  std::string d_addr = address_of(d);
  std::string gw = Trim(Out(s.Exec(d, "awk '/nameserver/{print $2}' /etc/resolv.conf")));
  const std::string query =
      "12340100000100000000000007616c6c6f7765640474657374000001"
      "0001";  // allowed.test A
  auto flood = s.Exec(d, "python3 -c \"import socket\nq=bytes.fromhex('" + query +
                             "')\nfor i in range(3000):\n s=socket.socket(2,2); s.sendto(q,('" +
                             gw + "',53)); s.close()\nprint('sent')\"");
  EXPECT_EQ(Trim(Out(flood)), "sent") << flood.dump();
  EXPECT_EQ(entries_from(d_addr, "dport=53 "), 0);
  // A mode-all sandbox opens 2000 UDP flows to the world: at most its cap
  // is tracked (the rest are refused), and the world still answers it.
  auto all = c.Json("POST", "/v1/sandboxes", json{{"network", {{"mode", "all"}}}});
  ASSERT_EQ(all.status, 201) << all.body;
  std::string a = all.json()["id"];
  std::string a_addr = address_of(a);
  auto flows = s.Exec(
      a,
      "python3 -c \"import socket\nfor i in range(2000):\n s=socket.socket(2,2); s.sendto(b'x',('" +
          e.world->Addr(2) + "',9)); s.close()\nprint('sent')\"");
  EXPECT_EQ(Trim(Out(flows)), "sent") << flows.dump();
  int tracked = entries_from(a_addr, "dport=9 ");
  EXPECT_GT(tracked, 0);
  EXPECT_LE(tracked, 300);
  // DNS is untracked, so a sandbox at its cap still resolves names.
  EXPECT_EQ(Trim(Out(s.Exec(a, Resolve("allowed.test")))), e.world->Addr(2));
}

TEST(Network, ModeAllReachesTheWorldAndCountsBytes) {
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  std::string id = s.CreateSandbox(json{{"network", {{"mode", "all"}}}});
  EXPECT_EQ(Trim(Out(s.Exec(id, HttpGet("http://denied.test:8080/")))), "denied-server");
  EXPECT_EQ(Trim(Out(s.Exec(id, Resolve("allowed.test")))), e.world->Addr(2));
  auto m = s.Client().Request("GET", "/v1/sandboxes/" + id + "/metrics");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_GT(m.json()["net_rx_bytes"].get<uint64_t>(), 0u) << m.body;
  EXPECT_GT(m.json()["net_tx_bytes"].get<uint64_t>(), 0u) << m.body;
  // A sandbox created without a network cannot be given one later.
  std::string none = s.CreateSandbox();
  auto put = s.Client().Json("PUT", "/v1/sandboxes/" + none + "/network", json{{"mode", "all"}});
  EXPECT_EQ(put.status, 501) << put.body;
  EXPECT_EQ(put.json()["code"], "not_supported") << put.body;
}

// The slot chains (s<k>) in this server's nftables table.
size_t SlotChainsOf(const std::string& tag) {
  std::istringstream in(HostSh("nft list table inet hutch_" + tag + " 2>/dev/null"));
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    auto at = line.find("chain s");
    if (at != std::string::npos && at + 7 < line.size() &&
        std::isdigit(static_cast<unsigned char>(line[at + 7])))
      ++n;
  }
  return n;
}

TEST(Network, FiftyModeAllSandboxesLeaveOnlyTheWarmPoolWhenDeleted) {
  // The benchmark's burst (bench/hutch_bench section 8), checked for what
  // it leaves: after 50 creates with mode all and their deletes, every
  // namespace, veth (with its address) and slot chain left is one the
  // server counts as warm, ready for the next create, and none is leased.
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  auto& s = *e.server;
  const std::string tag = probe::TagOf(s);
  ASSERT_FALSE(tag.empty());
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    auto r = s.Client().Json("POST", "/v1/sandboxes", json{{"network", {{"mode", "all"}}}});
    ASSERT_EQ(r.status, 201) << r.body;
    ids.push_back(r.json().at("id").get<std::string>());
  }
  EXPECT_GE(NetnsOf(tag).size(), 50u);
  EXPECT_GE(SlotChainsOf(tag), 50u);
  // The last one still reaches out: the burst was served by working slots.
  EXPECT_EQ(Trim(Out(s.Exec(ids.back(), HttpGet("http://allowed.test:8080/")))), "allowed-server");
  for (const auto& id : ids)
    ASSERT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + id).status, 204);

  // The pool may still be refilling after the burst: wait for a moment
  // when the kernel's and nftables' view agree with the server's.
  size_t warm = 0, leased = 1, netns = 0, veths = 0, chains = 0, mounts = 0;
  for (int i = 0; i < 300; ++i) {
    auto m = ParseExposition(s.Client().Request("GET", "/metrics").body);
    ASSERT_TRUE(m.ok()) << m.error;
    auto w = m.Value("hutch_network_slots", {{"state", "warm"}}),
         l = m.Value("hutch_network_slots", {{"state", "leased"}});
    ASSERT_TRUE(w && l) << "hutch_network_slots{state=warm|leased} missing from /metrics";
    warm = static_cast<size_t>(*w);
    leased = static_cast<size_t>(*l);
    netns = NetnsOf(tag).size();
    veths = VethsOf(tag).size();
    chains = SlotChainsOf(tag);
    mounts = NetnsMountsOf(tag);
    if (leased == 0 && netns == warm && veths == warm && chains == warm && mounts == warm) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(leased, 0u);
  EXPECT_GT(warm, 0u) << "the pool refills for the next create";
  EXPECT_EQ(netns, warm) << "namespaces beyond the warm pool";
  EXPECT_EQ(mounts, warm) << "namespace bind mounts beyond the warm pool";
  EXPECT_EQ(veths, warm) << "veths (and their addresses) beyond the warm pool";
  EXPECT_EQ(chains, warm) << "nftables slot chains beyond the warm pool";
  ASSERT_EQ(s.Stop(), 0);
  ExpectNoNetworkLeftOf(tag);
  s.Restart();  // the destructor expects a running server
}

TEST(Network, DeleteShutdownAndCrashLeaveNoNamespaceVethOrRules) {
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  const std::string tag = probe::TagOf(s);
  ASSERT_FALSE(tag.empty());
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(s.CreateSandbox(json{{"network", {{"mode", "all"}}}}));
  EXPECT_GE(NetnsOf(tag).size(), 4u);
  for (const auto& id : ids)
    ASSERT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  // Only the warm namespaces remain (their names and their mounts): the
  // pool's target follows recent demand, here the burst of 4 creates (with
  // all 4 leaked there would be 8).
  EXPECT_LE(NetnsOf(tag).size(), 4u);
  EXPECT_LE(VethsOf(tag).size(), 4u);
  EXPECT_LE(NetnsMountsOf(tag), NetnsOf(tag).size()) << "one bind mount per name at most";

  // A crash with one sandbox running: after restart it is adopted and
  // still reaches the world; what the dead run kept warm is removed.
  std::string kept =
      s.CreateSandbox(json{{"network", {{"mode", "policy"}, {"allow", {"allowed.test"}}}}});
  s.Kill9();
  // Leftovers of a run that died while making slots: a namespace bound on
  // its name without a veth yet (made as hutchd makes them: unshare, then a
  // bind mount on an empty file), and a name whose bind never happened.
  const std::string half = "/run/netns/hutch-" + tag + "-60",
                    unbound = "/run/netns/hutch-" + tag + "-61";
  HostSh("touch " + half + " " + unbound + "; unshare --net=" + half + " true");
  ASSERT_TRUE(fs::exists(half));
  ASSERT_TRUE(fs::exists(unbound));
  s.Restart();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Trim(Out(s.Exec(kept, HttpGet("http://allowed.test:8080/")))), "allowed-server");
  EXPECT_EQ(Trim(Out(s.Exec(kept, Resolve("denied.test")))), "FAIL gaierror");
  EXPECT_LE(NetnsOf(tag).size(), 3u);
  EXPECT_FALSE(fs::exists(half));
  EXPECT_FALSE(fs::exists(unbound));
  EXPECT_LE(NetnsMountsOf(tag), NetnsOf(tag).size()) << "one bind mount per name at most";

  ASSERT_EQ(s.Stop(), 0);
  ExpectNoNetworkLeftOf(tag);
  s.Restart();  // the destructor expects a running server
}

}  // namespace
}  // namespace hutch::testing
