// E2B's template build API over HTTP (issue 31 item 3), as the SDK's
// Template.build drives it: ask for a build (POST /v3/templates), upload a
// copy step's files to the single-use URL hutch hands out, start the build
// with ordered steps (POST /v2/templates/{id}/builds/{build}), poll its
// status with logsOffset until ready; then the template exists
// (aliases), carries its tags, and a sandbox made from it sees the copied
// files, env, workdir and user that the steps set in order. A failing
// step names its step; bad bodies are E2B-shaped errors; deleting the
// template removes its tags too. Built on `base` (no registry needed:
// tests/compat/e2b/run_template.sh builds from a registry image with the
// npm SDK).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "common/sha256.h"
#include "tests/support/test_server.h"

using hutch::testing::HostSh;
using hutch::testing::TempDir;
using hutch::testing::TestServer;
using nlohmann::json;

namespace {

struct E2b {
  const TestServer& s;
  hutch::client::Response Call(const std::string& method, const std::string& path,
                               const json& body = nullptr) const {
    std::map<std::string, std::string> h = {{"X-API-Key", s.key()}};
    if (!body.is_null()) h["Content-Type"] = "application/json";
    return s.Client().Request(method, "/e2b" + path, body.is_null() ? "" : body.dump(), h);
  }
  // Polls the build's status until it ends; every log entry on the way
  // (read from logsOffset on, as the SDK reads them).
  json Wait(const std::string& tid, const std::string& bid, json* entries) const {
    json st;
    for (int i = 0; i < 1200; ++i) {
      auto r = Call("GET", "/templates/" + tid + "/builds/" + bid +
                               "/status?logsOffset=" + std::to_string(entries->size()));
      st = r.json();
      for (const auto& e : st["logEntries"]) entries->push_back(e);
      const std::string status = st.value("status", "");
      if (status != "building" && status != "waiting") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return st;
  }
};

bool AnyEntryHas(const json& entries, const std::string& text) {
  for (const auto& e : entries)
    if (e.value("message", "").find(text) != std::string::npos) return true;
  return false;
}

// The path part of an absolute URL.
std::string PathOf(const std::string& url) {
  const size_t scheme = url.find("://");
  return url.substr(url.find('/', scheme == std::string::npos ? 0 : scheme + 3));
}

}  // namespace

TEST(E2bTemplates, BuildUploadPollTagCreateAndDelete) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  E2b e2b{s};

  // The build context, as the SDK tars it (gzip, paths relative to it).
  const std::string ctx = TempDir("hutch-e2b-ctx");
  HostSh("mkdir -p " + ctx + "/app/conf && printf 'hello\\n' > " + ctx +
         "/app/hello.txt && printf 'k=v\\n' > " + ctx + "/app/conf/app.ini");
  const std::string tgz = HostSh("cd " + ctx + " && tar -czf - app | base64 -w0");
  const std::string tar = HostSh("echo " + tgz + " | base64 -d");
  ASSERT_GT(tar.size(), 20u);
  const std::string hash = hutch::Sha256Hex("app-context");

  auto req = e2b.Call("POST", "/v3/templates", {{"name", "e2b-app:v1"}, {"cpuCount", 2}});
  ASSERT_EQ(req.status, 202) << req.body;
  const std::string tid = req.json().value("templateID", "");
  const std::string bid = req.json().value("buildID", "");
  EXPECT_EQ(tid, "e2b-app");
  EXPECT_EQ(req.json()["tags"], json::array({"v1"}));
  EXPECT_EQ(bid.size(), 36u);

  // Files: not here yet -> a URL on this server, which takes one PUT
  // without the API key; then they are present.
  auto link = e2b.Call("GET", "/templates/" + tid + "/files/" + hash);
  ASSERT_EQ(link.status, 201) << link.body;
  EXPECT_FALSE(link.json().value("present", true));
  const std::string url = link.json().value("url", "");
  ASSERT_NE(url.find("/e2b/template-uploads/"), std::string::npos) << url;
  hutch::client::HttpClient anon("127.0.0.1", s.port(), "");
  auto put = anon.Request("PUT", PathOf(url), tar, {{"Content-Type", "application/gzip"}});
  EXPECT_EQ(put.status, 200) << put.body;
  auto again = anon.Request("PUT", PathOf(url), tar);
  EXPECT_EQ(again.status, 401) << "an upload URL works once";
  auto present = e2b.Call("GET", "/templates/" + tid + "/files/" + hash);
  EXPECT_TRUE(present.json().value("present", false)) << present.body;

