// Networking of vm sandboxes (issue 9: "the same per-sandbox namespace and
// policy as the jail driver, through a tap device inside that namespace";
// src/driver/vm/guest_network.h). Against the real hutchd and a test's own
// outside world (NetWorld, in a namespace the test makes): a guest reaches
// what its policy allows and nothing else, a policy change holds at once,
// a guest that forges its source address gets nowhere, its web server
// answers through the port proxy, restored and forked guests work in slots
// of their own, and nothing (namespace, veth, table, QEMU) outlives the
// sandboxes, a crash, or the server.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/host_probe.h"
#include "tests/support/net_env.h"
#include "tests/vm/vm_support.h"

namespace hutch::testing {
namespace {

using json = nlohmann::json;
using namespace hutch::testing::vm;

std::string Out(const json& r) { return r.value("stdout", std::string()); }

json VmBody(const json& network) {
  return json{{"driver", "vm"}, {"memory_mb", 256}, {"disk_mb", 256}, {"network", network}};
}

// Starts `python3 -m http.server 8000` inside and waits until it listens.
void ServeHttp(TestServer& s, const std::string& id) {
  s.Exec(id, "cd /tmp && echo hello-from-" + id +
                 " > index.html && nohup python3 -m http.server 8000 "
                 ">/dev/null 2>&1 </dev/null & " +
                 WaitLocal8000());
}

// The slot addresses (eth0 inside each namespace) of every network
// namespace server `tag` has: the addresses the host knows its sandboxes by.
std::vector<std::string> SlotAddresses(const std::string& tag) {
  std::vector<std::string> out;
  for (const auto& ns : NetnsOf(tag)) {
    std::string a = Trim(HostSh(
        "ip -n " + ns + " -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}' | cut -d/ -f1"));
    if (!a.empty()) out.push_back(a);
  }
  return out;
}

TEST(VmNetwork, GuestReachesWhatItsPolicyAllowsAndNothingElse) {
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  auto c = s.Client();
  auto cr = c.Json("POST", "/v1/sandboxes",
                   VmBody({{"mode", "policy"}, {"default", "deny"}, {"allow", {"allowed.test"}}}));
  ASSERT_EQ(cr.status, 201) << cr.body;
  const std::string a = cr.json()["id"];
  EXPECT_EQ(cr.json().value("boot", ""), "restore") << cr.body;

  // The guest's own view: one NIC besides loopback, the fixed link
  // address, the slot's resolver through 192.0.0.1.
  EXPECT_EQ(Trim(Out(s.Exec(
                a, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"))),
            "eth0 lo");
  EXPECT_EQ(Trim(Out(s.Exec(a, "awk '/nameserver/{print $2}' /etc/resolv.conf"))), "192.0.0.1");

  // Allowed by name; the rest neither resolves nor connects by raw IP; a
  // policy change holds at once, in the running guest.
  ExpectNamedPolicyHoldsAndChangesLive(s, *e.world, a);

  // Never reachable: the metadata address, the namespace that routes the
  // guest (its gateway, on hutchd's port and any other), link-local.
  EXPECT_EQ(Trim(Out(s.Exec(a, HttpGet("http://169.254.169.254/")))).rfind("FAIL", 0), 0u);
  EXPECT_EQ(Trim(Out(s.Exec(a, Connect("192.0.0.1", s.port())))).rfind("FAIL", 0), 0u);
  EXPECT_EQ(Trim(Out(s.Exec(a, Connect("192.0.0.1", 22)))).rfind("FAIL", 0), 0u);
  // No IPv6 route out.
  EXPECT_EQ(
      Trim(Out(s.Exec(
          a, "awk '$1 ~ /^0+$/ && $2 == \"00\" && $10 != \"lo\"' /proc/net/ipv6_route | wc -l"))),
      "0");

  // Root in the guest forges its source: an address of its own making on
  // eth0, then a connection from it to a server the policy allows.
  const std::string forge =
      "python3 -c \"import socket,fcntl,struct\n"
      "s=socket.socket(2,2)\n"
      "fcntl.ioctl(s,0x8916,struct.pack('16sH2s4s8s',b'eth0:1',2,b'',socket.inet_aton('192.0.0.3'),"
      "b''))\n"
      "t=socket.socket()\nt.settimeout(3)\nt.bind(('192.0.0.3',0))\n"
      "try:\n t.connect(('" +
      e.world->Addr(2) +
      "',8080)); print('CONNECTED')\n"
      "except Exception as e:\n print('FAIL',type(e).__name__)\"";
  EXPECT_EQ(Trim(Out(s.Exec(a, forge))).rfind("FAIL", 0), 0u)
      << "a forged source address left the slot";
  // Its own address still works (the forged one changed nothing else).
  EXPECT_EQ(Trim(Out(s.Exec(a, HttpGet("http://allowed.test:8080/")))), "allowed-server");

  // Its web server answers through the port proxy.
  ServeHttp(s, a);
  auto page = c.Request("GET", "/v1/sandboxes/" + a + "/ports/8000/index.html");
  EXPECT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(Trim(page.body), "hello-from-" + a);
  // Bytes in and out are counted.
  auto m = c.Request("GET", "/v1/sandboxes/" + a + "/metrics");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_GT(m.json()["net_rx_bytes"].get<uint64_t>(), 0u) << m.body;
  EXPECT_GT(m.json()["net_tx_bytes"].get<uint64_t>(), 0u) << m.body;

  // A second guest (restored from the same boot snapshot into its own
  // slot): mode all reaches the world, but neither guest reaches the
  // other's slot, where each serves on port 8000.
  auto cb = c.Json("POST", "/v1/sandboxes", VmBody({{"mode", "all"}}));
  ASSERT_EQ(cb.status, 201) << cb.body;
  const std::string b = cb.json()["id"];
  EXPECT_EQ(cb.json().value("boot", ""), "restore");
  EXPECT_EQ(Trim(Out(s.Exec(b, HttpGet("http://denied.test:8080/")))), "denied-server");
  ServeHttp(s, b);
  EXPECT_EQ(Trim(c.Request("GET", "/v1/sandboxes/" + b + "/ports/8000/index.html").body),
            "hello-from-" + b);
  const std::string tag = probe::TagOf(s);
  ASSERT_FALSE(tag.empty());
  const auto slots = SlotAddresses(tag);
  EXPECT_GE(slots.size(), 2u);
  for (const auto& addr : slots) {
    SCOPED_TRACE(addr);
    EXPECT_EQ(Trim(Out(s.Exec(a, Connect(addr, 8000)))).rfind("FAIL", 0), 0u);
    EXPECT_EQ(Trim(Out(s.Exec(b, Connect(addr, 8000)))).rfind("FAIL", 0), 0u);
  }
}

TEST(VmNetwork, ForkChildrenCrashAndStopKeepNetworksApartAndLeaveNothing) {
  NetEnv e = MakeNetEnv();
  ASSERT_TRUE(e.server->ok());
  ASSERT_TRUE(e.world->ready());
  auto& s = *e.server;
  auto c = s.Client();
  const std::string tag = probe::TagOf(s);
  ASSERT_FALSE(tag.empty());
  auto cr =
      c.Json("POST", "/v1/sandboxes", VmBody({{"mode", "policy"}, {"allow", {"allowed.test"}}}));
  ASSERT_EQ(cr.status, 201) << cr.body;
  const std::string src = cr.json()["id"];
  ServeHttp(s, src);

  // A fork child continues the running machine, web server included, in a
  // slot of its own with the source's policy.
  auto f = c.Json("POST", "/v1/sandboxes/" + src + "/fork", json{{"count", 1}});
  ASSERT_EQ(f.status, 201) << f.body;
  ASSERT_TRUE(f.json().contains("sandboxes")) << f.body;
  const std::string child = f.json()["sandboxes"][0]["id"];
  EXPECT_EQ(f.json()["sandboxes"][0].value("boot", ""), "fork") << f.body;
  EXPECT_EQ(Trim(Out(s.Exec(child, HttpGet("http://allowed.test:8080/")))), "allowed-server");
  EXPECT_EQ(Trim(Out(s.Exec(child, Resolve("denied.test")))), "FAIL gaierror");
  EXPECT_EQ(Trim(c.Request("GET", "/v1/sandboxes/" + child + "/ports/8000/index.html").body),
            "hello-from-" + src);
  EXPECT_EQ(Trim(Out(s.Exec(src, HttpGet("http://allowed.test:8080/")))), "allowed-server");

  const pid_t q_src = QemuPid(s, src), q_child = QemuPid(s, child);
  ASSERT_TRUE(IsQemu(q_src) && IsQemu(q_child));
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + child).status, 204);
  EXPECT_TRUE(QemuGone(q_child));

  // hutchd dies: the guest is adopted with its network (policy, DNS,
  // exposed port) and what the dead run kept warm is removed.
  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Trim(Out(s.Exec(src, HttpGet("http://allowed.test:8080/")))), "allowed-server");
  EXPECT_EQ(Trim(Out(s.Exec(src, Resolve("denied.test")))), "FAIL gaierror");
  EXPECT_EQ(Trim(s.Client().Request("GET", "/v1/sandboxes/" + src + "/ports/8000/index.html").body),
            "hello-from-" + src);      // a new client: the restarted server has a new port
  EXPECT_LE(NetnsOf(tag).size(), 3u);  // the adopted slot and two warm

  ASSERT_EQ(s.Stop(), 0);
  EXPECT_TRUE(QemuGone(q_src));
  ExpectNoNetworkLeftOf(tag);
  s.Restart();  // the destructor expects a running server
}

}  // namespace
}  // namespace hutch::testing
