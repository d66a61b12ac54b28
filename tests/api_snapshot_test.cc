// Snapshots and fork (jail driver: files, not processes — "memory":false).
// A snapshot keeps content, modes, owners and deletions across the delete
// of its sandbox and a hutchd restart; a fork makes independent children
// that share the parent's files copy-on-write, each with its own identity.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "tests/support/test_server.h"

using hutch::testing::HostSh;
using hutch::testing::TestServer;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string Out(const json& r) { return r.value("stdout", ""); }

// Host disk a directory takes: allocated blocks, not apparent sizes (each
// jail sandbox's disk is a sparse image of its disk_mb).
uint64_t DirBytes(const std::string& dir) {
  std::string out = HostSh("du -s -B1 " + dir + " 2>/dev/null | cut -f1");
  return out.empty() ? 0 : std::stoull(out);
}

// What the test compares: content hash, mode, owner and size of each file,
// and whether a template file the sandbox deleted is still gone.
const char* kFingerprint =
    "cd /home/user/proj && sha256sum a.txt blob bin/tool | cut -c1-16 && "
    "stat -c '%n %a %U:%G %s' a.txt blob bin/tool && stat -c '%n %a %U:%G' bin && "
    "(test -e /etc/os-release && echo os-release-present || echo os-release-gone)";

}  // namespace

TEST(Snapshot, FilesModesOwnersAndDeletionsSurviveDeleteAndRestart) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  auto w = s.Exec(
      id,
      "test -e /etc/os-release || exit 9; mkdir -p /home/user/proj/bin && cd /home/user/proj && "
      "echo hello > a.txt && chmod 640 a.txt && head -c 3000000 /dev/urandom > blob && "
      "printf '#!/bin/sh\\necho tool\\n' > bin/tool && chmod 755 bin/tool && chmod 750 bin && "
      "chown -R user:user /home/user/proj && chown root:root blob && rm /etc/os-release");
  ASSERT_EQ(w.value("exit_code", -1), 0) << w.dump();
  std::string before = Out(s.Exec(id, kFingerprint));
  ASSERT_NE(before.find("os-release-gone"), std::string::npos) << before;

  auto c = s.Client();
  auto snap = c.Request("POST", "/v1/sandboxes/" + id + "/snapshots");
  ASSERT_EQ(snap.status, 201) << snap.body;
  auto sj = snap.json();
  std::string sid = sj["id"];
  EXPECT_EQ(sid.rfind("snap_", 0), 0u);
  EXPECT_EQ(sj["memory"], false);  // never pretend: files only
  EXPECT_EQ(sj["sandbox_id"], id);
  EXPECT_GE(sj["size_bytes"].get<uint64_t>(), 3000000u);
  // The sandbox runs on after its snapshot.
  EXPECT_EQ(Out(s.Exec(id, "echo on")), "on\n");
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);

  s.Stop();
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto c2 = s.Client();
  auto list = c2.Request("GET", "/v1/snapshots").json();
  ASSERT_EQ(list["items"].size(), 1u) << list.dump();
  EXPECT_EQ(list["items"][0]["id"], sid);
  EXPECT_EQ(c2.Request("GET", "/v1/snapshots/" + sid).status, 200);

  auto made = c2.Json("POST", "/v1/sandboxes", {{"snapshot", sid}});
  ASSERT_EQ(made.status, 201) << made.body;
  std::string child = made.json()["id"];
  EXPECT_EQ(made.json()["snapshot"], sid);
  EXPECT_EQ(Out(s.Exec(child, kFingerprint)), before);
  EXPECT_EQ(Out(s.Exec(child, "/home/user/proj/bin/tool")), "tool\n");
  // Writes in the child go to its own layer, never into the snapshot.
  EXPECT_EQ(s.Exec(child, "echo changed > /home/user/proj/a.txt && rm /home/user/proj/blob")
                .value("exit_code", -1),
            0);
  auto again = c2.Json("POST", "/v1/sandboxes", {{"snapshot", sid}});
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(Out(s.Exec(again.json()["id"], kFingerprint)), before);

  // Errors: unknown snapshot, snapshot with a template, bad methods.
  auto bad = c2.Json("POST", "/v1/sandboxes", {{"snapshot", "snap_nope"}});
  EXPECT_EQ(bad.status, 404);
  EXPECT_EQ(bad.json()["code"], "snapshot_not_found");
  EXPECT_EQ(c2.Json("POST", "/v1/sandboxes", {{"snapshot", sid}, {"template", "base"}}).status,
            400);
  EXPECT_EQ(c2.Request("GET", "/v1/snapshots/snap_nope").status, 404);
  EXPECT_EQ(c2.Request("POST", "/v1/sandboxes/sb_nope/snapshots").status, 404);

  // Deleting the snapshot hides it at once; its files stay while the
  // children run on them, and go with the last child.
  const std::string layer_dir = s.state_dir() + "/state/snapshots/" + sid;
  ASSERT_TRUE(fs::exists(layer_dir));
  EXPECT_EQ(c2.Request("DELETE", "/v1/snapshots/" + sid).status, 204);
  EXPECT_EQ(c2.Request("DELETE", "/v1/snapshots/" + sid).status, 404);
  EXPECT_EQ(c2.Request("GET", "/v1/snapshots").json()["items"].size(), 0u);
  EXPECT_EQ(c2.Json("POST", "/v1/sandboxes", {{"snapshot", sid}}).status, 404);
  EXPECT_EQ(Out(s.Exec(again.json()["id"], "cat /home/user/proj/a.txt")), "hello\n");
  EXPECT_TRUE(fs::exists(layer_dir));
  ASSERT_EQ(c2.Request("DELETE", "/v1/sandboxes/" + child).status, 204);
  ASSERT_EQ(c2.Request("DELETE", "/v1/sandboxes/" + again.json()["id"].get<std::string>()).status,
            204);
  EXPECT_FALSE(fs::exists(layer_dir)) << "the deleted snapshot's files outlived its last sandbox";
}