  // The steps in E2B's order: env, the user, a workdir (made and given to
  // that user), copy into it, commands as that user that see the env and
  // run in the workdir, one as root.
  json steps = json::array(
      {{{"type", "ENV"}, {"args", {"GREETING", "hi there", "MODE", "test"}}},
       {{"type", "USER"}, {"args", {"user"}}},
       {{"type", "WORKDIR"}, {"args", {"/srv/app"}}},
       {{"type", "COPY"}, {"args", {"app", "./", "user", ""}}, {"filesHash", hash}},
       {{"type", "RUN"}, {"args", {"echo \"$GREETING\" > greeting.txt; pwd >> greeting.txt"}}},
       {{"type", "RUN"}, {"args", {"id -un > whoami.txt"}}},
       {{"type", "RUN"}, {"args", {"id -un > /srv/app/root-run.txt", "root"}}}});
  auto start = e2b.Call("POST", "/v2/templates/" + tid + "/builds/" + bid,
                        {{"fromTemplate", "base"},
                         {"steps", steps},
                         {"startCmd", "echo started > /tmp/started; sleep infinity"},
                         {"readyCmd", "test -f /tmp/started"},
                         {"force", false}});
  ASSERT_EQ(start.status, 202) << start.body;
  auto twice = e2b.Call("POST", "/v2/templates/" + tid + "/builds/" + bid,
                        {{"fromTemplate", "base"}, {"steps", json::array()}});
  EXPECT_EQ(twice.status, 409) << twice.body;

  json entries = json::array();
  json st = e2b.Wait(tid, bid, &entries);
  ASSERT_EQ(st.value("status", ""), "ready") << st.dump() << entries.dump() << s.Log();
  EXPECT_TRUE(AnyEntryHas(entries, "copied 2 file(s) to /srv/app/")) << entries.dump();
  EXPECT_TRUE(AnyEntryHas(entries, "[3/8] step 3: workdir /srv/app")) << entries.dump();
  for (const auto& e : entries) EXPECT_TRUE(e.contains("timestamp") && e.contains("level"));
  // Read to the end: no entry twice.
  auto tail = e2b.Call("GET", "/templates/" + tid + "/builds/" + bid +
                                  "/status?logsOffset=" + std::to_string(entries.size()));
  EXPECT_EQ(tail.json()["logEntries"], json::array());

  // Template.exists asks the aliases route.
  EXPECT_EQ(e2b.Call("GET", "/templates/aliases/e2b-app").status, 200);
  EXPECT_EQ(e2b.Call("GET", "/templates/aliases/e2b-app:v1").status, 200);
  EXPECT_EQ(e2b.Call("GET", "/templates/aliases/no-such-template").status, 404);

