// /v1/sandboxes/{id}/code and /code/contexts against a real hutchd and a
// sandbox from the code-interpreter template (the in-sandbox code server,
// real kernels). The template is built once into the state dir the
// tests share (HUTCH_TEST_KEEP_STATE_DIR): CodeTemplate.Build is the
// fixture that builds debian, python and code-interpreter from
// templates/*.toml when they are not there yet (debootstrap and apt from
// the host's mirror: minutes the first time).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <chrono>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/code_run.h"
#include "tests/support/exposition.h"
#include "tests/support/test_server.h"

namespace hutch::testing {
namespace {

using nlohmann::json;

using Run = CodeRun;

bool HasTemplate(const TestServer& s, const std::string& name) {
  auto r = s.Client().Request("GET", "/v1/templates");
  const json j = r.json();
  for (const auto& t : j["items"])
    if (t.value("name", "") == name) return true;
  return false;
}

// The hutch CLI against `s` (HUTCH_CLI_BIN), with `input` as its stdin:
// its exit code and stdout.
std::pair<int, std::string> Cli(const TestServer& s, const std::string& args,
                                const std::string& input = "") {
  const char* cli = getenv("HUTCH_CLI_BIN");
  if (!cli) return {-1, "HUTCH_CLI_BIN is not set"};
  char in_path[] = "/tmp/hutch-cli-in-XXXXXX";
  const int fd = mkstemp(in_path);
  if (fd < 0) return {-1, "mkstemp failed"};
  close(fd);
  std::ofstream(in_path) << input;
  const std::string cmd = "HUTCH_URL=http://127.0.0.1:" + std::to_string(s.port()) +
                          " HUTCH_API_KEY=" + s.key() + " " + cli + " " + args + " < " + in_path;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (size_t k = fread(buf, 1, sizeof buf, f)) out.append(buf, k);
  const int st = pclose(f);
  unlink(in_path);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class CodeApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.ok());
    if (!HasTemplate(s_, "code-interpreter"))
      GTEST_SKIP() << "no code-interpreter template in the shared state dir: run "
                      "CodeTemplate.Build first (ctest does, as a fixture)";
    auto cr = s_.Client().Json("POST", "/v1/sandboxes", json{{"template", "code-interpreter"}});
    ASSERT_EQ(cr.status, 201) << cr.body;
    id_ = cr.json()["id"];
  }
  void TearDown() override {
    if (!id_.empty()) s_.Client().Request("DELETE", "/v1/sandboxes/" + id_);
  }
  // No warm pool: each test starts its own hutchd and creates at once, so
  // a pool would only start a second kernel beside the cold create
  // (CodeWarmPool tests the pool).
  TestServer s_{{"--warm-pool", "none"}};
  std::string id_;
};

// hutch_sandboxes_warm from /metrics (-1 if missing).
double WarmSandboxes(const TestServer& s) {
  auto m = ParseExposition(s.Client().Request("GET", "/metrics").body);
  if (!m.ok()) return -1;
  auto v = m.Value("hutch_sandboxes_warm", {});
  return v ? *v : -1;
}

// When the template's start command (the code server) began, by the
// sandbox's process list.
std::string StartCommandStartedAt(const TestServer& s, const std::string& id) {
  auto r = s.Client().Request("GET", "/v1/sandboxes/" + id + "/processes");
  const json j = r.json();
  for (const auto& p : j["items"])
    if (p.value("cmd", json()) == "template-start") return p.value("started_at", "");
  return "";
}

}  // namespace

// The fixture of the group: code-interpreter (and debian, python under it)
// built by the CLI from the project's specs (the CLI reads their `src`
// files); an unchanged spec is a cache hit, a changed server rebuilds.
TEST(CodeTemplate, Build) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const char* src = getenv("HUTCH_SOURCE_DIR");
  const char* cli = getenv("HUTCH_CLI_BIN");
  ASSERT_TRUE(src && cli) << "HUTCH_SOURCE_DIR and HUTCH_CLI_BIN must be set (run through ctest)";
  auto [rc, out] =
      Cli(s, std::string("template build ") + src + "/templates/code-interpreter.toml 2>&1");
  ASSERT_EQ(rc, 0) << (out.size() > 6000 ? out.substr(out.size() - 6000) : out);
  EXPECT_TRUE(HasTemplate(s, "code-interpreter"));
}

