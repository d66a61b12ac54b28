// Templates built from a spec on `base` (no debootstrap, so fast): a run
// step's files reach sandboxes made from the template, an unchanged rebuild
// is a cache hit, a failing step reports its step, exit code and log tail
// and leaves nothing registered, and a restart removes a crashed build's
// temp dir. The debootstrap path is template_debian_test (label slow).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/build_dirs.h"
#include "tests/support/test_server.h"

using hutch::testing::TempBuildDirs;
using hutch::testing::TestServer;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct BuildResult {
  int status = 0;
  std::vector<std::pair<std::string, json>> events;
  json done;   // the "done" event, null if none
  json error;  // the "error" event, null if none
  std::string body;
};

// POST /v1/templates with the spec as the body, progress as SSE.
BuildResult Build(const TestServer& s, const std::string& spec) {
  auto c = s.Client();
  BuildResult b;
  auto r = c.SseRequest("POST", "/v1/templates", spec,
                        {{"Content-Type", "application/toml"}, {"Accept", "text/event-stream"}},
                        [&](const hutch::client::SseEvent& e) {
                          json d = json::parse(e.data, nullptr, false);
                          b.events.emplace_back(e.event, d);
                          if (e.event == "done") b.done = d;
                          if (e.event == "error") b.error = d;
                          return true;
                        });
  b.status = r.status;
  b.body = r.body;
  return b;
}

bool Listed(const TestServer& s, const std::string& name) {
  auto r = s.Client().Request("GET", "/v1/templates");
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  for (const auto& t : j["items"])
    if (t.value("name", "") == name) return true;
  return false;
}

const char* kHelloSpec = R"(
name = "hello"
from = "base"
run = ["mkdir -p /opt/hello && echo built-by-run > /opt/hello/greeting.txt && chown 1000:1000 /opt/hello/greeting.txt"]
workdir = "/opt/hello"

[env]
HELLO_MODE = "template"

[[files]]
dest = "/etc/hello.conf"
content = "answer = 42\n"
mode = "0640"
)";

}  // namespace

TEST(Template, RunStepOutputReachesSandboxesAndUnchangedRebuildIsCached) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto first = Build(s, kHelloSpec);
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(first.error.is_null()) << first.error.dump();
  ASSERT_FALSE(first.done.is_null());
  EXPECT_FALSE(first.done.value("cached", true));
  // Progress: each step announced in order with a rising percent, and the
  // run step's log lines.
  std::vector<std::string> steps;
  int last_percent = -1;
  for (const auto& [ev, d] : first.events) {
    if (ev != "step") continue;
    steps.push_back(d.value("name", ""));
    EXPECT_GT(d.value("percent", -1), last_percent);
    last_percent = d.value("percent", -1);
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"files", "run 1", "capture"}));
  EXPECT_TRUE(Listed(s, "hello"));

  std::string id = s.CreateSandbox({{"template", "hello"}});
  auto r = s.Exec(
      id,
      "cat /opt/hello/greeting.txt; stat -c '%a %u' /opt/hello/greeting.txt /etc/hello.conf; "
      "cat /etc/hello.conf; echo mode=$HELLO_MODE; pwd");
  ASSERT_EQ(r.value("exit_code", -1), 0) << r.dump();
  EXPECT_EQ(r.value("stdout", ""),
            "built-by-run\n644 1000\n640 0\nanswer = 42\nmode=template\n/opt/hello\n");
  // The sandbox's own writes stay its own: the template is read-only below it.
  ASSERT_EQ(s.Exec(id, "echo changed > /opt/hello/greeting.txt").value("exit_code", -1), 0);
  std::string id2 = s.CreateSandbox({{"template", "hello"}});
  EXPECT_EQ(s.Exec(id2, "cat /opt/hello/greeting.txt").value("stdout", ""), "built-by-run\n");

  // Unchanged: a cache hit, same build.
  auto again = Build(s, kHelloSpec);
  ASSERT_FALSE(again.done.is_null()) << again.body;
  EXPECT_TRUE(again.done.value("cached", false));
  EXPECT_EQ(again.done["template"]["hash"], first.done["template"]["hash"]);
  // One run step changed: rebuilt, another hash.
  std::string changed = kHelloSpec;
  changed.replace(changed.find("built-by-run"), 12, "built-again!");
  auto rebuilt = Build(s, changed);
  ASSERT_FALSE(rebuilt.done.is_null()) << rebuilt.body;
  EXPECT_FALSE(rebuilt.done.value("cached", true));
  EXPECT_NE(rebuilt.done["template"]["hash"], first.done["template"]["hash"]);
  std::string id3 = s.CreateSandbox({{"template", "hello"}});
  EXPECT_EQ(s.Exec(id3, "cat /opt/hello/greeting.txt").value("stdout", ""), "built-again!\n");
  // A sandbox made before the rebuild stays on the build it started from.
  EXPECT_EQ(s.Exec(id2, "cat /opt/hello/greeting.txt").value("stdout", ""), "built-by-run\n");
  EXPECT_TRUE(TempBuildDirs(s).empty());
}

