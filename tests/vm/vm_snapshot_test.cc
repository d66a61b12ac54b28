// Boot once, restore many; fork of a running VM (issue 9,
// docs/vm-driver.md). Against the real hutchd: the first vm create of a
// boot key boots a base VM and saves it, every create restores from that
// (`boot: "restore"`), and each restored guest is its own machine —
// hostname, randomness, clock, disk — while the saved RAM stays as it
// was. A fork copies the running machine with its files and processes;
// the copies then diverge.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <set>

#include "tests/support/test_server.h"
#include "tests/vm/vm_support.h"

using hutch::testing::HostSh;
using hutch::testing::TestServer;
using namespace hutch::testing::vm;
using nlohmann::json;

namespace fs = std::filesystem;

namespace {

json CreateVm(TestServer& s) {
  auto r = s.Client().Json("POST", "/v1/sandboxes",
                           {{"driver", "vm"}, {"memory_mb", 256}, {"disk_mb", 256}});
  EXPECT_EQ(r.status, 201) << r.body;
  return r.status == 201 ? r.json() : json::object();
}

std::string Out(const json& e) { return e.value("stdout", std::string()); }

// The one boot snapshot directory of a fresh server.
std::string SnapshotDir(const TestServer& s) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.state_dir() + "/state/vm/snapshots", ec))
    if (e.path().filename().string()[0] != '.') return e.path().string();
  return "";
}

// A field of GET /v1/sandboxes/{id} ("boot" unless told).
std::string Boot(TestServer& s, const std::string& id, const std::string& field = "boot") {
  auto r = s.Client().Request("GET", "/v1/sandboxes/" + id);
  return r.status == 200 ? r.json().value(field, std::string())
                         : "http " + std::to_string(r.status);
}

}  // namespace

TEST(VmSnapshot, RestoredSandboxesAreTheirOwnMachines) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const json a = CreateVm(s);
  ASSERT_TRUE(a.contains("id"));
  const std::string ida = a["id"];
  // The first create built the snapshot and restored from it too.
  EXPECT_EQ(a.value("boot", ""), "restore") << a.dump();
  const std::string snap = SnapshotDir(s);
  ASSERT_FALSE(snap.empty()) << "no boot snapshot under state/vm/snapshots";
  const std::string ram_digest = HostSh("sha256sum " + snap + "/ram | cut -c1-64");

  const json b = CreateVm(s);
  ASSERT_TRUE(b.contains("id"));
  const std::string idb = b["id"];
  EXPECT_EQ(b.value("boot", ""), "restore") << b.dump();
  EXPECT_EQ(Boot(s, idb), "restore");
  EXPECT_TRUE(IsQemu(QemuPid(s, ida)) && IsQemu(QemuPid(s, idb)));

  // Hostname: its own id.
  EXPECT_EQ(Out(s.Exec(ida, "hostname")), ida + "\n");
  EXPECT_EQ(Out(s.Exec(idb, "hostname")), idb + "\n");

  // Randomness: the kernel CRNG was reseeded with host bytes in each.
  const std::string ra = Out(s.Exec(ida, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"));
  const std::string rb = Out(s.Exec(idb, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"));
  EXPECT_EQ(ra.size(), 64u) << ra;
  EXPECT_NE(ra, rb) << "two restored guests read the same random bytes";
  // boot_id is made at its first read, then fixed: nothing reads it before
  // the save, so restored copies differ, but it is no re-identify duty
  // (docs/vm-driver.md). Only shown here.
  std::cerr << "boot_id a=" << Out(s.Exec(ida, "cat /proc/sys/kernel/random/boot_id"))
            << " b=" << Out(s.Exec(idb, "cat /proc/sys/kernel/random/boot_id"));

  // Clock: the host's, not the moment the snapshot was saved.
  for (const auto& id : {ida, idb}) {
    const long guest = std::atol(Out(s.Exec(id, "date +%s")).c_str());
    const long host = static_cast<long>(std::time(nullptr));
    EXPECT_LT(std::labs(host - guest), 30) << id << ": guest clock " << guest << " host " << host;
  }

  // Disks: each restored sandbox writes to its own overlay.
  EXPECT_EQ(s.Exec(ida, "echo only-a > /home/user/a.txt && sync")["exit_code"], 0);
  EXPECT_EQ(s.Exec(idb, "echo only-b > /tmp/b.txt && sync")["exit_code"], 0);
  EXPECT_EQ(Out(s.Exec(ida, "cat /home/user/a.txt")), "only-a\n");
  EXPECT_EQ(Out(s.Exec(idb, "test -e /home/user/a.txt && echo seen || echo unseen")), "unseen\n");
  EXPECT_EQ(Out(s.Exec(ida, "test -e /tmp/b.txt && echo seen || echo unseen")), "unseen\n");
  // Memory written in a restored guest never reaches the saved RAM.
  EXPECT_EQ(s.Exec(ida, "head -c 64M /dev/urandom > /dev/shm/fill")["exit_code"], 0);

  const json c = CreateVm(s);
  ASSERT_TRUE(c.contains("id"));
  const std::string idc = c["id"];
  EXPECT_EQ(Out(s.Exec(idc, "test -e /home/user/a.txt && echo seen || echo unseen")), "unseen\n");
  EXPECT_EQ(HostSh("sha256sum " + snap + "/ram | cut -c1-64"), ram_digest)
      << "the snapshot's RAM file changed";

  for (const auto& id : {ida, idb, idc}) {
    const pid_t q = QemuPid(s, id);
    EXPECT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + id).status, 204);
    EXPECT_TRUE(QemuGone(q)) << id;
  }
  EXPECT_EQ(s.Stop(), 0);
}

TEST(VmSnapshot, ForkCarriesFilesAndProcessesThenDiverges) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  const json src = CreateVm(s);
  ASSERT_TRUE(src.contains("id"));
  const std::string ids = src["id"];
  EXPECT_EQ(s.Exec(ids, "echo from-source > /home/user/f.txt && sync")["exit_code"], 0);
  // A background process (the /v1 process API) appending to a file.
  auto p = c.Json("POST", "/v1/sandboxes/" + ids + "/processes",
                  {{"cmd", "while true; do date +%s%N >> /tmp/loop; sleep 0.2; done"}});
  ASSERT_EQ(p.status, 201) << p.body;
  const int pid = p.json().value("pid", 0);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(Out(s.Exec(ids, "sleep 1; test -s /tmp/loop && echo started")), "started\n");

  auto f = c.Json("POST", "/v1/sandboxes/" + ids + "/fork", {{"count", 2}});
  ASSERT_EQ(f.status, 201) << f.body;
  const json fj = f.json();
  EXPECT_EQ(fj["memory"], true) << f.body;
  std::vector<std::string> kids;
  for (const auto& k : fj["sandboxes"]) {
    kids.push_back(k["id"]);
    EXPECT_EQ(k.value("boot", ""), "fork") << k.dump();
    EXPECT_EQ(k["metadata"]["hutch.fork_of"], ids);
  }
  ASSERT_EQ(kids.size(), 2u);
  // Nothing of the fork is left on disk once the request is answered.
  EXPECT_TRUE(fs::is_empty(s.state_dir() + "/state/vm/forks"));

  const std::string growing =
      "a=$(wc -l < /tmp/loop); sleep 1.5; b=$(wc -l < /tmp/loop); [ \"$b\" -gt \"$a\" ] && echo "
      "growing";
  for (const auto& k : kids) {
    EXPECT_EQ(Out(s.Exec(k, "hostname")), k + "\n");
    EXPECT_EQ(Out(s.Exec(k, "cat /home/user/f.txt")), "from-source\n") << k;
    auto st = c.Request("GET", "/v1/sandboxes/" + k + "/processes/" + std::to_string(pid));
    EXPECT_EQ(st.status, 200) << st.body;
    if (st.status == 200) {
      EXPECT_EQ(st.json()["running"], true) << st.body;
    }
    EXPECT_EQ(Out(s.Exec(k, growing)), "growing\n") << k;
  }
  EXPECT_EQ(Out(s.Exec(ids, growing)), "growing\n") << "the source stopped running after the fork";

  // Divergence: each writes its own file; nobody sees the others'.
  const std::vector<std::string> all = {ids, kids[0], kids[1]};
  for (const auto& id : all)
    EXPECT_EQ(s.Exec(id, "echo mine > /home/user/" + id + ".txt")["exit_code"], 0);
  for (const auto& id : all) {
    for (const auto& other : all) {
      const std::string seen =
          Out(s.Exec(id, "test -e /home/user/" + other + ".txt && echo y || echo n"));
      EXPECT_EQ(seen, other == id ? "y\n" : "n\n") << id << " looking for " << other;
    }
  }
  const std::string r0 =
      Out(s.Exec(kids[0], "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"));
  const std::string r1 =
      Out(s.Exec(kids[1], "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'"));
  EXPECT_NE(r0, r1);

  for (const auto& id : all) {
    const pid_t q = QemuPid(s, id);
    EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
    EXPECT_TRUE(QemuGone(q)) << id;
  }
  EXPECT_EQ(s.Stop(), 0);
}

