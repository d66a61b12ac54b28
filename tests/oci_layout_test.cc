// OCI image names and layouts: references are put in one form (":latest",
// the default registry) and anything that could reach skopeo's command
// line as an option is refused; an OCI layout's index, manifest and
// config give the image's identity and defaults, and malformed layouts
// (bad digests, several images, another OS) are refused with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/sha256.h"
#include "core/oci_layout.h"

using namespace hutch;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
std::string Canon(const std::string& ref, const std::string& reg) {
  auto r = CanonicalImageRef(ref, reg);
  return r.ok() ? *r : "error: " + r.error().message;
}
}  // namespace

TEST(OciRef, CanonicalFormAndDefaultRegistry) {
  EXPECT_EQ(Canon("python:3.12", ""), "python:3.12");
  EXPECT_EQ(Canon("alpine", ""), "alpine:latest");
  EXPECT_EQ(Canon("team/tool", ""), "team/tool:latest");
  EXPECT_EQ(Canon("127.0.0.1:5000/team/tool", ""), "127.0.0.1:5000/team/tool:latest");
  EXPECT_EQ(Canon("localhost/x:2", "reg.local:5000"), "localhost/x:2");
  EXPECT_EQ(Canon("python:3.12", "reg.local:5000"), "reg.local:5000/python:3.12");
  EXPECT_EQ(Canon("team/tool:1", "reg.local"), "reg.local/team/tool:1");
  const std::string digest = "x@sha256:" + std::string(64, 'a');
  EXPECT_EQ(Canon(digest, ""), digest);
  EXPECT_EQ(ImageRegistryOf("127.0.0.1:5000/team/tool:1"), "127.0.0.1:5000");
  EXPECT_EQ(ImageRegistryOf("python:3.12"), "");
  EXPECT_EQ(ImageRegistryOf("team/tool:1"), "");
  for (const char* bad : {"", "--src-creds=x", "-x", "a b", "a//b", "a/", "x:", "a\nb", "a;b",
                          "/abs", "docker://x"}) {
    auto r = CanonicalImageRef(bad, "");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, Code::kInvalidRequest) << bad;
    }
  }
}

namespace {

// A layout with one image: its blobs written under their real digests.
class Layout {
 public:
  Layout() {
    dir_ = fs::temp_directory_path() / ("oci-layout-test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "blobs/sha256");
  }
  ~Layout() { fs::remove_all(dir_); }
  std::string Blob(const std::string& bytes) {
    const std::string hex = Sha256Hex(bytes);
    std::ofstream(dir_ / "blobs/sha256" / hex) << bytes;
    return "sha256:" + hex;
  }
  void Index(const json& manifests) {
    std::ofstream(dir_ / "index.json") << json{{"schemaVersion", 2}, {"manifests", manifests}};
  }
  // A whole image of this config and `layers` layers (descriptors of
  // made-up blobs; the config's diff ids added when it has none); returns
  // the manifest's digest.
  std::string Image(json config, int layers = 1) {
    json descs = json::array(), diffs = json::array();
    for (int i = 0; i < layers; ++i) {
      descs.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"},
                       {"digest", "sha256:" + Sha256Hex("gz" + std::to_string(i))},
                       {"size", 10 + i}});
      diffs.push_back("sha256:" + Sha256Hex("tar" + std::to_string(i)));
    }
    if (!config.contains("rootfs")) config["rootfs"] = {{"type", "layers"}, {"diff_ids", diffs}};
    const std::string cd = Blob(config.dump());
    const std::string md = Blob(json{
        {"schemaVersion", 2},
        {"config", {{"digest", cd}, {"size", 1}}},
        {"layers", descs}}.dump());
    Index(json::array({{{"digest", md}, {"size", 1}}}));
    return md;
  }
  std::string dir() const { return dir_.string(); }

 private:
  fs::path dir_;
};

}  // namespace

