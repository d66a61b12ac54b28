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
  // A whole image of this config; returns the manifest's digest.
  std::string Image(const json& config) {
    const std::string cd = Blob(config.dump());
    const std::string md = Blob(json{
        {"schemaVersion", 2},
        {"config", {{"digest", cd}, {"size", 1}}},
        {"layers", json::array()}}.dump());
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
}
