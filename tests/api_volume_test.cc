// Volumes: named ext4 images that outlive the sandboxes they are mounted
// into, with a size cap, a file API confined to the volume, and crash
// recovery (a volume stays mounted for adopted sandboxes, a restarted
// hutchd mounts it again).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "tests/support/host_probe.h"
#include "tests/support/test_server.h"

using hutch::testing::HostSh;
using hutch::testing::TestServer;
using nlohmann::json;

namespace {

std::string Out(const json& r) { return r.value("stdout", ""); }
int Code(const json& r) { return r.value("exit_code", -1); }

// Host mounts whose source or target lies under the server's state dir.
std::string MountsUnder(const TestServer& s) {
  return HostSh("grep -F ' " + s.state_dir() + "/state/volumes' /proc/self/mountinfo || true");
}

json CreateVolume(hutch::client::HttpClient& c, const std::string& name, int size_mb) {
  auto r = c.Json("POST", "/v1/volumes", {{"name", name}, {"size_mb", size_mb}});
  EXPECT_EQ(r.status, 201) << r.body;
  return r.json();
}

}  // namespace

TEST(Volume, WrittenByOneSandboxIsReadByTheNextAfterTheFirstIsDeleted) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  auto v = CreateVolume(c, "proj", 64);
  EXPECT_EQ(v["name"], "proj");
  EXPECT_EQ(v["size_mb"], 64);
  EXPECT_EQ(v["in_use_by"].size(), 0u);

  std::string a =
      s.CreateSandbox({{"volumes", json::array({{{"name", "proj"}, {"path", "/mnt/proj"}}})}});
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + a).json()["volumes"][0]["name"], "proj");
  auto w = s.Exec(a,
                  "mkdir -p /mnt/proj/src && head -c 2000000 /dev/urandom > /mnt/proj/src/blob && "
                  "echo 'kept across sandboxes' > /mnt/proj/note && chmod 640 /mnt/proj/note && "
                  "chown user:user /mnt/proj/note && sha256sum /mnt/proj/src/blob | cut -c1-64");
  ASSERT_EQ(Code(w), 0) << w.dump();
  std::string sum = Out(w);
  // The sandbox sees its volume as its own filesystem, owned by its root.
  EXPECT_EQ(Out(s.Exec(a, "stat -c '%U %a' /mnt/proj")), "root 755\n");
  // A volume in use cannot be deleted.
  auto busy = c.Request("DELETE", "/v1/volumes/proj");
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_NE(busy.body.find(a), std::string::npos) << busy.body;
  EXPECT_EQ(c.Request("GET", "/v1/volumes/proj").json()["in_use_by"][0], a);
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + a).status, 204);

  // The next sandbox mounts it elsewhere and finds everything.
  std::string b =
      s.CreateSandbox({{"volumes", json::array({{{"name", "proj"}, {"path", "/data/work"}}})}});
  EXPECT_EQ(Out(s.Exec(b, "sha256sum /data/work/src/blob | cut -c1-64")), sum);
  EXPECT_EQ(Out(s.Exec(b, "cat /data/work/note && stat -c '%U:%G %a' /data/work/note")),
            "kept across sandboxes\nuser:user 640\n");
  // The file API reads the same bytes from the host side.
  auto got = c.Request("GET", "/v1/volumes/proj/fs?path=/note");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "kept across sandboxes\n");
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + b).status, 204);

  // And after a restart of hutchd (a clean stop unmounts, a start mounts).
  s.Stop();
  EXPECT_EQ(MountsUnder(s), "");
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto c2 = s.Client();
  auto list = c2.Request("GET", "/v1/volumes").json();
  ASSERT_EQ(list["volumes"].size(), 1u) << list.dump();
  EXPECT_GT(list["volumes"][0]["used_bytes"].get<uint64_t>(), 2000000u);
  std::string d = s.CreateSandbox(
      {{"volumes", json::array({{{"name", "proj"}, {"path", "/mnt/p"}, {"read_only", true}}})}});
  EXPECT_EQ(Out(s.Exec(d, "sha256sum /mnt/p/src/blob | cut -c1-64")), sum);
  // Read-only means read-only, for root inside too.
  auto ro = s.Exec(d, "touch /mnt/p/x 2>&1");
  EXPECT_NE(Code(ro), 0);
  EXPECT_NE(Out(ro).find("Read-only file system"), std::string::npos) << ro.dump();
  ASSERT_EQ(c2.Request("DELETE", "/v1/sandboxes/" + d).status, 204);

  ASSERT_EQ(c2.Request("DELETE", "/v1/volumes/proj").status, 204);
  EXPECT_EQ(c2.Request("GET", "/v1/volumes/proj").status, 404);
  EXPECT_EQ(MountsUnder(s), "");
  EXPECT_EQ(HostSh("ls -A " + s.state_dir() + "/state/volumes"), "");
}

