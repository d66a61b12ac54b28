// Design item 3 (security-and-reliability.md): a path with `..`, an
// absolute symlink, a symlink to /proc/1/root and a symlink swapped during
// the operation, through every file API of every dialect, never read or
// write outside the sandbox's root (or the volume's).
//
// The file APIs: hutch /v1 sandbox files (read, write, delete, list, stat,
// mkdir, move from, move to), /v1 volume files (the same, run by hutchd on
// the host, not by the agent), and E2B envd (GET/POST /files, and the
// filesystem.Filesystem calls Stat, ListDir, MakeDir, Remove, Move,
// CreateWatcher). Each test sends every API every path of its kind.
//
// What proves nothing got out: the host holds a secret file and a
// host-only directory under /tmp, both named with a random token. After
// the calls, no answer carries the secret or the host-only name, the
// sandbox holds no copy of the secret, and the host's /tmp, /, /root and
// /home hold exactly those two token entries, unchanged.
//
// With the vm driver (HUTCH_TEST_DRIVER=vm) the sandbox's file APIs (v1
// and envd) are sent the same paths, resolved by the agent inside the
// guest. The volume file API is left out there: it runs in hutchd on the
// host whatever the driver (the jail run covers it), and vm sandboxes
// cannot mount volumes yet (501), so no vm sandbox can plant links in one.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/shared_server.h"

using namespace std::string_literals;
using hutch::client::HttpClient;
using hutch::client::Response;
using hutch::testing::OnVm;
using hutch::testing::RandomHex;
using hutch::testing::StdoutOf;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string ReadHostFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One file API: `call(path)` sends one request naming `path`.
struct FileApi {
  std::string name;
  bool volume = false;  // paths are inside the volume, not the sandbox
  std::function<Response(const std::string& path)> call;
};

class FilePath : public hutch::testing::SharedServerTest {
 protected:
  static constexpr const char* kVolume = "secvol";
  static constexpr const char* kVolumeMount = "/mnt/vol";