TEST(OciLayout, ReadsIdentityAndDefaults) {
  Layout l;
  const std::string md =
      l.Image({{"os", "linux"},
               {"architecture", "amd64"},
               {"config",
                {{"User", "app:staff"},
                 {"WorkingDir", "/srv"},
                 {"Env", {"PATH=/usr/bin:/bin", "EMPTY=", "A=b=c", "=bad", "noequals"}},
                 {"Entrypoint", {"/bin/tini", "--"}},
                 {"Cmd", {"python3"}}}}});
  auto img = ReadOciLayout(l.dir());
  ASSERT_TRUE(img.ok()) << img.error().message;
  EXPECT_EQ(img->manifest_digest, md);
  EXPECT_EQ(img->defaults.user, "app:staff");
  EXPECT_EQ(img->defaults.workdir, "/srv");
  EXPECT_EQ(img->defaults.env, (std::map<std::string, std::string>{
                                   {"PATH", "/usr/bin:/bin"}, {"EMPTY", ""}, {"A", "b=c"}}));
  EXPECT_EQ(img->defaults.entrypoint, (std::vector<std::string>{"/bin/tini", "--"}));
  EXPECT_EQ(img->defaults.cmd, (std::vector<std::string>{"python3"}));

  // No config section at all: empty defaults.
  l.Image({{"os", "linux"}});
  auto bare = ReadOciLayout(l.dir());
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->defaults.env.empty());
  EXPECT_TRUE(bare->defaults.user.empty());
}

TEST(OciLayout, MalformedLayoutsAreRefused) {
  Layout l;
  l.Image({{"os", "windows"}});
  auto win = ReadOciLayout(l.dir());
  ASSERT_FALSE(win.ok());
  EXPECT_EQ(win.error().code, Code::kNotSupported);

  const std::string md = l.Image({{"os", "linux"}});
  l.Index(json::array({{{"digest", md}}, {{"digest", md}}}));
  EXPECT_FALSE(ReadOciLayout(l.dir()).ok());
  for (const char* d : {"sha256:../../etc/passwd", "md5:abc", "sha256:ABCDEF"}) {
    l.Index(json::array({{{"digest", d}}}));
    auto r = ReadOciLayout(l.dir());
    ASSERT_FALSE(r.ok()) << d;
    EXPECT_EQ(r.error().code, kImagePullFailed) << d;
  }
  l.Index(json::array({{{"digest", "sha256:" + std::string(64, '0')}}}));
  EXPECT_FALSE(ReadOciLayout(l.dir()).ok());
  EXPECT_FALSE(ReadOciLayout(l.dir() + "/nowhere").ok());

  // The config's layer digests must match the manifest's layers, and be
  // digests (they key directories).
  l.Image({{"os", "linux"}, {"rootfs", {{"diff_ids", json::array()}}}}, 2);
  auto count = ReadOciLayout(l.dir());
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.error().message.find("0 layer digests for 2 layers"), std::string::npos)
      << count.error().message;
  l.Image({{"os", "linux"}, {"rootfs", {{"diff_ids", {"sha256:../x"}}}}}, 1);
  EXPECT_FALSE(ReadOciLayout(l.dir()).ok());
  l.Image({{"os", "linux"}}, 0);
  EXPECT_TRUE(ReadOciLayout(l.dir()).ok());  // no layers: refused when unpacked
}

// A run of an image's layers as an image of its own, for umoci to apply:
// the manifest names those layers, the config those diff ids, the index
// that image alone under the tag; written blobs are content addressed.
TEST(OciLayout, LayerRunIsAnImageOfThoseLayers) {
  Layout l;
  l.Image({{"os", "linux"}, {"config", {{"User", "app"}}}, {"history", json::array({1, 2, 3})}}, 3);
  auto img = ReadOciLayout(l.dir());
  ASSERT_TRUE(img.ok()) << img.error().message;
  ASSERT_EQ(img->diff_ids.size(), 3u);
  ASSERT_TRUE(WriteOciLayerRun(l.dir(), *img, 1, 2, "run-1").ok());
  std::ifstream in(l.dir() + "/index.json");
  const json index = json::parse(in);
  ASSERT_EQ(index["manifests"].size(), 1u);
  EXPECT_EQ(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "run-1");
  auto run = ReadOciLayout(l.dir());
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->diff_ids, (std::vector<std::string>{img->diff_ids[1], img->diff_ids[2]}));
  EXPECT_EQ(run->manifest["layers"],
            (json{img->manifest["layers"][1], img->manifest["layers"][2]}));
  EXPECT_EQ(run->defaults.user, "app");
  EXPECT_FALSE(run->config.contains("history"));
  for (const std::string& d : {run->manifest_digest, run->config_digest}) {
    std::ifstream b(l.dir() + "/blobs/sha256/" + d.substr(7), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(b)), std::istreambuf_iterator<char>());
    EXPECT_EQ("sha256:" + Sha256Hex(bytes), d);
  }
  EXPECT_FALSE(WriteOciLayerRun(l.dir(), *img, 2, 2, "x").ok());
  EXPECT_FALSE(WriteOciLayerRun(l.dir(), *img, 0, 0, "x").ok());
}