// A stop unmounts volumes lazily; a process that unshared its mount
// namespace meanwhile (here `unshare -m`, on a real host `ip netns exec`,
// a service's PrivateTmp, a container) keeps the file system alive with
// the newest data in its caches. The next start must mount that live file
// system, not a second ext4 on the same image that reads stale blocks:
// what sandboxes wrote is all there after the restart.
TEST(Volume, StaysWholeAcrossARestartWhileAnotherMountNamespaceHoldsIt) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  CreateVolume(c, "pinned", 64);
  std::string a =
      s.CreateSandbox({{"volumes", json::array({{{"name", "pinned"}, {"path", "/data"}}})}});
  auto w =
      s.Exec(a, "head -c 3000000 /dev/urandom > /data/blob && sha256sum /data/blob | cut -c1-64");
  ASSERT_EQ(Code(w), 0) << w.dump();
  const std::string sum = Out(w);
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + a).status, 204);
  // A copy of the host's mount table, volume included, held by a process.
  pid_t holder = fork();
  if (holder == 0) {
    execlp("unshare", "unshare", "-m", "--propagation", "private", "sleep", "120", nullptr);
    _exit(127);
  }
  std::string seen;
  for (int i = 0; i < 100 && seen.find("/volumes/") == std::string::npos; ++i) {
    usleep(50 * 1000);
    seen = HostSh("cat /proc/" + std::to_string(holder) + "/mountinfo 2>/dev/null | grep -F '" +
                  s.state_dir() + "/state/volumes' || true");
  }
  ASSERT_NE(seen.find("/volumes/"), std::string::npos)
      << "the holder has no copy of the volume's mount";

  s.Stop();
  EXPECT_EQ(MountsUnder(s), "");
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto c2 = s.Client();
  std::string b =
      s.CreateSandbox({{"volumes", json::array({{{"name", "pinned"}, {"path", "/data"}}})}});
  EXPECT_EQ(Out(s.Exec(b, "sha256sum /data/blob | cut -c1-64")), sum);
  auto list = c2.Request("GET", "/v1/volumes").json();
  EXPECT_GT(list["volumes"][0]["used_bytes"].get<uint64_t>(), 2000000u) << list.dump();
  ASSERT_EQ(c2.Request("DELETE", "/v1/sandboxes/" + b).status, 204);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
}

TEST(Volume, SizeCapStopsWritesFromInsideAndFromTheApi) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  CreateVolume(c, "small", 16);
  std::string id =
      s.CreateSandbox({{"volumes", json::array({{{"name", "small"}, {"path", "/mnt/s"}}})}});
  auto fill = s.Exec(id, "{ head -c 40000000 /dev/zero > /mnt/s/big; } 2>&1; echo rc=$?");
  EXPECT_NE(Out(fill).find("No space left on device"), std::string::npos) << fill.dump();
  // The host's disk is not what filled: the image file is at most its cap.
  auto img_bytes =
      std::stoull(HostSh("du -B1 " + s.state_dir() + "/state/volumes/small/volume.img | cut -f1"));
  EXPECT_LE(img_bytes, 16u << 20);
  EXPECT_EQ(s.Exec(id, "rm /mnt/s/big").value("exit_code", -1), 0);

  // An upload over the cap answers no_space and leaves no half file.
  hutch::client::Response up;
  ASSERT_NO_THROW(
      up = c.Upload("/v1/volumes/small/fs?path=/up.bin", 24 << 20, [](char* buf, size_t n) {
        std::memset(buf, 'x', n);
        return n;
      }));
  EXPECT_EQ(up.status, 422) << up.body.substr(0, 300);
  EXPECT_EQ(up.json()["code"], "no_space");
  EXPECT_EQ(Out(s.Exec(id, "ls -A /mnt/s")), "lost+found\n");
  EXPECT_EQ(s.Exec(id, "echo fine > /mnt/s/after && cat /mnt/s/after").value("stdout", ""),
            "fine\n");
}

