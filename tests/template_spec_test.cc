// Template specs: TOML and JSON parse into the same spec, bad specs are
// refused with the reason, the cache key follows what shapes the build
// (and not the name), and the Debian mirror comes from the host's apt
// source files in either format.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/debootstrap.h"
#include "core/template_spec.h"

using namespace hutch;
namespace fs = std::filesystem;

namespace {

const char* kToml = R"(
name = "python"
from = "debian:bookworm"
packages = ["python3", "python3-numpy"]
run = ["echo hi", "useradd -m user"]
user = "user"
workdir = "/home/user"
start = "sleep infinity"
ready = "true"
ready_timeout_seconds = 5

[env]
A = "1"

[[files]]
dest = "/etc/motd"
content = "hello\n"
mode = "0600"
owner = "user"

[[files]]
dest = "/opt/bin.dat"
content_b64 = "AAEC"
)";

std::string WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST(TemplateSpec, TomlParsesEveryField) {
  auto s = ParseTemplateText(kToml);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->name, "python");
  EXPECT_TRUE(s->FromDebian());
  EXPECT_EQ(s->DebianSuite(), "bookworm");
  EXPECT_EQ(s->packages, (std::vector<std::string>{"python3", "python3-numpy"}));
  EXPECT_EQ(s->run.size(), 2u);
  EXPECT_EQ(s->user, "user");
  EXPECT_EQ(s->workdir, "/home/user");
  EXPECT_EQ(s->start, "sleep infinity");
  EXPECT_EQ(s->ready_timeout_seconds, 5);
  EXPECT_EQ(s->env.at("A"), "1");
  ASSERT_EQ(s->files.size(), 2u);
  EXPECT_EQ(s->files[0].mode, 0600u);
  EXPECT_EQ(s->files[0].owner, "user");
  EXPECT_EQ(s->files[0].content, "hello\n");
  EXPECT_EQ(s->files[1].content, std::string("\x00\x01\x02", 3));
  EXPECT_EQ(s->files[1].mode, 0644u);
}

TEST(TemplateSpec, JsonAndTomlGiveTheSameSpec) {
  auto t = ParseTemplateText(kToml);
  ASSERT_TRUE(t.ok());
  auto j = ParseTemplateText(t->ToJson().dump());
  // ToJson carries hashes, not contents: compare through a JSON spec.
  nlohmann::json spec = {
      {"name", "python"},
      {"from", "debian:bookworm"},
      {"packages", {"python3", "python3-numpy"}},
      {"run", {"echo hi", "useradd -m user"}},
      {"user", "user"},
      {"workdir", "/home/user"},
      {"start", "sleep infinity"},
      {"ready", "true"},
      {"ready_timeout_seconds", 5},
      {"env", {{"A", "1"}}},
      {"files",
       {{{"dest", "/etc/motd"}, {"content", "hello\n"}, {"mode", "0600"}, {"owner", "user"}},
        {{"dest", "/opt/bin.dat"}, {"content_b64", "AAEC"}}}}};
  auto fromj = ParseTemplateJson(spec);
  ASSERT_TRUE(fromj.ok()) << fromj.error().message;
  EXPECT_EQ(fromj->Normalized(), t->Normalized());
  EXPECT_FALSE(j.ok());  // ToJson is a view (sha256, size), not a spec
}