  static void SetUpTestSuite() {
    // The suite's own sandbox carries a volume, so the volume API gets
    // the same planted links as the sandbox's files.
    StartServer();
    if (!server().ok()) return;
    token_ = RandomHex(16);
    name_ = "hutch-host-secret-" + token_;
    marker_ = "/tmp/" + name_;
    host_only_ = "/tmp/hutch-host-only-" + token_;
    secret_ = "HOST-SECRET-" + RandomHex(32);
    std::ofstream(marker_, std::ios::binary) << secret_;
    fs::create_directory(host_only_);
    auto c = server().Client();
    if (OnVm()) {
      CreateSuiteSandbox();
    } else {
      if (c.Json("POST", "/v1/volumes", {{"name", kVolume}, {"size_mb", 32}}).status != 201) return;
      CreateSuiteSandbox({{"volumes", json::array({{{"name", kVolume}, {"path", kVolumeMount}}})}});
    }
    if (sandbox().empty()) return;
    const std::string& id = sandbox();
    auto t = c.Request("GET", "/e2b/sandboxes/" + id, "", {{"X-API-Key", server().key()}});
    token_e2b_ = t.json().is_object() ? t.json().value("envdAccessToken", "") : "";
    // The same links in the sandbox (/home/user/links) and in the volume
    // (/links of the volume): absolute, to /proc/1/root and friends, `..`.
    const std::string links =
        "ln -s " + marker_ +
        " abs && ln -s / slash && ln -s /proc/1/root p1 && ln -s /proc/self/root pself && "
        "ln -s /proc/1/cwd cwd1 && ln -s ../../../../../../.. up && echo ok";
    if (OnVm()) {
      auto r = server().Exec(id, "mkdir -p /home/user/links && cd /home/user/links && " + links);
      ready_ = StdoutOf(r) == "ok\n";
      return;
    }
    auto r = server().Exec(id, "mkdir -p /home/user/links " + std::string(kVolumeMount) +
                                   "/links && cd /home/user/links && " + links + " && cd " +
                                   kVolumeMount + "/links && " + links);
    ready_ = StdoutOf(r) == "ok\nok\n";
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!marker_.empty()) fs::remove(marker_, ec);
    if (!host_only_.empty()) fs::remove_all(host_only_, ec);
    SharedServerTest::TearDownTestSuite();
  }
  void SetUp() override {
    SharedServerTest::SetUp();
    ASSERT_TRUE(ready_) << "setup of the suite's sandbox, volume and links failed";
    ASSERT_FALSE(token_e2b_.empty()) << "no envd access token";
    ASSERT_EQ(ReadHostFile(marker_), secret_);
  }

  // Every file API of every dialect.
  static std::vector<FileApi> Apis() {
    const std::string id = sandbox();
    const std::string sb = "/v1/sandboxes/" + sandbox() + "/fs";
    const std::string vol = "/v1/volumes/"s + kVolume + "/fs";
    auto v1 = [] { return server().Client(); };
    auto envd = [id] {
      return std::map<std::string, std::string>{{"E2b-Sandbox-Id", id},
                                                {"X-Access-Token", token_e2b_}};
    };
    auto rpc = [envd](const std::string& method, const json& body) {
      HttpClient c("127.0.0.1", server().port());
      auto h = envd();
      h["Content-Type"] = "application/json";
      return c.Request("POST", "/e2b/filesystem.Filesystem/" + method, body.dump(), h);
    };
    const std::string payload = "SANDBOX-WRITE-" + token_;
    std::vector<FileApi> apis;
    for (bool volume : {false, true}) {
      if (volume && OnVm()) continue;  // (see the top of the file)
      const std::string base = volume ? vol : sb;
      const std::string tag = volume ? "v1 volume " : "v1 sandbox ";
      // A file of our own to move onto the path.
      const std::string src = volume ? "/mv-src" : "/home/user/mv-src";
      apis.push_back({tag + "read", volume, [=](const std::string& p) {
                        return v1().Request("GET", base + "?path=" + p);
                      }});
      apis.push_back({tag + "write", volume, [=](const std::string& p) {
                        return v1().Request("PUT", base + "?path=" + p + "-w", payload);
                      }});
      apis.push_back({tag + "list", volume, [=](const std::string& p) {
                        return v1().Request("GET", base + "/list?path=" + p + "&depth=2");
                      }});
      apis.push_back({tag + "stat", volume, [=](const std::string& p) {
                        return v1().Request("GET", base + "/stat?path=" + p);
                      }});
      apis.push_back({tag + "mkdir", volume, [=](const std::string& p) {
                        return v1().Json("POST", base + "/mkdir", {{"path", p + "-d"}});
                      }});
      apis.push_back(
          {tag + "move from", volume, [=](const std::string& p) {
             return v1().Json("POST", base + "/move", {{"from", p}, {"to", src + "-moved"}});
           }});
      apis.push_back({tag + "move to", volume, [=](const std::string& p) {
                        v1().Request("PUT", base + "?path=" + src, payload);
                        return v1().Json("POST", base + "/move", {{"from", src}, {"to", p + "-m"}});
                      }});
      apis.push_back({tag + "delete", volume, [=](const std::string& p) {
                        return v1().Request("DELETE", base + "?path=" + p + "&recursive=true");
                      }});
    }
    apis.push_back({"e2b GET /files", false, [=](const std::string& p) {
                      HttpClient c("127.0.0.1", server().port());
                      return c.Request("GET", "/e2b/files?path=" + p, "", envd());
                    }});
    apis.push_back({"e2b POST /files", false, [=](const std::string& p) {
                      HttpClient c("127.0.0.1", server().port());
                      auto h = envd();
                      h["Content-Type"] = "application/octet-stream";
                      return c.Request("POST", "/e2b/files?path=" + p + "-e", payload, h);
                    }});
    apis.push_back({"e2b Stat", false, [=](const std::string& p) {
                      return rpc("Stat", {{"path", p}});
                    }});
    apis.push_back({"e2b ListDir", false, [=](const std::string& p) {
                      return rpc("ListDir", {{"path", p}, {"depth", 2}});
                    }});
    apis.push_back({"e2b MakeDir", false, [=](const std::string& p) {
                      return rpc("MakeDir", {{"path", p + "-ed"}});
                    }});
    apis.push_back({"e2b Move from", false, [=](const std::string& p) {
                      return rpc("Move", {{"source", p}, {"destination", "/home/user/e2b-moved"}});
                    }});
    apis.push_back(
        {"e2b Move to", false, [=](const std::string& p) {
           v1().Request("PUT", sb + "?path=/home/user/e2b-src", payload);
           return rpc("Move", {{"source", "/home/user/e2b-src"}, {"destination", p + "-em"}});
         }});
    apis.push_back({"e2b CreateWatcher", false, [=](const std::string& p) {
                      return rpc("CreateWatcher", {{"path", p}, {"recursive", true}});
                    }});
    apis.push_back({"e2b Remove", false, [=](const std::string& p) {
                      return rpc("Remove", {{"path", p}});
                    }});
    return apis;
  }

  // The link directory of an API, as that API names it.
  static std::string Links(const FileApi& api) {
    return api.volume ? "/links" : "/home/user/links";
  }

  // One answer: never the host's secret, never a host-only name, never a
  // server fault.
  static void ExpectContained(const FileApi& api, const std::string& path, const Response& r) {
    EXPECT_EQ(r.body.find(secret_), std::string::npos)
        << api.name << " " << path << " returned the host file";
    EXPECT_EQ(r.body.find("hutch-host-only-" + token_), std::string::npos)
        << api.name << " " << path << " listed the host's /tmp: " << r.body;
    EXPECT_LT(r.status, 500) << api.name << " " << path << ": " << r.body;
    EXPECT_GT(r.status, 0) << api.name << " " << path;
  }

  // Sends every path through every API.
  static int SendAll(const std::vector<std::function<std::string(const FileApi&)>>& paths) {
    int calls = 0;
    for (const auto& api : Apis()) {
      for (const auto& make : paths) {
        const std::string p = make(api);
        if (p.empty()) continue;
        Response r;
        try {
          r = api.call(p);
        } catch (const std::exception& e) {
          ADD_FAILURE() << api.name << " " << p << ": " << e.what();
          continue;
        }
        ExpectContained(api, p, r);
        ++calls;
      }
    }
    return calls;
  }

  // The host still holds exactly its two token entries, unchanged, and the
  // sandbox (and its volume) hold no copy of the secret.
  static void ExpectHostUntouched(const std::string& when) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const char* dir : {"/tmp", "/", "/root", "/home"})
      for (auto& e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().find(token_) != std::string::npos)
          found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    EXPECT_EQ(found, (std::vector<std::string>{host_only_, marker_})) << when;  // sorted
    EXPECT_EQ(ReadHostFile(marker_), secret_) << when;
    EXPECT_TRUE(fs::is_empty(host_only_, ec)) << when;
    const std::string volume = OnVm() ? "" : kVolumeMount;
    EXPECT_EQ(Sh("grep -rl " + secret_ + " /home /tmp /root " + volume + " 2>/dev/null | wc -l"),
              "0\n")
        << when << ": the secret got into the sandbox";
  }

  static inline std::string token_e2b_, token_, name_, marker_, host_only_, secret_;
  static inline bool ready_ = false;
};

}  // namespace