// With hutchd's defaults a code-interpreter sandbox is kept started ahead
// of demand: nobody sees it until a create of its shape takes it, and its
// code server (and kernel) were up before the create came; a create with
// its own env gets a fresh one whose kernel sees that env.
TEST(CodeWarmPool, ACreateTakesASandboxWhoseKernelIsAlreadyUp) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  if (!HasTemplate(s, "code-interpreter")) GTEST_SKIP() << "no code-interpreter template";
  for (int i = 0; i < 1200 && WarmSandboxes(s) != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(WarmSandboxes(s), 1);
  // (The shared state dir remembers other tests' sandboxes, stopped.)
  const auto running = [&] {
    return s.Client().Request("GET", "/v1/sandboxes?status=running").json()["items"].size();
  };
  EXPECT_EQ(running(), 0u);

  // E2B's default shape (network all where the server has networking).
  auto cr = s.Client().Json("POST", "/v1/sandboxes",
                            json{{"template", "code-interpreter"}, {"network", {{"mode", "all"}}}});
  ASSERT_EQ(cr.status, 201) << cr.body;
  const json warm = cr.json();
  const std::string id = warm["id"];
  const std::string started = StartCommandStartedAt(s, id);
  ASSERT_FALSE(started.empty());
  EXPECT_LT(started, warm["created_at"].get<std::string>()) << "the code server started after";
  auto r = RunCode(s, id, {{"code", "x = 1 + 1\nx"}});
  ASSERT_EQ(r.Results().size(), 1u) << r.body;
  EXPECT_EQ(r.Results()[0].value("text", ""), "2");
  EXPECT_EQ(running(), 1u);

  auto ce = s.Client().Json("POST", "/v1/sandboxes",
                            json{{"template", "code-interpreter"},
                                 {"network", {{"mode", "all"}}},
                                 {"env", {{"HUTCH_WARM_T", "mine"}}}});
  ASSERT_EQ(ce.status, 201) << ce.body;
  const json cold = ce.json();
  EXPECT_GT(StartCommandStartedAt(s, cold["id"]), cold["created_at"].get<std::string>());
  auto e = RunCode(s, cold["id"], {{"code", "import os; print(os.environ['HUTCH_WARM_T'])"}});
  EXPECT_EQ(e.Out(), "mine\n") << e.Out("stderr");
  for (const std::string& sid : {id, cold["id"].get<std::string>()})
    EXPECT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + sid).status, 204);
}

TEST_F(CodeApi, StatePersistsAndOutputResultsErrorsAndTheEndStream) {
  auto a =
      RunCode(s_, id_,
              {{"code", "x = 41\nprint('hi')\nimport sys; print('warn', file=sys.stderr)\nx + 1"}});
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.Out(), "hi\n");
  EXPECT_EQ(a.Out("stderr"), "warn\n");
  auto results = a.Results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].value("text", ""), "42");
  EXPECT_TRUE(results[0].value("is_main_result", false));
  ASSERT_EQ(a.events.back().name, "end");
  const int first = a.End().value("execution_count", 0);
  EXPECT_GT(first, 0);
  for (const auto& e : a.events) {
    if (e.name == "stdout") {
      EXPECT_FALSE(e.data.value("timestamp", "").empty());
    }
  }

  auto b = RunCode(s_, id_, {{"code", "x"}});
  ASSERT_EQ(b.Results().size(), 1u);
  EXPECT_EQ(b.Results()[0].value("text", ""), "41");
  EXPECT_EQ(b.End().value("execution_count", 0), first + 1);

  auto c = RunCode(s_, id_, {{"code", "1/0"}});
  ASSERT_EQ(c.status, 200);
  json err = c.Error();
  ASSERT_TRUE(err.is_object()) << c.body;
  EXPECT_EQ(err.value("name", ""), "ZeroDivisionError");
  EXPECT_EQ(err.value("value", ""), "division by zero");
  EXPECT_NE(err.value("traceback", "").find("ZeroDivisionError"), std::string::npos);
  EXPECT_EQ(c.events.back().name, "end");

  // Per-call environment variables, for that run only.
  auto d = RunCode(s_, id_,
                   {{"code", "import os; print(os.environ.get('HUTCH_T'))"},
                    {"env_vars", {{"HUTCH_T", "per-call"}}}});
  EXPECT_EQ(d.Out(), "per-call\n");
  auto e = RunCode(s_, id_, {{"code", "import os; print(os.environ.get('HUTCH_T'))"}});
  EXPECT_EQ(e.Out(), "None\n");
}

