#include "tests/support/net_world.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/test_server.h"

namespace hutch::testing {

namespace fs = std::filesystem;

NetWorld::NetWorld(int n) : n_(n) {
  ns_ = "hutchw" + std::to_string(n);
  host_if_ = "hutchw" + std::to_string(n);
  net_ = "198.19." + std::to_string(n) + ".";
  Teardown();  // what a killed earlier run of this index left
  dir_ = TempDir("hutch-world");
  for (const char* site : {"allowed", "denied", "metadata", "private"}) {
    fs::create_directories(dir_ + "/" + site);
    std::ofstream(dir_ + "/" + site + "/index.html") << site << "-server\n";
  }
  Sh("ip netns add " + ns_ + " && ip link add " + host_if_ + " type veth peer name eth0 netns " +
     ns_ + " && ip addr add " + net_ + "1/24 dev " + host_if_ + " && ip link set " + host_if_ +
     " up" + " && ip -n " + ns_ + " link set lo up && ip -n " + ns_ + " link set eth0 up" +
     " && ip -n " + ns_ + " addr add " + net_ + "2/24 dev eth0 && ip -n " + ns_ + " addr add " +
     net_ + "3/24 dev eth0" + " && ip -n " + ns_ +
     " addr add 169.254.169.254/32 dev eth0 && ip -n " + ns_ + " route add default via " + net_ +
     "1" + " && ip route add 169.254.169.254/32 via " + net_ + "2 dev " + host_if_);
  // Non-public destinations: an RFC 1918 network of the world's own, and
  // two cloud endpoints (Alibaba's metadata on CGNAT space, Azure's
  // wireserver), reached by the host through the world.
  Sh("ip -n " + ns_ + " addr add " + PrivateAddr() + "/24 dev eth0 && ip -n " + ns_ +
     " addr add 100.100.100.200/32 dev eth0 && ip -n " + ns_ +
     " addr add 168.63.129.16/32 dev eth0 && ip route add " + PrivateNet() + " via " + net_ +
     "2 dev " + host_if_ + " && ip route add 100.100.100.200/32 via " + net_ + "2 dev " + host_if_ +
     " && ip route add 168.63.129.16/32 via " + net_ + "2 dev " + host_if_);
  Spawn({"python3", "-m", "http.server", "8080", "--bind", net_ + "2", "--directory",
         dir_ + "/allowed"});
  Spawn({"python3", "-m", "http.server", "8080", "--bind", net_ + "3", "--directory",
         dir_ + "/denied"});
  Spawn({"python3", "-m", "http.server", "80", "--bind", "169.254.169.254", "--directory",
         dir_ + "/metadata"});
  Spawn({"python3", "-m", "http.server", "8081", "--bind", "0.0.0.0", "--directory",
         dir_ + "/private"});
  const char* src = getenv("HUTCH_SOURCE_DIR");
  Spawn({"python3", std::string(src ? src : ".") + "/tests/support/world_dns.py", net_ + "2",
         "allowed.test=" + net_ + "2", "denied.test=" + net_ + "3",
         // The credential vault's hosts (tests/support/world_https.py).
         "api.vault.test=" + net_ + "2", "other.vault.test=" + net_ + "3"});
  // Ready once the host reaches every server.
  for (int i = 0; i < 100; ++i) {
    if (HostSh("curl -s -m 1 http://" + net_ + "2:8080/ http://" + net_ +
               "3:8080/ http://169.254.169.254/ http://" + PrivateAddr() + ":8081/") ==
        "allowed-server\ndenied-server\nmetadata-server\nprivate-server\n") {
      ready_ = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

NetWorld::~NetWorld() {
  for (pid_t p : pids_) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
  Teardown();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void NetWorld::Sh(const std::string& cmd) { HostSh(cmd + " 2>&1"); }

void NetWorld::Teardown() {
  Sh("ip route del 169.254.169.254/32 via " + net_ + "2 dev " + host_if_);
  for (const std::string& r :
       {PrivateNet(), std::string("100.100.100.200/32"), std::string("168.63.129.16/32")})
    Sh("ip route del " + r + " via " + net_ + "2 dev " + host_if_);
  Sh("ip link del " + host_if_);
  Sh("ip netns del " + ns_);
}

void NetWorld::Spawn(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"ip", "netns", "exec", ns_});
  pid_t p = fork();
  if (p == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  pids_.push_back(p);
}

}  // namespace hutch::testing