TEST_F(FilePath, DotDotNeverLeavesTheRoot) {
  const std::string n = name_;
  int calls = SendAll({
      [n](const FileApi&) { return "/../../../../tmp/" + n; },
      [n](const FileApi&) { return "../../../../../../tmp/" + n; },
      [n](const FileApi&) { return "/tmp/../../tmp/" + n; },
      [n](const FileApi& a) { return Links(a) + "/../../../../../../tmp/" + n; },
      // A relative link made of `..` only.
      [n](const FileApi& a) { return Links(a) + "/up/tmp/" + n; },
  });
  EXPECT_GT(calls, OnVm() ? 80 : 100);  // 17 APIs on vm, 25 with the volume's
  ExpectHostUntouched("after `..` paths");
  // The `..` writes landed inside: in the sandbox's own /tmp, and in the
  // volume's root for the volume API.
  EXPECT_EQ(Sh("cat /tmp/" + n + "-w"), "SANDBOX-WRITE-" + token_);
  if (OnVm()) return;
  EXPECT_EQ(Sh("cat "s + kVolumeMount + "/tmp/" + n + "-w 2>/dev/null || cat " + kVolumeMount +
               "/" + n + "-w"),
            "SANDBOX-WRITE-" + token_);
}

TEST_F(FilePath, AbsoluteSymlinkResolvesInsideTheRoot) {
  const std::string n = name_;
  int calls = SendAll({
      [](const FileApi& a) { return Links(a) + "/abs"; },
      [n](const FileApi& a) { return Links(a) + "/slash/tmp/" + n; },
      [](const FileApi& a) { return Links(a) + "/slash/etc/hostname"; },
  });
  EXPECT_GT(calls, OnVm() ? 45 : 60);
  ExpectHostUntouched("after absolute symlinks");
  // The sandbox's own /etc/hostname is what a read through `slash` gives.
  auto r = server().Client().Request(
      "GET", "/v1/sandboxes/" + sandbox() + "/fs?path=/home/user/links/slash/etc/hostname");
  if (r.status == 200) {
    EXPECT_EQ(r.body, Sh("cat /etc/hostname"));
  }
}

