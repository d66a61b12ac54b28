// Templates from OCI images (issue 31): a loopback registry (Debian's
// docker-registry) serves images this test makes itself with umoci and
// pushes with skopeo (tests/support/oci_test_image.sh): three layers, one a
// whiteout, and a config with User, WorkingDir and Env. Sandboxes are
// created from them by name through /v1 ("image"), OpenSandbox (image.uri)
// and E2B (templateID "image:..."): they see the image's files, the
// whiteout applied, its user, workdir and env; a second create is a cache
// hit (hutch_image_pulls does not move). A corrupted layer, an unknown
// image and a blob that vanishes from the registry mid-pull register
// nothing and leave no temp dir.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/build_dirs.h"
#include "tests/support/exposition.h"
#include "tests/support/local_registry.h"
#include "tests/support/test_server.h"

using hutch::testing::HostSh;
using hutch::testing::LocalRegistry;
using hutch::testing::ParseExposition;
using hutch::testing::TempBuildDirs;
using hutch::testing::TempDir;
using hutch::testing::TestServer;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A number from hutchd's /metrics (-1: not there).
double Metric(const TestServer& s, const std::string& name) {
  return ParseExposition(s.Client().Request("GET", "/metrics").body).Value(name).value_or(-1);
}

size_t BuildDirCount(const TestServer& s) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.state_dir() + "/state/builds", ec)) {
    (void)e;
    ++n;
  }
  return n;
}

json ImageTemplates(const TestServer& s) {
  auto r = s.Client().Request("GET", "/v1/templates");
  json out = json::array();
  const json all = r.json();
  for (const auto& t : all["items"])
    if (t.value("name", "").rfind("image:", 0) == 0) out.push_back(t);
  return out;
}

// What a sandbox of the test image shows: its files, the whiteout, its
// user, workdir and env.
constexpr const char* kProbe =
    "cat /etc/first.txt /etc/second.txt /etc/mark.txt; "
    "test -e /etc/deleted.txt && echo deleted-present || echo deleted-gone; "
    "id -u; pwd; echo \"$GREETING\"";

std::vector<std::string> ServerArgs(const LocalRegistry& reg) {
  return {"--image-insecure-registry", reg.addr()};
}

}  // namespace