TEST(Template, FailingRunStepReportsStepExitCodeAndLogTailAndRegistersNothing) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const char* spec = R"(
name = "broken"
from = "base"
run = ["echo step-one-ok", "echo compiling; echo 'fatal: no such thing' >&2; exit 7", "echo never"]
)";
  auto b = Build(s, spec);
  ASSERT_EQ(b.status, 200) << b.body;
  ASSERT_TRUE(b.done.is_null()) << b.done.dump();
  ASSERT_FALSE(b.error.is_null());
  EXPECT_EQ(b.error.value("code", ""), "build_failed");
  EXPECT_EQ(b.error.value("step", 0), 2);
  EXPECT_EQ(b.error.value("name", ""), "run 2");
  EXPECT_EQ(b.error.value("exit_code", -1), 7);
  std::string tail = b.error.value("log_tail", "");
  EXPECT_NE(tail.find("compiling"), std::string::npos) << tail;
  EXPECT_NE(tail.find("fatal: no such thing"), std::string::npos) << tail;
  EXPECT_NE(b.error.value("message", "").find("exited with 7"), std::string::npos)
      << b.error.dump();
  // The third step never ran.
  for (const auto& [ev, d] : b.events)
    if (ev == "log") {
      EXPECT_NE(d.value("text", ""), "never");
    }

  EXPECT_FALSE(Listed(s, "broken"));
  auto c = s.Client();
  EXPECT_EQ(c.Request("GET", "/v1/templates/broken").status, 404);
  auto create = c.Json("POST", "/v1/sandboxes", {{"template", "broken"}});
  EXPECT_EQ(create.status, 404) << create.body;
  EXPECT_TRUE(TempBuildDirs(s).empty());

  // Without Accept: text/event-stream the answer is one JSON document.
  auto j = c.Request("POST", "/v1/templates", spec, {{"Content-Type", "application/toml"}});
  EXPECT_EQ(j.status, 422) << j.body;
  EXPECT_EQ(j.json().value("exit_code", -1), 7) << j.body;
  EXPECT_EQ(j.json().value("name", ""), "run 2") << j.body;
}

TEST(Template, BadSpecsAreRefusedBeforeBuilding) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  struct Case {
    const char* spec;
    const char* why;
  } cases[] = {
      {"name = \"x\"\nfrom = \"base\"\npackages = [\"curl\"]\n", "Debian root"},
      {"name = \"x\"\nfrom = \"nosuch\"\n", "not found"},
      {"name = \"x\"\nfrom = \"base\"\nunknown = 1\n", "unknown key"},
      {"name = \"Bad Name\"\n", "name"},
      {"name = \"x\"\nrun = [\n", "TOML"},
      {"name = \"base\"\nfrom = \"base\"\nrun = [\"true\"]\n", "base"},
  };
  for (const auto& k : cases) {
    auto r = c.Request("POST", "/v1/templates", k.spec, {{"Content-Type", "application/toml"}});
    EXPECT_TRUE(r.status == 400 || r.status == 404)
        << k.spec << " -> " << r.status << " " << r.body;
    EXPECT_NE(r.body.find(k.why), std::string::npos) << k.spec << " -> " << r.body;
  }
  EXPECT_FALSE(Listed(s, "x"));
  // base.toml as shipped: building it reports base.
  auto base = c.Request("POST", "/v1/templates", "name = \"base\"\nfrom = \"base\"\n", {});
  EXPECT_EQ(base.status, 201) << base.body;
  EXPECT_EQ(base.json().value("name", ""), "base");
}

// Issue 32: a suite that reads as an option went onto debootstrap's
// command line, run as the host's root. It is refused at parse time, as
// 400 invalid_request naming the field, before anything runs.
TEST(Template, DebootstrapOptionsInTheSuiteAreRefusedAndNothingIsBuilt) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  for (const char* from : {"debian:--foreign", "debian:--print-debs", "debian:-v", "debian:1x"}) {
    const std::string spec = std::string("name = \"inject\"\nfrom = \"") + from + "\"\n";
    auto r = c.Request("POST", "/v1/templates", spec, {{"Content-Type", "application/toml"}});
    EXPECT_EQ(r.status, 400) << from << " -> " << r.body;
    EXPECT_EQ(r.json().value("code", ""), "invalid_request") << from << " -> " << r.body;
    EXPECT_NE(r.body.find("'from'"), std::string::npos) << from << " -> " << r.body;
  }
  EXPECT_FALSE(Listed(s, "inject"));
}