TEST_F(FilePath, SymlinkToProc1RootStaysInside) {
  const std::string n = name_;
  int calls = SendAll({
      [n](const FileApi& a) { return Links(a) + "/p1/tmp/" + n; },
      [n](const FileApi& a) { return Links(a) + "/pself/tmp/" + n; },
      [n](const FileApi& a) { return Links(a) + "/cwd1/../../tmp/" + n; },
      [n](const FileApi&) { return "/proc/1/root/tmp/" + n; },
      [n](const FileApi&) { return "/proc/self/root/tmp/" + n; },
      [n](const FileApi&) { return "/proc/1/cwd/../../tmp/" + n; },
  });
  EXPECT_GE(calls, OnVm() ? 100 : 150);
  ExpectHostUntouched("after /proc/*/root links");
}

TEST_F(FilePath, SymlinkSwappedDuringTheOperationNeverEscapes) {
  // <links>/race is atomically exchanged (renameat2 RENAME_EXCHANGE, no
  // forks, thousands of flips a second) between a real directory, a link
  // to / and a link to /proc/1/root, in the sandbox and in the volume, by
  // a detached loop bounded by `timeout`.
  const std::string flipper =
      "import ctypes, os, sys\n"
      "os.chdir(sys.argv[1])\n"
      "os.makedirs('race.dir/tmp', exist_ok=True)\n"
      "os.symlink('/', 'race')\n"
      "os.symlink('/proc/1/root', 'race.proc')\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "while True:\n"
      "  for other in (b'race.dir', b'race.proc', b'race.dir', b'race.proc'):\n"
      "    if libc.renameat2(-100, b'race', -100, other, 2) != 0: raise "
      "OSError(ctypes.get_errno(), 'renameat2')\n";
  auto c = server().Client();
  ASSERT_EQ(c.Request("PUT", "/v1/sandboxes/" + sandbox() + "/fs?path=/home/user/flip.py", flipper)
                .status,
            201);
  std::vector<std::string> flip_dirs = {"/home/user/links"};
  if (!OnVm()) flip_dirs.push_back(kVolumeMount + "/links"s);
  for (const std::string& dir : flip_dirs) {
    auto r = hutch::testing::StartDetached(server(), sandbox(),
                                           "timeout 120 python3 /home/user/flip.py " + dir);
    ASSERT_EQ(r["_status"], 200) << r.dump();
  }
  const std::string count = "ps -eo args | grep -c '^python3 /home/user/flip.py'";
  bool running = false;
  for (int i = 0; i < 100 && !running; ++i) {
    running = Sh(count) == std::to_string(flip_dirs.size()) + "\n";
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(running) << "flippers not running: " << Sh("ps -eo args");
  const std::string n = name_;
  int calls = 0;
  for (int round = 0; round < 6; ++round) {
    calls += SendAll({
        [n](const FileApi& a) { return Links(a) + "/race/tmp/" + n; },
        [](const FileApi& a) { return Links(a) + "/race/tmp"; },
    });
  }
  std::cout << "symlink race: " << calls << " calls while the link flipped\n";
  // (A flipper may stop early: the delete and move calls above remove
  // the directory it swaps. Both ran while the first rounds went out.)
  std::cout << "flippers still running: " << Sh(count);
  ExpectHostUntouched("after the symlink race");
  Exec("pkill -f flip.py; true");
}