TEST(Image, CreateByNameThroughEveryDialectSeesTheImageAndSecondCreateIsCached) {
  LocalRegistry reg;
  ASSERT_TRUE(reg.Up());
  ASSERT_EQ(reg.Push("hutch/files:1", "files"), "");
  TestServer s(ServerArgs(reg));
  ASSERT_TRUE(s.ok());
  const std::string ref = reg.addr() + "/hutch/files:1";
  EXPECT_EQ(Metric(s, "hutch_image_pulls"), 0);

  // /v1: "image" pulls on first use.
  auto c = s.Client();
  auto created = c.Json("POST", "/v1/sandboxes", {{"image", ref}});
  ASSERT_EQ(created.status, 201) << created.body << s.Log();
  const std::string id = created.json().value("id", "");
  auto r = s.Exec(id, kProbe);
  ASSERT_EQ(r.value("exit_code", -1), 0) << r.dump();
  EXPECT_EQ(r.value("stdout", ""), "one\ntwo\nfiles\ndeleted-gone\n1000\n/home/app\nhello\n");
  EXPECT_EQ(Metric(s, "hutch_image_pulls"), 1);
  EXPECT_EQ(Metric(s, "hutch_image_cache_hits"), 0);
  // Listed as a template, with the image's own start command kept.
  auto listed = ImageTemplates(s);
  ASSERT_EQ(listed.size(), 1u) << listed.dump();
  EXPECT_EQ(listed[0].value("name", ""), "image:" + ref);
  EXPECT_EQ(listed[0]["spec"]["cmd"], json::array({"/bin/sh"}));
  const std::string hash = listed[0].value("hash", "");

  // /v1 again: a cache hit, no pull.
  auto again = c.Json("POST", "/v1/sandboxes", {{"image", ref}});
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(Metric(s, "hutch_image_pulls"), 1);
  EXPECT_EQ(Metric(s, "hutch_image_cache_hits"), 1);

  // OpenSandbox: image.uri names the image (not in the alias table).
  auto osb = c.Request("POST", "/opensandbox/v1/sandboxes",
                       json{{"image", {{"uri", ref}}},
                            {"entrypoint", json::array({"tail", "-f", "/dev/null"})},
                            {"resourceLimits", {{"cpu", "500m"}, {"memory", "512Mi"}}}}
                           .dump(),
                       {{"OPEN-SANDBOX-API-KEY", s.key()}, {"Content-Type", "application/json"}});
  ASSERT_TRUE(osb.status == 200 || osb.status == 201 || osb.status == 202) << osb.body;
  EXPECT_EQ(osb.json()["image"].value("uri", ""), ref) << osb.body;
  const std::string osb_id = osb.json().value("id", "");
  auto ro = s.Exec(osb_id, kProbe);
  EXPECT_EQ(ro.value("stdout", ""), "one\ntwo\nfiles\ndeleted-gone\n1000\n/home/app\nhello\n");

  // E2B: a templateID naming the image's template.
  auto e2b = c.Request("POST", "/e2b/sandboxes", json{{"templateID", "image:" + ref}}.dump(),
                       {{"X-API-Key", s.key()}, {"Content-Type", "application/json"}});
  ASSERT_EQ(e2b.status, 201) << e2b.body;
  const std::string e2b_id = e2b.json().value("sandboxID", "");
  auto re = s.Exec(e2b_id, kProbe);
  EXPECT_EQ(re.value("stdout", ""), "one\ntwo\nfiles\ndeleted-gone\n1000\n/home/app\nhello\n");
  EXPECT_EQ(Metric(s, "hutch_image_pulls"), 1);
  EXPECT_EQ(Metric(s, "hutch_image_cache_hits"), 3);

  // Another name of the same image: pulled (the name is new), stored once
  // (one build dir per image digest).
  const size_t dirs = BuildDirCount(s);
  ASSERT_EQ(HostSh("skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false docker://" +
                   ref + " docker://" + reg.addr() + "/hutch/files:other 2>&1"),
            "");
  auto other = c.Json("POST", "/v1/sandboxes", {{"image", reg.addr() + "/hutch/files:other"}});
  ASSERT_EQ(other.status, 201) << other.body;
  EXPECT_EQ(Metric(s, "hutch_image_pulls"), 2);
  EXPECT_EQ(BuildDirCount(s), dirs);
  listed = ImageTemplates(s);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].value("hash", ""), hash);
  EXPECT_EQ(listed[1].value("hash", ""), hash);

  // An image sharing its three layers with the first plus one of its own:
  // the three are not unpacked again (one new layer dir and the record).
  ASSERT_EQ(reg.Push("hutch/files:top", "files", "topmost"), "");
  auto top = c.Json("POST", "/v1/sandboxes", {{"image", reg.addr() + "/hutch/files:top"}});
  ASSERT_EQ(top.status, 201) << top.body;
  EXPECT_EQ(Metric(s, "hutch_image_pulls"), 3);
  EXPECT_EQ(Metric(s, "hutch_image_layers_reused"), 3);
  EXPECT_EQ(BuildDirCount(s), dirs + 2);
  EXPECT_EQ(
      s.Exec(top.json()["id"], std::string(kProbe) + "; cat /etc/top.txt").value("stdout", ""),
      "one\ntwo\nfiles\ndeleted-gone\n1000\n/home/app\nhello\ntopmost\n");

  // A template built on the image: hutch's steps on top of its root.
  auto built = c.Request("POST", "/v1/templates",
                         json{{"name", "on-image"},
                              {"from", "image:" + ref},
                              {"run", json::array({"echo built > /etc/built.txt"})}}
                             .dump(),
                         {{"Content-Type", "application/json"}});
  ASSERT_EQ(built.status, 201) << built.body;
  std::string on = s.CreateSandbox({{"template", "on-image"}});
  EXPECT_EQ(s.Exec(on, "cat /etc/built.txt /etc/first.txt; echo $GREETING").value("stdout", ""),
            "built\none\nhello\n");

  // A crashed and restarted server keeps the image templates: no pull.
  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto after = s.Client().Json("POST", "/v1/sandboxes", {{"image", ref}});
  ASSERT_EQ(after.status, 201) << after.body;
  EXPECT_EQ(Metric(s, "hutch_image_pulls"), 0);
  EXPECT_EQ(Metric(s, "hutch_image_cache_hits"), 1);
  EXPECT_TRUE(TempBuildDirs(s).empty());
}