// Restored VMs (boot snapshots) and fork children outlive a hutchd killed
// with SIGKILL like booted ones: the restart adopts them, and nothing of
// them is an orphan once they are deleted.
TEST(VmSnapshot, Kill9WithRestoredAndForkedVmsLeavesNoOrphanQemu) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string a = CreateVm(s).value("id", ""), b = CreateVm(s).value("id", "");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  auto rb = s.Client().Request("GET", "/v1/sandboxes/" + b);
  EXPECT_EQ(rb.json().value("boot", ""), "restore") << rb.body;
  EXPECT_EQ(s.Exec(a, "echo kept > /tmp/k")["exit_code"], 0);
  auto f = s.Client().Json("POST", "/v1/sandboxes/" + a + "/fork", {{"count", 1}});
  ASSERT_EQ(f.status, 201) << f.body;
  const json fj = f.json();
  const std::string k = fj["sandboxes"][0]["id"];
  const pid_t qa = QemuPid(s, a), qb = QemuPid(s, b), qk = QemuPid(s, k);

  s.Kill9();
  EXPECT_TRUE(IsQemu(qa) && IsQemu(qb) && IsQemu(qk)) << "VMs must outlive hutchd";
  s.Restart();
  ASSERT_TRUE(s.ok());
  for (const auto& id : {a, b, k}) EXPECT_EQ(Boot(s, id, "status"), "running") << id;
  EXPECT_EQ(s.Exec(k, "cat /tmp/k; hostname")["stdout"], "kept\n" + k + "\n");
  EXPECT_EQ(s.Exec(b, "hostname")["stdout"], b + "\n");

  // Killed again, restarted with a delete in between: only the kept ones run.
  EXPECT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + b).status, 204);
  EXPECT_TRUE(QemuGone(qb));
  EXPECT_EQ(s.Stop(), 0);
  for (pid_t q : {qa, qk}) EXPECT_TRUE(QemuGone(q)) << q;
  std::error_code ec;
  EXPECT_TRUE(fs::is_empty(s.state_dir() + "/state/vm/sandboxes", ec));
  EXPECT_TRUE(fs::is_empty(s.state_dir() + "/state/vm/forks", ec));
}