  // A sandbox of the tagged name sees what the steps did, in their order.
  auto created = e2b.Call("POST", "/sandboxes", {{"templateID", "e2b-app:v1"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.json().value("sandboxID", "");
  auto r = s.Exec(id,
                  "cat hello.txt conf/app.ini greeting.txt whoami.txt root-run.txt; pwd; id -un; "
                  "echo \"$GREETING/$MODE\"; stat -c %U hello.txt; cat /tmp/started");
  EXPECT_EQ(r.value("stdout", ""),
            "hello\nk=v\nhi there\n/srv/app\nuser\nroot\n/srv/app\nuser\nhi there/test\nuser\n"
            "started\n")
      << r.dump();

  // Tags: assigned to the same build, listed, removed.
  auto tagged = e2b.Call("POST", "/templates/tags", {{"target", "e2b-app:v1"}, {"tags", {"prod"}}});
  ASSERT_EQ(tagged.status, 201) << tagged.body;
  EXPECT_EQ(tagged.json().value("buildID", ""), bid);
  auto tags = e2b.Call("GET", "/templates/e2b-app/tags");
  ASSERT_EQ(tags.status, 200) << tags.body;
  std::set<std::string> names;
  for (const auto& t : tags.json()) {
    names.insert(t.value("tag", ""));
    EXPECT_EQ(t.value("buildID", ""), bid);
  }
  EXPECT_EQ(names, (std::set<std::string>{"default", "v1", "prod"}));
  EXPECT_EQ(e2b.Call("DELETE", "/templates/tags", {{"name", "e2b-app"}, {"tags", {"prod"}}}).status,
            204);
  EXPECT_EQ(e2b.Call("GET", "/templates/aliases/e2b-app:prod").status, 404);

  // Deleting the template takes its tags with it.
  EXPECT_EQ(e2b.Call("DELETE", "/templates/e2b-app").status, 204);
  EXPECT_EQ(e2b.Call("GET", "/templates/aliases/e2b-app").status, 404);
  EXPECT_EQ(e2b.Call("GET", "/templates/aliases/e2b-app:v1").status, 404);
  EXPECT_EQ(e2b.Call("DELETE", "/templates/e2b-app").status, 404);
}

TEST(E2bTemplates, FailuresNameTheirStepAndBadBodiesAreE2bErrors) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  E2b e2b{s};
  auto ask = [&](const std::string& name) {
    auto r = e2b.Call("POST", "/v3/templates", {{"name", name}});
    EXPECT_EQ(r.status, 202) << r.body;
    return r.json().value("buildID", "");
  };

  // A step that exits non-zero: status error, its step, its log.
  const std::string bid = ask("e2b-fails");
  auto start = e2b.Call("POST", "/v2/templates/e2b-fails/builds/" + bid,
                        {{"fromTemplate", "base"},
                         {"steps",
                          {{{"type", "RUN"}, {"args", {"true"}}},
                           {{"type", "RUN"}, {"args", {"echo about to fail; exit 3"}}}}}});
  ASSERT_EQ(start.status, 202) << start.body;
  json entries = json::array();
  json st = e2b.Wait("e2b-fails", bid, &entries);
  ASSERT_EQ(st.value("status", ""), "error") << st.dump();
  EXPECT_EQ(st["reason"].value("step", ""), "2") << st.dump();
  EXPECT_NE(st["reason"].value("message", "").find("exited with 3"), std::string::npos);
  EXPECT_TRUE(AnyEntryHas(st["reason"]["logEntries"], "about to fail")) << st.dump();
  EXPECT_EQ(e2b.Call("GET", "/templates/aliases/e2b-fails").status, 404);

  // Bad bodies, each an E2B error {code, message} with its status.
  auto bad = [&](const json& body, int status, const std::string& says) {
    const std::string b = ask("e2b-bad");
    auto r = e2b.Call("POST", "/v2/templates/e2b-bad/builds/" + b, body);
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.json().value("code", 0), status) << r.body;
    EXPECT_NE(r.json().value("message", "").find(says), std::string::npos) << r.body;
  };
  bad({{"steps", json::array()}}, 400, "exactly one of 'fromImage' or 'fromTemplate'");
  bad({{"fromTemplate", "base"}, {"steps", {{{"type", "HEALTHCHECK"}, {"args", {"x"}}}}}}, 501,
      "step type 'HEALTHCHECK'");
  bad({{"fromTemplate", "base"},
       {"steps", {{{"type", "COPY"}, {"args", {"a", "/a"}}, {"filesHash", "abcd"}}}}},
      400, "were not uploaded");
  bad({{"fromImage", "x:1"}, {"fromImageRegistry", {{"type", "registry"}}}}, 501,
      "fromImageRegistry");
  EXPECT_EQ(e2b.Call("POST", "/v2/templates/e2b-bad/builds/00000000-0000-0000-0000-000000000000",
                     {{"fromTemplate", "base"}})
                .status,
            404);
  EXPECT_EQ(e2b.Call("POST", "/v3/templates", {{"name", "Bad Name"}}).status, 400);
  EXPECT_EQ(e2b.Call("POST", "/v3/templates", {{"name", "base"}}).status, 409);
  EXPECT_EQ(e2b.Call("GET", "/templates/x/files/not-hex").status, 400);
  EXPECT_EQ(s.Client().Request("PUT", "/e2b/template-uploads/forged", "x").status, 401);
}