TEST(Image, PullProgressStreamsAndBadNamesAreClearErrors) {
  LocalRegistry reg;
  ASSERT_TRUE(reg.Up());
  ASSERT_EQ(reg.Push("hutch/progress:1", "progress"), "");
  TestServer s(ServerArgs(reg));
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  // A template build from an image streams the pull's steps and log.
  std::vector<std::string> steps;
  bool pull_log = false;
  json done;
  const std::string spec =
      json{{"name", "progress"}, {"from", "image:" + reg.addr() + "/hutch/progress:1"}}.dump();
  auto r = c.SseRequest("POST", "/v1/templates", spec,
                        {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}},
                        [&](const hutch::client::SseEvent& e) {
                          json d = json::parse(e.data, nullptr, false);
                          if (e.event == "step") steps.push_back(d.value("name", ""));
                          if (e.event == "log" && d.value("step", "") == "pull" &&
                              d.value("text", "").find("Copying blob") != std::string::npos)
                            pull_log = true;
                          if (e.event == "done") done = d;
                          return true;
                        });
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_FALSE(done.is_null()) << r.body;
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[0], "pull");
  EXPECT_EQ(steps[1], "unpack");
  EXPECT_TRUE(pull_log);

  // Unknown image: 404 image_not_found; malformed: 400; nothing registered.
  auto missing = c.Json("POST", "/v1/sandboxes", {{"image", reg.addr() + "/hutch/nosuch:1"}});
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(missing.json().value("code", ""), "template_not_found") << missing.body;
  EXPECT_NE(missing.body.find("not found"), std::string::npos) << missing.body;
  auto bad = c.Json("POST", "/v1/sandboxes", {{"image", "--output=/etc/x"}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto both = c.Json("POST", "/v1/sandboxes", {{"image", "x:1"}, {"template", "base"}});
  EXPECT_EQ(both.status, 400) << both.body;
  // A registry that is not there: a pull failure that says why.
  auto gone = c.Json("POST", "/v1/sandboxes", {{"image", "127.0.0.1:1/hutch/x:1"}});
  EXPECT_EQ(gone.status, 503) << gone.body;
  EXPECT_EQ(gone.json().value("code", ""), "unavailable") << gone.body;
  EXPECT_NE(gone.body.find("skopeo"), std::string::npos) << gone.body;
  EXPECT_EQ(ImageTemplates(s).size(), 1u);
  EXPECT_TRUE(TempBuildDirs(s).empty());
}

TEST(Image, CorruptedLayerOrBlobGoneMidPullRegistersNothing) {
  LocalRegistry reg;
  ASSERT_TRUE(reg.Up());
  ASSERT_EQ(reg.Push("hutch/corrupt:1", "corrupt"), "");
  ASSERT_EQ(reg.Push("hutch/vanish:1", "vanish"), "");
  TestServer s(ServerArgs(reg));
  ASSERT_TRUE(s.ok());
  const size_t dirs = BuildDirCount(s);
  auto c = s.Client();

  // One byte of the first layer changed in the registry's storage: the
  // blob no longer matches its digest.
  auto layers = reg.Layers("hutch/corrupt", "1");
  ASSERT_EQ(layers.size(), 3u);
  {
    std::fstream f(reg.BlobFile(layers[0]), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekg(100);
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x55);
    f.seekp(100);
    f.write(&b, 1);
  }
  auto corrupt = c.Json("POST", "/v1/sandboxes", {{"image", reg.addr() + "/hutch/corrupt:1"}});
  EXPECT_EQ(corrupt.status, 503) << corrupt.body;
  EXPECT_EQ(corrupt.json().value("code", ""), "unavailable") << corrupt.body;
  // skopeo's reason: the digest (or the gzip checksum) does not match.
  EXPECT_TRUE(corrupt.body.find("igest") != std::string::npos ||
              corrupt.body.find("checksum") != std::string::npos)
      << corrupt.body;

  // The manifest is served, a layer is gone from the registry: the pull
  // stops half-way.
  auto vl = reg.Layers("hutch/vanish", "1");
  ASSERT_EQ(vl.size(), 3u);
  fs::remove(reg.BlobFile(vl[1]));
  auto vanish = c.Json("POST", "/v1/sandboxes", {{"image", reg.addr() + "/hutch/vanish:1"}});
  EXPECT_TRUE(vanish.status == 404 || vanish.status == 503) << vanish.body;

  EXPECT_TRUE(ImageTemplates(s).empty());
  EXPECT_TRUE(TempBuildDirs(s).empty());
  EXPECT_EQ(BuildDirCount(s), dirs);
  EXPECT_EQ(Metric(s, "hutch_image_pulls"), 2);
}

TEST(Image, RegistryGoneMidLayerLeavesNoHalfTemplate) {
  LocalRegistry reg;
  ASSERT_TRUE(reg.Up());
  ASSERT_EQ(reg.Push("hutch/cut:1", "cut"), "");
  // The pull goes through a proxy that stops half-way through the first
  // layer; once it has, the proxy and the registry are killed.
  const std::string port_file = reg.dir() + "/proxy.port";
  const std::string status_file = reg.dir() + "/proxy.status";
  const std::string port = reg.addr().substr(reg.addr().rfind(':') + 1);
  pid_t proxy = fork();
  if (proxy == 0) {
    const std::string script =
        std::string(getenv("HUTCH_SOURCE_DIR")) + "/tests/support/stalling_registry_proxy.py";
    execl("/usr/bin/python3", "python3", script.c_str(), port.c_str(), port_file.c_str(),
          status_file.c_str(), nullptr);
    _exit(127);
  }
  std::string proxy_port;
  for (int i = 0; i < 100 && proxy_port.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream(port_file) >> proxy_port;
  }
  ASSERT_FALSE(proxy_port.empty());
  const std::string via = "127.0.0.1:" + proxy_port;
  TestServer s({"--image-insecure-registry", via});
  ASSERT_TRUE(s.ok());
  const size_t dirs = BuildDirCount(s);

  hutch::client::Response created;
  std::thread create([&] {
    created = s.Client().Json("POST", "/v1/sandboxes", {{"image", via + "/hutch/cut:1"}});
  });
  bool stalled = false;
  for (int i = 0; i < 600 && !stalled; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stalled = fs::exists(status_file);
  }
  // Mid-pull: the temp dir is there, nothing is registered.
  EXPECT_TRUE(stalled);
  EXPECT_EQ(TempBuildDirs(s).size(), 1u);
  EXPECT_TRUE(ImageTemplates(s).empty());
  kill(proxy, SIGKILL);
  waitpid(proxy, nullptr, 0);
  reg.Stop();
  create.join();
  EXPECT_EQ(created.status, 503) << created.body;
  EXPECT_TRUE(ImageTemplates(s).empty());
  EXPECT_TRUE(TempBuildDirs(s).empty());
  EXPECT_EQ(BuildDirCount(s), dirs);
}

// A huge image (a 256 MiB layer of random bytes): hutchd's memory stays
// bounded while it is pulled and unpacked (skopeo and umoci stream it in
// their own processes), and the sandbox sees the whole file.
TEST(Image, HugeImagePullKeepsHutchdMemoryBounded) {
  constexpr int kMiB = 256;
  LocalRegistry reg;
  ASSERT_TRUE(reg.Up());
  ASSERT_EQ(reg.PushBig("hutch/huge:1", kMiB), "");
  TestServer s(ServerArgs(reg));
  ASSERT_TRUE(s.ok());
  const size_t before = s.RssBytes();
  std::atomic<size_t> peak{before};
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done) {
      peak = std::max<size_t>(peak, s.RssBytes());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto r = s.Client().Json("POST", "/v1/sandboxes", {{"image", reg.addr() + "/hutch/huge:1"}});
  done = true;
  watch.join();
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(hutch::testing::RssWithinBound(before, peak)) << before << " -> " << peak;
  EXPECT_EQ(s.Exec(r.json()["id"], "stat -c %s /big.bin").value("stdout", ""),
            std::to_string(size_t{kMiB} << 20) + "\n");
}
