// The debootstrap path, end to end (label `slow`: minutes and the host's
// Debian mirror): templates/debian.toml then templates/python.toml as
// shipped, a sandbox from python imports numpy and pandas, and building
// python again is a cache hit.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/support/test_server.h"

using hutch::testing::TestServer;
using nlohmann::json;

namespace {

std::string ShippedSpec(const std::string& name) {
  std::ifstream in(std::string(getenv("HUTCH_SOURCE_DIR")) + "/templates/" + name + ".toml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Builds a shipped spec; returns the "done" event (null on failure, with
// the error printed).
json BuildShipped(const TestServer& s, const std::string& name) {
  auto c = s.Client();
  json done, error;
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.SseRequest("POST", "/v1/templates", ShippedSpec(name),
                        {{"Accept", "text/event-stream"}}, [&](const hutch::client::SseEvent& e) {
                          json d = json::parse(e.data, nullptr, false);
                          if (e.event == "step")
                            std::fprintf(stderr, "[%s] step %d/%d %s\n", name.c_str(),
                                         d.value("index", 0), d.value("of", 0),
                                         d.value("name", "").c_str());
                          if (e.event == "done") done = d;
                          if (e.event == "error") error = d;
                          return true;
                        });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "[%s] status %d in %.1f s\n", name.c_str(), r.status, secs);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(error.is_null()) << error.dump(2);
  return done;
}

}  // namespace

TEST(TemplateDebian, PythonTemplateImportsNumpyAndPandas) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json debian = BuildShipped(s, "debian");
  ASSERT_FALSE(debian.is_null());
  json python = BuildShipped(s, "python");
  ASSERT_FALSE(python.is_null());
  EXPECT_FALSE(python.value("cached", true));

  std::string id = s.CreateSandbox({{"template", "python"}});
  auto r =
      s.Exec(id, "python3 -c 'import numpy, pandas; print(numpy.__version__)'; whoami; pwd", 120);
  ASSERT_EQ(r.value("exit_code", -1), 0) << r.dump();
  std::string out = r.value("stdout", "");
  EXPECT_NE(out.find("1."), std::string::npos) << out;  // numpy 1.x on bookworm
  EXPECT_NE(out.find("user\n/home/user\n"), std::string::npos) << out;
  // The same via an alias that every dialect accepts.
  std::string id2 = s.CreateSandbox({{"template", "python:3.12"}});
  EXPECT_EQ(s.Exec(id2, "python3 -c 'import pandas; print(1)'", 120).value("stdout", ""), "1\n");

  auto t0 = std::chrono::steady_clock::now();
  json again = BuildShipped(s, "python");
  ASSERT_FALSE(again.is_null());
  EXPECT_TRUE(again.value("cached", false));
  std::fprintf(stderr, "cache hit in %.3f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}