TEST(Volume, FileApiWorksAndStaysInsideTheVolume) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  CreateVolume(c, "files", 32);
  auto put = c.Request("PUT", "/v1/volumes/files/fs?path=docs/a.txt&mode=0600", "0123456789");
  ASSERT_EQ(put.status, 201) << put.body;
  EXPECT_EQ(put.json()["path"], "/docs/a.txt");
  auto range =
      c.Request("GET", "/v1/volumes/files/fs?path=/docs/a.txt", "", {{"Range", "bytes=2-4"}});
  EXPECT_EQ(range.status, 206);
  EXPECT_EQ(range.body, "234");
  EXPECT_EQ(range.headers["content-range"], "bytes 2-4/10");
  auto stat = c.Request("GET", "/v1/volumes/files/fs/stat?path=/docs/a.txt").json();
  EXPECT_EQ(stat["type"], "file");
  EXPECT_EQ(stat["size"], 10);
  EXPECT_EQ(stat["mode"], 0600);
  EXPECT_EQ(c.Json("POST", "/v1/volumes/files/fs/mkdir", {{"path", "/x/y"}}).status, 201);
  auto mv =
      c.Json("POST", "/v1/volumes/files/fs/move", {{"from", "/docs/a.txt"}, {"to", "/x/y/b.txt"}});
  EXPECT_EQ(mv.status, 200) << mv.body;
  auto list = c.Request("GET", "/v1/volumes/files/fs/list?path=/&depth=3").json();
  std::string paths;
  for (const auto& e : list["entries"]) paths += e["path"].get<std::string>() + " ";
  EXPECT_EQ(paths, "/docs /lost+found /x /x/y /x/y/b.txt ") << list.dump();

  // A sandbox sees what the API wrote, owned by its root, and can change it.
  std::string id =
      s.CreateSandbox({{"volumes", json::array({{{"name", "files"}, {"path", "/v"}}})}});
  EXPECT_EQ(
      Out(s.Exec(id,
                 "stat -c '%U %a' /v/x/y/b.txt && cat /v/x/y/b.txt && echo more >> /v/x/y/b.txt")),
      "root 600\n0123456789");
  // Links a hostile sandbox plants resolve inside the volume, never on the host.
  ASSERT_EQ(
      Code(s.Exec(id,
                  "ln -s / /v/root && ln -s ../../../../etc /v/up && ln -s /etc/hostname /v/h && "
                  "mkfifo /v/fifo")),
      0);
  for (const char* p : {"/root/etc/hostname", "/up/hostname", "/h", "/../../../../etc/hostname"}) {
    auto r = c.Request("GET", std::string("/v1/volumes/files/fs?path=") + p);
    EXPECT_EQ(r.status, 404) << p << " " << r.body;
    EXPECT_EQ(r.json()["code"], "file_not_found") << p;
  }
  // A write through a planted link lands inside the volume.
  ASSERT_EQ(c.Request("PUT", "/v1/volumes/files/fs?path=/root/tmp/planted", "p").status, 201);
  EXPECT_EQ(Out(s.Exec(id, "cat /v/tmp/planted")), "p");
  EXPECT_EQ(HostSh("test -e /tmp/planted && echo leaked || echo ok"), "ok\n");
  // A FIFO cannot stall the server.
  auto fifo = c.Request("GET", "/v1/volumes/files/fs?path=/fifo");
  EXPECT_EQ(fifo.status, 400) << fifo.body;
  EXPECT_EQ(c.Request("DELETE", "/v1/volumes/files/fs?path=/x&recursive=true").status, 204);
  EXPECT_EQ(c.Request("GET", "/v1/volumes/files/fs/stat?path=/x").status, 404);
}