TEST_F(CodeApi, APlotIsAPngAndALineChartAndADataFrameHasData) {
  auto p = RunCode(s_, id_,
                   {{"code",
                     "import matplotlib.pyplot as plt\n"
                     "plt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()"}});
  ASSERT_EQ(p.status, 200) << p.body;
  json png;
  for (const auto& r : p.Results())
    if (r.contains("png")) png = r;
  ASSERT_TRUE(png.is_object()) << p.events.size();
  EXPECT_EQ(png["png"].get<std::string>().rfind("iVBORw0KGgo", 0), 0u);  // base64 of \x89PNG
  ASSERT_TRUE(png.contains("chart"));
  EXPECT_EQ(png["chart"].value("type", ""), "line");
  EXPECT_EQ(png["chart"].value("title", ""), "squares");

  auto df =
      RunCode(s_, id_, {{"code", "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})"}});
  ASSERT_EQ(df.Results().size(), 1u);
  const json r = df.Results()[0];
  EXPECT_TRUE(r.contains("html") || r.contains("data")) << r.dump();
}

TEST_F(CodeApi, ContextsHaveTheirOwnStateCwdAndLanguageAndRestartClearsIt) {
  auto c = s_.Client();
  const std::string base = "/v1/sandboxes/" + id_ + "/code/contexts";
  auto made = c.Json("POST", base, json{{"language", "bash"}, {"cwd", "/tmp"}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string ctx = made.json()["id"];
  EXPECT_EQ(made.json()["language"], "bash");
  EXPECT_EQ(made.json()["cwd"], "/tmp");
  auto list = c.Request("GET", base);
  ASSERT_EQ(list.status, 200);
  bool listed = false;
  const json items = list.json()["items"];
  for (const auto& i : items) listed |= i.value("id", "") == ctx;
  EXPECT_TRUE(listed) << list.body;

  EXPECT_EQ(RunCode(s_, id_, {{"code", "V=7; pwd"}, {"context_id", ctx}}).Out(), "/tmp\n");
  EXPECT_EQ(RunCode(s_, id_, {{"code", "echo v=$V"}, {"context_id", ctx}}).Out(), "v=7\n");
  // Another bash context does not share it.
  auto other = c.Json("POST", base, json{{"language", "bash"}});
  ASSERT_EQ(other.status, 201);
  EXPECT_EQ(RunCode(s_, id_, {{"code", "echo v=$V"}, {"context_id", other.json()["id"]}}).Out(),
            "v=\n");
  EXPECT_EQ(c.Request("POST", base + "/" + ctx + "/restart").status, 204);
  EXPECT_EQ(RunCode(s_, id_, {{"code", "echo v=$V"}, {"context_id", ctx}}).Out(), "v=\n");
  EXPECT_EQ(c.Request("DELETE", base + "/" + ctx).status, 204);
  auto gone = c.Request("DELETE", base + "/" + ctx);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(gone.json()["code"], "not_found");
  auto run_gone = RunCode(s_, id_, {{"code", "echo"}, {"context_id", ctx}});
  EXPECT_EQ(run_gone.status, 404) << run_gone.body;

  // JavaScript keeps its state too (the default js context, made lazily).
  RunCode(s_, id_, {{"code", "var k = 5;"}, {"language", "js"}});
  auto js = RunCode(s_, id_, {{"code", "k * 2"}, {"language", "js"}});
  ASSERT_EQ(js.Results().size(), 1u) << js.body;
  EXPECT_EQ(js.Results()[0].value("text", ""), "10");
}

// timeout_ms fires: the run is interrupted, reported, and the context keeps
// what it had. A client that goes away interrupts the run the same way.
TEST_F(CodeApi, ATimeoutOrAClientThatLeavesInterruptsTheRunAndStateIsKept) {
  auto t =
      RunCode(s_, id_,
              {{"code", "import time\nkept = 1\ntime.sleep(120)\nlate = 1"}, {"timeout_ms", 1500}});
  ASSERT_EQ(t.status, 200) << t.body;
  ASSERT_TRUE(t.Error().is_object());
  EXPECT_EQ(t.Error().value("name", ""), "TimeoutError");
  EXPECT_TRUE(t.End().value("timed_out", false));
  auto after = RunCode(s_, id_, {{"code", "print(kept, 'late' in globals())"}});
  EXPECT_EQ(after.Out(), "1 False\n");

  // Disconnect after the first line: without the interrupt the next run
  // would queue behind 120 s of sleep and then see `late2`.
  auto left = RunCode(s_, id_,
                      {{"code",
                        "import time\nprint('started', flush=True)\n"
                        "time.sleep(120)\nlate2 = 1"}},
                      /*stop_after=*/1);
  ASSERT_EQ(left.events.size(), 1u);
  EXPECT_EQ(left.events[0].name, "stdout");
  auto next = RunCode(s_, id_, {{"code", "print('late2' in globals())"}});
  EXPECT_EQ(next.Out(), "False\n");
}

// The code server dies mid-run (the code kills it): the stream ends with
// an error and `end` instead of hanging, and hutchd keeps serving.
TEST_F(CodeApi, AServerThatDiesMidRunEndsTheStreamWithAnError) {
  auto r = RunCode(s_, id_,
                   {{"code",
                     "import os, signal, time\nprint('before', flush=True)\ntime.sleep(0.5)\n"
                     "os.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(30)"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Out(), "before\n");
  ASSERT_TRUE(r.Error().is_object());
  EXPECT_EQ(r.Error().value("name", ""), "UnexpectedEndOfExecution");
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back().name, "end");
  EXPECT_EQ(s_.Client().Request("GET", "/v1/sandboxes/" + id_).status, 200);
}

TEST_F(CodeApi, KernelCodeIsConfinedLikeAnyExec) {
  // The kernel runs as the sandbox's user inside its namespaces: hutchd's
  // processes are not visible, and the host's root is not its root.
  auto r = RunCode(s_, id_,
                   {{"code",
                     "import os\n"
                     "names = [open(f'/proc/{p}/comm').read().strip() for p in os.listdir('/proc') "
                     "if p.isdigit()]\n"
                     "print('hutchd' in names, os.getuid(), os.path.exists('/work'))"}});
  EXPECT_EQ(r.Out(), "False 1000 False\n") << r.Out("stderr");
}

// OpenSandbox's execd /code API through hutch's server proxy, as
// `opensandbox-code-interpreter` speaks it: bare JSON events, each followed
// by a blank line.
namespace {

std::vector<json> ExecdEvents(const std::string& body) {
  std::vector<json> out;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string block = body.substr(at, end - at);
    if (block.find_first_not_of(" \n") != std::string::npos)
      out.push_back(json::parse(block, nullptr, false));
    at = end + 2;
  }
  return out;
}

std::vector<json> OfType(const std::vector<json>& evs, const std::string& type) {
  std::vector<json> out;
  for (const auto& e : evs)
    if (e.value("type", "") == type) out.push_back(e);
  return out;
}

}  // namespace

TEST_F(CodeApi, OpenSandboxExecdCodeRunsInContextsAndInterrupts) {
  auto c = s_.Client();
  const std::string base = "/opensandbox/sandboxes/" + id_ + "/proxy/44772";
  const std::map<std::string, std::string> h = {{"OPEN-SANDBOX-API-KEY", s_.key()},
                                                {"Content-Type", "application/json"}};
  auto made = c.Request("POST", base + "/code/context", R"({"language":"python"})", h);
  ASSERT_EQ(made.status, 200) << made.body;
  const std::string cid = made.json()["id"];
  EXPECT_EQ(made.json()["language"], "python");

  auto run = [&](const json& body) {
    auto r = c.Request("POST", base + "/code", body.dump(), h);
    EXPECT_EQ(r.status, 200) << r.body;
    return ExecdEvents(r.body);
  };
  const json ctx = {{"id", cid}, {"language", "python"}};
  auto a = run({{"context", ctx}, {"code", "a = 6\nprint('x')\na * 7"}});
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.front().value("type", ""), "init");
  EXPECT_EQ(a.front().value("text", ""), cid);
  ASSERT_EQ(OfType(a, "stdout").size(), 1u);
  EXPECT_EQ(OfType(a, "stdout")[0].value("text", ""), "x\n");
  ASSERT_EQ(OfType(a, "result").size(), 1u);
  EXPECT_EQ(OfType(a, "result")[0]["results"].value("text", ""), "42");
  // text/plain as the kernel made it, as execd sends it: a str keeps its
  // quotes (E2B's wire drops them).
  auto q = run({{"context", ctx}, {"code", "'still here'"}});
  ASSERT_EQ(OfType(q, "result").size(), 1u);
  EXPECT_EQ(OfType(q, "result")[0]["results"].value("text", ""), "'still here'");
  EXPECT_EQ(OfType(a, "execution_count").size(), 1u);
  EXPECT_EQ(a.back().value("type", ""), "execution_complete");
  EXPECT_TRUE(a.back().contains("execution_time"));

  auto e = run({{"context", ctx}, {"code", "1/0"}});
  ASSERT_EQ(OfType(e, "error").size(), 1u);
  const json err = OfType(e, "error")[0]["error"];
  EXPECT_EQ(err.value("ename", ""), "ZeroDivisionError");
  ASSERT_TRUE(err["traceback"].is_array());
  EXPECT_GT(err["traceback"].size(), 1u);

  // No context: the language's default context, named in `init`.
  auto d = run({{"code", "print(1)"}});
  ASSERT_FALSE(d.empty());
  EXPECT_FALSE(d.front().value("text", "").empty());
  EXPECT_NE(d.front().value("text", ""), cid);

  // DELETE /code?id= interrupts a running execution; the context keeps `a`.
  std::vector<json> slow;
  std::thread t([&] {
    auto c2 = s_.Client();
    auto r = c2.Request("POST", base + "/code",
                        json{{"context", ctx}, {"code", "import time\ntime.sleep(120)"}}.dump(), h);
    slow = ExecdEvents(r.body);
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto intr = c.Request("DELETE", base + "/code?id=" + cid, "", h);
  EXPECT_EQ(intr.status, 200) << intr.body;
  t.join();
  ASSERT_EQ(OfType(slow, "error").size(), 1u) << slow.size();
  EXPECT_EQ(OfType(slow, "error")[0]["error"].value("ename", ""), "KeyboardInterrupt");
  auto kept = run({{"context", ctx}, {"code", "a"}});
  ASSERT_EQ(OfType(kept, "result").size(), 1u);
  EXPECT_EQ(OfType(kept, "result")[0]["results"].value("text", ""), "6");

  auto list = c.Request("GET", base + "/code/contexts?language=python", "", h);
  ASSERT_EQ(list.status, 200) << list.body;
  bool listed = false;
  const json items = list.json();
  for (const auto& i : items) listed |= i.value("id", "") == cid;
  EXPECT_TRUE(listed) << list.body;
  EXPECT_EQ(c.Request("GET", base + "/code/contexts/" + cid, "", h).status, 200);
  EXPECT_EQ(c.Request("DELETE", base + "/code/contexts/" + cid, "", h).status, 200);
  EXPECT_EQ(c.Request("GET", base + "/code/contexts/" + cid, "", h).status, 404);
  // Every context of one language at once.
  ASSERT_EQ(c.Request("POST", base + "/code/context", R"({"language":"bash"})", h).status, 200);
  EXPECT_EQ(c.Request("DELETE", base + "/code/contexts?language=bash", "", h).status, 200);
  auto bash = c.Request("GET", base + "/code/contexts?language=bash", "", h);
  EXPECT_EQ(bash.json().size(), 0u) << bash.body;
}

// `hutch run ID FILE|-`: output and the text result on stdout, images
// saved as files, the exit code says whether the code raised.
TEST_F(CodeApi, CliRunPrintsTextSavesImagesAndKeepsState) {
  char tmpl[] = "/tmp/hutch-run-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/plot.py") << "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
                                     "plt.show()\nprint('printed')\nx = 6\nx * 7\n";
  auto [rc, out] = Cli(s_, "run " + id_ + " " + dir + "/plot.py --out-dir " + dir);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("printed\n"), std::string::npos) << out;
  EXPECT_NE(out.find("42\n"), std::string::npos) << out;
  std::ifstream png(dir + "/result-1.png", std::ios::binary);
  std::string head(4, '\0');
  png.read(head.data(), 4);
  EXPECT_EQ(head, "\x89PNG");
  // The context outlives the CLI call; stdin works as the file.
  auto [rc2, out2] = Cli(s_, "run " + id_ + " -", "x + 1");
  EXPECT_EQ(rc2, 0);
  EXPECT_EQ(out2, "7\n");
  auto [rc3, out3] = Cli(s_, "run " + id_ + " - 2>&1", "1/0");
  EXPECT_EQ(rc3, 1);
  EXPECT_NE(out3.find("ZeroDivisionError"), std::string::npos) << out3;
  auto [rc4, out4] = Cli(s_, "run " + id_ + " --lang bash -", "echo from-bash");
  EXPECT_EQ(rc4, 0);
  EXPECT_EQ(out4, "from-bash\n");
  std::filesystem::remove_all(dir);
}

TEST(CodeApiErrors, BadBodiesAndASandboxWithoutTheServerAreClearErrors) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string id = s.CreateSandbox();
  auto c = s.Client();
  const std::string path = "/v1/sandboxes/" + id + "/code";
  for (const json& bad :
       {json{{"code", 1}}, json{{"code", "1"}, {"language", "python"}, {"context_id", "abc"}},
        json{{"code", "1"}, {"context_id", "../x"}}, json{{"code", "1"}, {"env_vars", {{"A", 1}}}},
        json{{"code", "1"}, {"timeout_ms", -1}}, json{{"code", "1"}, {"nope", true}}}) {
    auto r = c.Json("POST", path, bad);
    EXPECT_EQ(r.status, 400) << bad.dump() << " " << r.body;
    EXPECT_EQ(r.json()["code"], "invalid_request") << r.body;
  }
  // A base sandbox runs no code server: port_unreachable naming the template.
  auto r = c.Json("POST", path, json{{"code", "1"}});
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_EQ(r.json()["code"], "port_unreachable");
  EXPECT_NE(r.body.find("code-interpreter"), std::string::npos) << r.body;
  auto ctxs = c.Request("GET", path + "/contexts");
  EXPECT_EQ(ctxs.json()["code"], "port_unreachable") << ctxs.body;
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes/sb_0000000000000000/code", json{{"code", "1"}}).status,
            404);
  // The server keeps serving.
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id).status, 200);
}

}  // namespace hutch::testing