TEST(Fork, FiveChildrenShareFilesCopyOnWriteWithTheirOwnIdentity) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string parent = s.CreateSandbox({{"memory_mb", 1024}, {"metadata", {{"job", "fix-1"}}}});
  // 200 MB of "installed files".
  auto w = s.Exec(parent,
                  "mkdir -p /opt/deps && for i in 1 2 3 4; do head -c 50000000 /dev/urandom > "
                  "/opt/deps/lib$i.so; "
                  "done && cat /opt/deps/* | sha256sum | cut -c1-32",
                  300);
  ASSERT_EQ(w.value("exit_code", -1), 0) << w.dump();
  const std::string digest = Out(w);
  const std::string snaps_dir = s.state_dir() + "/state/snapshots";
  const uint64_t disk_before = DirBytes(s.state_dir());

  auto c = s.Client();
  auto f = c.Json("POST", "/v1/sandboxes/" + parent + "/fork", {{"count", 5}});
  ASSERT_EQ(f.status, 201) << f.body;
  auto fj = f.json();
  EXPECT_EQ(fj["memory"], false);
  ASSERT_EQ(fj["sandboxes"].size(), 5u) << f.body;
  std::vector<std::string> kids;
  for (auto& k : fj["sandboxes"]) {
    kids.push_back(k["id"]);
    EXPECT_EQ(k["status"], "running");
    EXPECT_EQ(k["metadata"]["job"], "fix-1");
    EXPECT_EQ(k["metadata"]["hutch.fork_of"], parent);
  }
  // Host disk grows by one shared copy of the parent's changes, far less
  // than five.
  const uint64_t grown = DirBytes(s.state_dir()) - disk_before;
  EXPECT_LT(grown, 2 * 200000000ull)
      << "host disk grew by " << grown << " bytes for 5 forks of 200 MB";

  std::set<std::string> ids, hosts, machine_ids, uuids;
  for (const auto& k : kids) {
    EXPECT_EQ(Out(s.Exec(k, "cat /opt/deps/* | sha256sum | cut -c1-32", 300)), digest) << k;
    ids.insert(k);
    hosts.insert(Out(s.Exec(k, "hostname")));
    machine_ids.insert(Out(s.Exec(k, "cat /etc/machine-id")));
    uuids.insert(Out(s.Exec(k, "cat /proc/sys/kernel/random/uuid")));
  }
  hosts.insert(Out(s.Exec(parent, "hostname")));
  machine_ids.insert(Out(s.Exec(parent, "cat /etc/machine-id")));
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(hosts.size(), 6u);
  EXPECT_EQ(machine_ids.size(), 6u);
  EXPECT_EQ(uuids.size(), 5u);

  // Writes in one child are invisible to its siblings and to the parent.
  ASSERT_EQ(
      s.Exec(kids[0], "echo mine > /opt/deps/note && rm /opt/deps/lib1.so").value("exit_code", -1),
      0);
  for (size_t i = 1; i < kids.size(); ++i)
    EXPECT_EQ(Out(s.Exec(kids[i], "ls /opt/deps | tr '\\n' ' '")),
              "lib1.so lib2.so lib3.so lib4.so ")
        << kids[i];
  EXPECT_EQ(Out(s.Exec(parent, "ls /opt/deps | tr '\\n' ' '")), "lib1.so lib2.so lib3.so lib4.so ");
  // And the parent's later writes are invisible to the children.
  ASSERT_EQ(s.Exec(parent, "echo later > /opt/deps/parent-only").value("exit_code", -1), 0);
  EXPECT_EQ(s.Exec(kids[1], "test -e /opt/deps/parent-only").value("exit_code", -1), 1);

  // Bad requests.
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes/" + parent + "/fork", {{"count", 0}}).status, 400);
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes/sb_nope/fork", {{"count", 1}}).status, 404);
  // A fork's layer is internal: not listed, and gone with the children.
  EXPECT_EQ(c.Request("GET", "/v1/snapshots").json()["items"].size(), 0u);
  for (const auto& k : kids) ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + k).status, 204);
  EXPECT_EQ(HostSh("ls " + snaps_dir + " | wc -l"), "0\n");
}