TEST(Volume, BadRequestsGetClearErrors) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  CreateVolume(c, "v1", 16);
  EXPECT_EQ(c.Json("POST", "/v1/volumes", {{"name", "v1"}}).json()["code"], "conflict");
  for (const char* bad : {"", "Upper", "-dash", "a/b", ".."}) {
    auto r = c.Json("POST", "/v1/volumes", {{"name", bad}});
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
  }
  EXPECT_EQ(c.Json("POST", "/v1/volumes", {{"name", "big"}, {"size_mb", 1 << 29}}).status, 400);
  EXPECT_EQ(c.Json("POST", "/v1/volumes", {{"name", "x"}, {"bogus", 1}}).status, 400);
  EXPECT_EQ(c.Request("GET", "/v1/volumes/nope").json()["code"], "volume_not_found");
  EXPECT_EQ(c.Request("DELETE", "/v1/volumes/nope").status, 404);

  auto mk = [&](const json& vols) { return c.Json("POST", "/v1/sandboxes", {{"volumes", vols}}); };
  EXPECT_EQ(mk(json::array({{{"name", "nope"}, {"path", "/mnt"}}})).json()["code"],
            "volume_not_found");
  for (const char* path :
       {"relative", "/", "/proc/x", "/dev", "/sys/fs", "/a/../b", "/a//b", "/a/"}) {
    auto r = mk(json::array({{{"name", "v1"}, {"path", path}}}));
    EXPECT_EQ(r.status, 400) << path << " " << r.body;
  }
  EXPECT_EQ(
      mk(json::array({{{"name", "v1"}, {"path", "/a"}}, {{"name", "v1"}, {"path", "/a"}}})).status,
      400);
  EXPECT_EQ(mk(json::array({{{"name", "v1"}}})).status, 400);
  EXPECT_EQ(mk(json::array({"v1"})).status, 400);
  EXPECT_EQ(mk(json::object()).status, 400);
  // A mount path through a symlink of the template (/bin -> usr/bin on
  // merged-/usr systems, or any link) is refused, not followed.
  std::string probe = s.CreateSandbox();
  std::string link = Out(
      s.Exec(probe, "for p in /bin /lib /sbin /lib64; do test -L $p && { echo $p; break; }; done"));
  if (!link.empty()) {
    link.pop_back();
    auto r = mk(json::array({{{"name", "v1"}, {"path", link + "/vol"}}}));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(HostSh("ls /usr/bin/vol /usr/lib/vol /usr/sbin/vol 2>/dev/null | wc -l"), "0\n");
  }
  // Nested volumes mount parents first, whatever the request's order.
  CreateVolume(c, "v2", 16);
  auto nested =
      mk(json::array({{{"name", "v2"}, {"path", "/w/inner"}}, {{"name", "v1"}, {"path", "/w"}}}));
  ASSERT_EQ(nested.status, 201) << nested.body;
  std::string nid = nested.json()["id"];
  EXPECT_EQ(Code(s.Exec(nid, "echo o > /w/outer && echo i > /w/inner/f")), 0);
  EXPECT_EQ(c.Request("GET", "/v1/volumes/v2/fs?path=/f").body, "i\n");
  EXPECT_EQ(c.Request("GET", "/v1/volumes/v1/fs?path=/outer").body, "o\n");
  // The server kept serving through all of it.
  EXPECT_EQ(c.Request("GET", "/healthz").status, 200);
}

TEST(Volume, SurvivesAHutchdCrashWithItsSandbox) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  CreateVolume(c, "keep", 32);
  std::string id =
      s.CreateSandbox({{"volumes", json::array({{{"name", "keep"}, {"path", "/k"}}})}});
  ASSERT_EQ(Code(s.Exec(id, "echo before > /k/f")), 0);
  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto c2 = s.Client();
  // The adopted sandbox still has its volume, and the API sees the same.
  EXPECT_EQ(Out(s.Exec(id, "echo after >> /k/f && cat /k/f")), "before\nafter\n");
  EXPECT_EQ(c2.Request("GET", "/v1/volumes/keep/fs?path=/f").body, "before\nafter\n");
  EXPECT_EQ(c2.Request("DELETE", "/v1/volumes/keep").status, 409);
  ASSERT_EQ(c2.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  ASSERT_EQ(c2.Request("DELETE", "/v1/volumes/keep").status, 204);
  EXPECT_EQ(MountsUnder(s), "");
}

TEST(Volume, ACreateThatCrashedHalfwayIsCleanedAtStart) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  s.Stop();
  // What a crash between mkfs and the store commit leaves: a directory with
  // an image and no record.
  std::string dir = s.state_dir() + "/state/volumes/half";
  HostSh("mkdir -p " + dir + "/data && truncate -s 16M " + dir + "/volume.img");
  s.Restart();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(HostSh("test -e " + dir + " && echo left || echo gone"), "gone\n");
  EXPECT_EQ(s.Client().Request("GET", "/v1/volumes").json()["volumes"].size(), 0u);
}
