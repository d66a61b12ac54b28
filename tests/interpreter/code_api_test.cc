// /v1/sandboxes/{id}/code and /code/contexts against a real hutchd and a
// sandbox from the code-interpreter template (the in-sandbox code server,
// real kernels). The template is built once into the state dir the
// tests share (HUTCH_TEST_KEEP_STATE_DIR): CodeTemplate.Build is the
// fixture that builds debian, python and code-interpreter from
// templates/*.toml when they are not there yet (debootstrap and apt from
// the host's mirror: minutes the first time).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/test_server.h"

namespace hutch::testing {
namespace {

using nlohmann::json;

struct Event {
  std::string name;
  json data;
};

struct Run {
  int status = 0;
  std::string body;  // the JSON error when status != 200
  std::vector<Event> events;
  // Every stdout/stderr text joined, the `error` event, the results, the end.
  std::string Out(const char* stream = "stdout") const {
    std::string s;
    for (const auto& e : events)
      if (e.name == stream) s += e.data.value("text", "");
    return s;
  }
  json Error() const {
    for (const auto& e : events)
      if (e.name == "error") return e.data;
    return nullptr;
  }
  std::vector<json> Results() const {
    std::vector<json> r;
    for (const auto& e : events)
      if (e.name == "result") r.push_back(e.data);
    return r;
  }
  json End() const {
    return events.empty() || events.back().name != "end" ? json() : events.back().data;
  }
};

// POST /code; `stop_after` > 0 drops the connection after that many events.
Run RunCode(const TestServer& s, const std::string& id, const json& body, size_t stop_after = 0) {
  Run r;
  auto c = s.Client();
  auto res = c.SseRequest("POST", "/v1/sandboxes/" + id + "/code", body.dump(),
                          {{"Content-Type", "application/json"}}, [&](const client::SseEvent& e) {
                            r.events.push_back({e.event, json::parse(e.data, nullptr, false)});
                            return stop_after == 0 || r.events.size() < stop_after;
                          });
  r.status = res.status;
  r.body = res.body;
  return r;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool HasTemplate(const TestServer& s, const std::string& name) {
  auto r = s.Client().Request("GET", "/v1/templates");
  for (const auto& t : r.json()["items"])
    if (t.value("name", "") == name) return true;
  return false;
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
  TestServer s_;
  std::string id_;
};

}  // namespace

// The fixture of the group: debian → python → code-interpreter, each built
// from the project's spec unless the shared state dir has it already.
TEST(CodeTemplate, Build) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const char* src = getenv("HUTCH_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "HUTCH_SOURCE_DIR must be set (run through ctest)";
  for (const char* name : {"debian", "python", "code-interpreter"}) {
    if (HasTemplate(s, name)) continue;
    const std::string spec = Slurp(std::string(src) + "/templates/" + name + ".toml");
    ASSERT_FALSE(spec.empty()) << name;
    auto b =
        s.Client().Request("POST", "/v1/templates", spec, {{"Content-Type", "application/toml"}});
    ASSERT_EQ(b.status, 201) << name << ": " << b.body.substr(0, 4000);
  }
  EXPECT_TRUE(HasTemplate(s, "code-interpreter"));
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
  for (const auto& i : list.json()["items"]) listed |= i.value("id", "") == ctx;
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