TEST(TemplateSpec, BadSpecsSayWhy) {
  struct Case {
    const char* text;
    const char* why;
  } cases[] = {
      {"from = \"base\"\n", "name"},
      {"name = \"UPPER\"\n", "name"},
      {"name = \"a\"\nfrom = \"a\"\n", "itself"},
      {"name = \"a\"\nfrom = \"debian:\"\n", "suite"},
      // Issue 32: the suite goes on debootstrap's command line, run as the
      // host's root: nothing that reads as an option, or is not a suite.
      {"name = \"a\"\nfrom = \"debian:--foreign\"\n", "'from'"},
      {"name = \"a\"\nfrom = \"debian:-v\"\n", "'from'"},
      {"name = \"a\"\nfrom = \"debian:1bookworm\"\n", "'from'"},
      {"name = \"a\"\nfrom = \"debian:book worm\"\n", "'from'"},
      {"name = \"a\"\nfrom = \"debian:Bookworm\"\n", "'from'"},
      {"name = \"a\"\npackages = [\"bad pkg\"]\n", "package"},
      {"name = \"a\"\nrun = \"echo\"\nbogus = true\n", "unknown key 'bogus'"},
      {"name = \"a\"\nworkdir = \"rel\"\n", "absolute"},
      {"name = \"a\"\n[[files]]\ndest = \"/x/../../etc\"\n", "dest"},
      {"name = \"a\"\n[[files]]\ndest = \"/x\"\nsrc = \"local\"\n", "src"},
      {"name = \"a\"\n[[files]]\ndest = \"/x\"\nmode = \"999\"\n", "mode"},
      {"name = \"a\"\n[[files]]\ndest = \"/x\"\ncontent_b64 = \"!!\"\n", "base64"},
      {"name = \"a\"\nready_timeout_seconds = 0\n", "ready_timeout_seconds"},
      {"name = \"a\"\nrun = [\n", "TOML"},
      {"{\"name\": ", "JSON"},
  };
  for (const auto& c : cases) {
    auto s = ParseTemplateText(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.error().code, Code::kInvalidRequest);
    EXPECT_NE(s.error().message.find(c.why), std::string::npos)
        << c.text << " -> " << s.error().message;
  }
  // A single string is one run entry.
  auto one = ParseTemplateText("name = \"a\"\nrun = \"make\"\n");
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(one->run, std::vector<std::string>{"make"});
  EXPECT_EQ(one->from, "base");
}

TEST(TemplateSpec, CacheKeyFollowsContentNotName) {
  auto a = ParseTemplateText(kToml);
  ASSERT_TRUE(a.ok());
  const std::string h = TemplateBuildHash(*a, "debootstrap:bookworm:m", 1000000);
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h, TemplateBuildHash(*a, "debootstrap:bookworm:m", 1000000));
  TemplateSpec renamed = *a;
  renamed.name = "other";
  renamed.description = "words";
  EXPECT_EQ(TemplateBuildHash(renamed, "debootstrap:bookworm:m", 1000000), h);
  TemplateSpec pkg = *a;
  pkg.packages.push_back("python3-scipy");
  EXPECT_NE(TemplateBuildHash(pkg, "debootstrap:bookworm:m", 1000000), h);
  TemplateSpec file = *a;
  file.files[0].content = "hello!\n";
  EXPECT_NE(TemplateBuildHash(file, "debootstrap:bookworm:m", 1000000), h);
  TemplateSpec env = *a;
  env.env["B"] = "2";
  EXPECT_NE(TemplateBuildHash(env, "debootstrap:bookworm:m", 1000000), h);
  EXPECT_NE(TemplateBuildHash(*a, "parent-hash-2", 1000000), h);
  EXPECT_NE(TemplateBuildHash(*a, "debootstrap:bookworm:m", 2000000), h);
}