TEST(Template, DeleteAliasAndRestart) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto b = Build(s, kHelloSpec);
  ASSERT_FALSE(b.done.is_null()) << b.body;
  auto c = s.Client();
  // An alias names it for every dialect's create.
  auto a = c.Json("PUT", "/v1/template-aliases/hello:1", {{"template", "hello"}});
  ASSERT_EQ(a.status, 200) << a.body;
  std::string id = s.CreateSandbox({{"template", "hello:1"}});
  EXPECT_EQ(s.Exec(id, "cat /opt/hello/greeting.txt").value("stdout", ""), "built-by-run\n");
  auto g = c.Request("GET", "/v1/templates/hello:1");
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(g.json().value("name", ""), "hello");

  // A crashed build's temp dir, then a restart: gone; the template stays.
  fs::create_directories(s.state_dir() + "/state/builds/.tmp-deadbeef/layer");
  s.Restart();
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(TempBuildDirs(s).empty());
  EXPECT_TRUE(Listed(s, "hello"));
  EXPECT_EQ(s.Exec(id, "cat /opt/hello/greeting.txt").value("stdout", ""), "built-by-run\n");

  // Delete: the name goes at once; the files stay while a sandbox uses them.
  std::string hash = b.done["template"]["hash"];
  std::string build_dir = s.state_dir() + "/state/builds/" + hash;
  ASSERT_TRUE(fs::exists(build_dir));
  ASSERT_EQ(s.Client().Request("DELETE", "/v1/templates/hello").status, 204);
  EXPECT_FALSE(Listed(s, "hello"));
  EXPECT_EQ(s.Client().Request("GET", "/v1/templates/hello").status, 404);
  EXPECT_EQ(s.Client().Request("DELETE", "/v1/templates/hello").status, 404);
  EXPECT_EQ(s.Client().Request("DELETE", "/v1/templates/base").status, 409);
  EXPECT_TRUE(fs::exists(build_dir));
  EXPECT_EQ(s.Exec(id, "cat /opt/hello/greeting.txt").value("stdout", ""), "built-by-run\n");
  ASSERT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  // Rebuilding it removes nothing it needs; deleting it again with no
  // sandbox on it removes the files.
  auto b2 = Build(s, kHelloSpec);
  ASSERT_FALSE(b2.done.is_null()) << b2.body;
  ASSERT_EQ(s.Client().Request("DELETE", "/v1/templates/hello").status, 204);
  EXPECT_FALSE(fs::exists(build_dir));
  ASSERT_EQ(s.Client().Request("DELETE", "/v1/template-aliases/hello:1").status, 204);
  EXPECT_EQ(s.Client().Request("DELETE", "/v1/template-aliases/hello:1").status, 404);
}

TEST(Template, StartCommandRunsAndReadyCheckGatesCreate) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  // The start command needs a moment before it is ready; the create is
  // answered only once the ready check passes.
  auto b = Build(s, R"(
name = "served"
from = "base"
start = "sleep 1; echo up > /tmp/started; exec sleep 1000"
ready = "test -e /tmp/started"
ready_timeout_seconds = 30
)");
  ASSERT_FALSE(b.done.is_null()) << b.body << b.error.dump();
  std::string id = s.CreateSandbox({{"template", "served"}});
  auto r = s.Exec(id, "cat /tmp/started");
  EXPECT_EQ(r.value("stdout", ""), "up\n") << r.dump();

  // A ready check that never passes fails the create and leaves no sandbox.
  auto never = Build(s, R"(
name = "never-ready"
from = "base"
ready = "false"
ready_timeout_seconds = 1
)");
  ASSERT_FALSE(never.done.is_null()) << never.body;
  auto c = s.Client();
  auto create = c.Json("POST", "/v1/sandboxes", {{"template", "never-ready"}});
  EXPECT_EQ(create.status, 503) << create.body;
  EXPECT_NE(create.body.find("ready check"), std::string::npos) << create.body;
  auto list = c.Request("GET", "/v1/sandboxes?status=running");
  const json lj = list.json();
  EXPECT_EQ(lj["items"].size(), 1u) << list.body;
}

TEST(Template, BuildSandboxHasItsOwnNetworkButNotTheHost) {
  // Build steps need the network (apt-get, pip, npm) but run code nobody
  // reviewed as root: they get a slot in network mode `all`, so they have
  // an interface of their own and cannot reach hutchd on the host (which
  // they could if they shared the host's network namespace).
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string port = std::to_string(s.port());
  const std::string spec =
      "name = \"netcheck\"\nfrom = \"base\"\nrun = [\n"
      "  \"grep -q eth0 /proc/net/dev && echo has-eth0\",\n"
      "  \"python3 -c \\\"import socket; s=socket.socket(); s.settimeout(3); "
      "r=s.connect_ex(('127.0.0.1', " +
      port +
      ")); print('hutchd-connect', r); "
      "raise SystemExit(7 if r == 0 else 0)\\\"\",\n]\n";
  auto b = Build(s, spec);
  ASSERT_EQ(b.status, 200) << b.body;
  ASSERT_TRUE(b.error.is_null()) << b.error.dump();
  ASSERT_FALSE(b.done.is_null()) << b.body;
  std::string logs;
  for (const auto& [ev, d] : b.events)
    if (ev == "log") logs += d.value("text", "") + "\n";
  EXPECT_NE(logs.find("has-eth0"), std::string::npos) << logs;
  EXPECT_NE(logs.find("hutchd-connect"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("hutchd-connect 0"), std::string::npos) << logs;
}
