// A test server whose sandboxes' outside world is a NetWorld (net_world.h),
// and the probes tests run inside sandboxes to try that world. Shared by
// the network tests of both drivers (api_network_test, vm_network_test).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/mount_points.h"
#include "tests/support/net_world.h"
#include "tests/support/test_server.h"

namespace hutch::testing {

struct NetEnv {
  std::unique_ptr<TestServer> server;
  std::unique_ptr<NetWorld> world;
};

// The world's index must match the server's pool index (both unique on the
// host while the server lives), so the server starts first, then the world,
// and the server learns the world's DNS through --dns-upstream: restart it.
inline NetEnv MakeNetEnv(std::vector<std::string> extra = {}) {
  NetEnv e;
  // A throwaway server only to claim a pool index.
  e.server = std::make_unique<TestServer>(std::vector<std::string>{"--no-network"});
  if (!e.server->ok()) return e;
  e.world = std::make_unique<NetWorld>(e.server->net_index());
  e.server->Stop();
  std::vector<std::string> args = {"--net-warm", "2", "--dns-upstream", e.world->Dns()};
  for (auto& a : extra) args.push_back(a);
  e.server->SetArgs(args);
  e.server->Restart();
  return e;
}

// Shell one-liners run inside a sandbox (python3 comes from the template);
// each prints its result or "FAIL <exception>".
inline std::string HttpGet(const std::string& url) {
  return "python3 -c \"import urllib.request,sys\ntry:\n print(urllib.request.urlopen('" + url +
         "',timeout=4).read().decode().strip())\nexcept Exception as e:\n "
         "print('FAIL',type(e).__name__)\"";
}
inline std::string Resolve(const std::string& name) {
  return "python3 -c \"import socket\ntry:\n print(socket.gethostbyname('" + name +
         "'))\nexcept Exception as e:\n print('FAIL',type(e).__name__)\"";
}
inline std::string Connect(const std::string& addr, int port) {
  return "python3 -c \"import socket\ntry:\n socket.create_connection(('" + addr + "'," +
         std::to_string(port) +
         "),timeout=3); print('CONNECTED')\nexcept Exception as e:\n "
         "print('FAIL',type(e).__name__)\"";
}
// Waits (up to 30 s) until something listens on 127.0.0.1:8000 inside.
inline std::string WaitLocal8000() {
  return "python3 -c \"import socket,time\nfor i in range(300):\n try:\n  "
         "socket.create_connection(('127.0.0.1',8000),timeout=1); break\n except OSError: "
         "time.sleep(0.1)\"";
}

inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The policy walk both drivers' tests take, on sandbox `id` created with
// mode policy, default deny, allow ["allowed.test"]: the allowed name
// answers, the denied one does not resolve, its server's raw IP does not
// connect; after PUT …/network also allows denied.test, it answers at
// once, without restarting anything.
inline void ExpectNamedPolicyHoldsAndChangesLive(TestServer& s, const NetWorld& w,
                                                 const std::string& id) {
  auto out = [&](const std::string& cmd) {
    return Trim(s.Exec(id, cmd).value("stdout", std::string()));
  };
  EXPECT_EQ(out(HttpGet("http://allowed.test:8080/")), "allowed-server");
  EXPECT_EQ(out(Resolve("denied.test")), "FAIL gaierror");
  // By raw IP: no allowed name resolved to it.
  EXPECT_EQ(out(HttpGet("http://" + w.Addr(3) + ":8080/")).rfind("FAIL", 0), 0u);
  auto put = s.Client().Json(
      "PUT", "/v1/sandboxes/" + id + "/network",
      nlohmann::json{
          {"mode", "policy"}, {"default", "deny"}, {"allow", {"allowed.test", "denied.test"}}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(out(HttpGet("http://denied.test:8080/")), "denied-server");
}

// What a server of `tag` made on the host: network namespaces (bind mounts
// in /run/netns), host-side veths, its nftables table.
inline std::vector<std::string> NetnsOf(const std::string& tag) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec))
    if (e.path().filename().string().rfind("hutch-" + tag + "-", 0) == 0)
      out.push_back(e.path().filename());
  return out;
}
inline std::vector<std::string> VethsOf(const std::string& tag) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/class/net", ec))
    if (e.path().filename().string().rfind(tag + "v", 0) == 0) out.push_back(e.path().filename());
  return out;
}
// Mount points of this tag's namespaces: at most one per name in
// /run/netns (a name can exist for an instant before its bind while a
// slot is being made).
inline size_t NetnsMountsOf(const std::string& tag) {
  return MountPointsUnder("/run/netns/hutch-" + tag + "-").size();
}
inline bool NftTableExists(const std::string& tag) {
  return HostSh("nft list tables 2>/dev/null").find("hutch_" + tag) != std::string::npos;
}
// After the server of `tag` stopped: nothing of its networking is left.
inline void ExpectNoNetworkLeftOf(const std::string& tag) {
  EXPECT_TRUE(NetnsOf(tag).empty());
  EXPECT_EQ(NetnsMountsOf(tag), 0u);
  EXPECT_TRUE(VethsOf(tag).empty());
  EXPECT_FALSE(NftTableExists(tag));
}

}  // namespace hutch::testing