TEST(DebianMirror, ReadFromDeb822AndOneLineSources) {
  fs::path dir = fs::temp_directory_path() / ("hutch-apt-" + std::to_string(getpid()));
  fs::remove_all(dir);
  WriteFile(dir / "sources.list.d/debian.sources",
            "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
            "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
            "Suites: bookworm-security\nComponents: main\n");
  WriteFile(dir / "sources.list.d/other.list",
            "deb [arch=amd64] https://vendor.example/apt stable main\n");
  auto m = FindDebianMirror("bookworm", dir.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(*m, "http://mirror.example/debian");
  // A suite no source names: the Debian archive the host uses serves it.
  auto t = FindDebianMirror("trixie", dir.string());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(*t, "http://mirror.example/debian");

  fs::remove_all(dir);
  WriteFile(dir / "sources.list",
            "# comment\ndeb http://one.example/debian bookworm main\n"
            "deb-src http://src.example/debian bookworm main\n");
  auto l = FindDebianMirror("bookworm", dir.string());
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(*l, "http://one.example/debian");

  fs::remove_all(dir);
  fs::create_directories(dir);
  auto none = FindDebianMirror("bookworm", dir.string());
  EXPECT_FALSE(none.ok());
  fs::remove_all(dir);
}

// Where a build sandbox's apt goes: every http(s) source host, once, no
// port; IPv6 literals are skipped (sandboxes have no IPv6).
TEST(DebianMirror, SourceHostsAreEveryHttpSourceOnce) {
  fs::path dir = fs::temp_directory_path() / ("hutch-apt-h-" + std::to_string(getpid()));
  fs::remove_all(dir);
  WriteFile(dir / "sources.list",
            "deb http://mirror.example/debian bookworm main\n"
            "deb http://10.0.0.5:3142/debian bookworm-updates main\n"
            "deb http://[fd00::1]:3142/debian bookworm main\n"
            "deb file:/srv/local ./\n");
  WriteFile(dir / "sources.list.d/debian.sources",
            "Types: deb\nURIs: http://mirror.example/debian-security https://vendor.example/apt\n"
            "Suites: bookworm-security\nComponents: main\n");
  EXPECT_EQ(AptSourceHosts(dir.string()),
            (std::vector<std::string>{"mirror.example", "10.0.0.5", "vendor.example"}));
  fs::remove_all(dir);
  EXPECT_TRUE(AptSourceHosts(dir.string()).empty());
}

// Issue 32: the mirror is debootstrap's last argument; only an http(s) URL
// with a host and a path gets there.
TEST(DebianMirror, GrammarAcceptsHttpUrlsOnly) {
  for (const char* ok : {"http://mirror.example.net/debian", "https://mirror.example:8443/debian/",
                         "http://10.0.0.1/debian", "http://[fd00::1]:3142/debian"})
    EXPECT_TRUE(ValidDebianMirror(ok)) << ok;
  for (const char* bad :
       {"", "-http://x/debian", "--foreign", "ftp://x/debian", "file:/srv/debian", "http:///debian",
        "http://host", "http://host/", "http://host/de bian", "http://host/debian\n",
        "http://-host/debian", "http://host/debian --include=x", "http://host/debian\t",
        "http://user@host/debian", "http://host/debian?x=1"})
    EXPECT_FALSE(ValidDebianMirror(bad)) << bad;
  for (const char* ok : {"bookworm", "sid", "trixie-backports", "stable"})
    EXPECT_TRUE(ValidDebianSuite(ok)) << ok;
  for (const char* bad : {"", "-x", "--foreign", "1x", "Bookworm", "book worm", "a/b", "a.b"})
    EXPECT_FALSE(ValidDebianSuite(bad)) << bad;
}

TEST(DebianMirror, SourcesWhoseUriIsNoMirrorAreSkipped) {
  fs::path dir = fs::temp_directory_path() / ("hutch-apt-bad-" + std::to_string(getpid()));
  fs::remove_all(dir);
  WriteFile(dir / "sources.list",
            "deb file:/srv/debian bookworm main\n"
            "deb http://-evil.example/debian bookworm main\n"
            "deb http://good.example/debian bookworm main\n");
  auto m = FindDebianMirror("bookworm", dir.string());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(*m, "http://good.example/debian");
  fs::remove_all(dir);
  WriteFile(dir / "sources.list", "deb file:/srv/debian bookworm main\n");
  EXPECT_FALSE(FindDebianMirror("bookworm", dir.string()).ok());
  fs::remove_all(dir);
}

// Ordered steps (docs/templates.md "Ordered steps"): parsed in order with
// their kinds, refused with the reason, hashed by content, and a spec
// without them keeps the build hash it had before steps existed.
TEST(TemplateSpec, OrderedStepsParseInOrder) {
  const char* toml = R"(
name = "app"
from = "base"

[[steps]]
kind = "user"
user = "app"

[[steps]]
kind = "workdir"
path = "/srv/app"

[[steps]]
kind = "env"
env = { MODE = "prod" }

[[steps]]
kind = "copy"
dest = "config.json"
content = "{}"
mode = "0600"
owner = "app"

[[steps]]
kind = "copy"
dest = "/srv/app/"
archive_b64 = "AAEC"
archive_path = "src"

[[steps]]
kind = "run"
command = "make"
user = "root"
)";
  auto s = ParseTemplateText(toml);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->steps.size(), 6u);
  using K = TemplateStep::Kind;
  EXPECT_EQ(s->steps[0].kind, K::kUser);
  EXPECT_EQ(s->steps[0].user, "app");
  EXPECT_EQ(s->steps[1].kind, K::kWorkdir);
  EXPECT_EQ(s->steps[1].path, "/srv/app");
  EXPECT_EQ(s->steps[2].env.at("MODE"), "prod");
  EXPECT_EQ(s->steps[3].kind, K::kCopy);
  EXPECT_FALSE(s->steps[3].archive);
  EXPECT_EQ(s->steps[3].data, "{}");
  EXPECT_EQ(s->steps[3].mode, 0600);
  EXPECT_EQ(s->steps[3].owner, "app");
  EXPECT_TRUE(s->steps[4].archive);
  EXPECT_EQ(s->steps[4].data, std::string("\x00\x01\x02", 3));
  EXPECT_EQ(s->steps[4].archive_path, "src");
  EXPECT_EQ(s->steps[4].mode, -1);
  EXPECT_EQ(s->steps[5].command, "make");
  EXPECT_EQ(s->steps[5].user, "root");
  // The API view keeps sizes, not bytes.
  auto j = s->ToJson();
  EXPECT_EQ(j["steps"][3]["size"], 2);
  EXPECT_FALSE(j["steps"][3].contains("data"));
}

TEST(TemplateSpec, BadStepsSayWhy) {
  auto bad = [](const std::string& step) {
    auto s = ParseTemplateText(R"({"name":"x","steps":[)" + step + "]}");
    return s.ok() ? std::string("(accepted)") : s.error().message;
  };
  EXPECT_NE(bad(R"({"kind":"shell","command":"x"})").find("'kind' must be"), std::string::npos);
  EXPECT_NE(bad(R"({"kind":"run"})").find("needs 'command'"), std::string::npos);
  EXPECT_NE(bad(R"({"kind":"run","command":"x","path":"/"})").find("unknown key 'path'"),
            std::string::npos);
  EXPECT_NE(bad(R"({"kind":"copy","dest":"/a"})").find("needs one of"), std::string::npos);
  EXPECT_NE(
      bad(R"({"kind":"copy","dest":"/a","content":"x","content_b64":"eA=="})").find("needs one of"),
      std::string::npos);
  EXPECT_NE(bad(R"({"kind":"copy","dest":"/a","src":"local.txt"})").find("read by `hutch"),
            std::string::npos);
  EXPECT_NE(bad(R"({"kind":"copy","dest":"/a","content":"x","archive_path":"b"})")
                .find("goes with 'archive_b64'"),
            std::string::npos);
  EXPECT_NE(bad(R"({"kind":"copy","dest":"/a","content":"x","mode":"9"})").find("octal"),
            std::string::npos);
  EXPECT_NE(bad(R"({"kind":"env","env":{"A=B":"1"}})").find("not valid"), std::string::npos);
  EXPECT_NE(bad(R"({"kind":"user","user":"a b"})").find("user name"), std::string::npos);
  EXPECT_NE(bad(R"({"kind":"workdir"})").find("needs 'path'"), std::string::npos);
  EXPECT_NE(bad(R"("run x")").find("must be a table"), std::string::npos);
}

TEST(TemplateSpec, StepsShapeTheBuildHashAndOldSpecsKeepTheirs) {
  auto old_spec = ParseTemplateText(R"({"name":"a","run":["true"]})");
  ASSERT_TRUE(old_spec.ok());
  // A spec without steps normalizes without a "steps" key: its hash is the
  // one builds made before steps existed.
  EXPECT_FALSE(old_spec->Normalized().contains("steps"));
  auto with = [](const std::string& steps) {
    auto s = ParseTemplateText(R"({"name":"a","run":["true"],"steps":[)" + steps + "]}");
    EXPECT_TRUE(s.ok()) << s.error().message;
    return TemplateBuildHash(*s, "p", 1000000);
  };
  const std::string run_then_user =
      with(R"({"kind":"run","command":"id"},{"kind":"user","user":"app"})");
  const std::string user_then_run =
      with(R"({"kind":"user","user":"app"},{"kind":"run","command":"id"})");
  EXPECT_NE(run_then_user, user_then_run);  // order is part of the build
  EXPECT_NE(TemplateBuildHash(*old_spec, "p", 1000000), run_then_user);
  const std::string copy_a = with(R"({"kind":"copy","dest":"/f","content":"a"})");
  const std::string copy_b = with(R"({"kind":"copy","dest":"/f","content":"b"})");
  EXPECT_NE(copy_a, copy_b);  // file contents by hash
  EXPECT_EQ(copy_a, with(R"({"kind":"copy","dest":"/f","content_b64":"YQ=="})"));
}
