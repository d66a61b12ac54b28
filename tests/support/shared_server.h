// One hutchd and one sandbox for all the tests of a suite. The security
// suites hold many small tests, each probing one item of the design's list:
// a server per test would cost more than the probe, and a probe that fails
// must not stop the others.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/hostile.h"
#include "tests/support/test_server.h"

namespace hutch::testing {

class SharedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    StartServer();
    CreateSuiteSandbox();
  }
  // The two halves of SetUpTestSuite, for a suite that needs something
  // (a volume) between them.
  static void StartServer() { server_ = new TestServer(); }
  static void CreateSuiteSandbox(const nlohmann::json& body = nlohmann::json::object()) {
    if (server_->ok()) id_ = server_->CreateSandbox(body);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    id_.clear();
  }
  void SetUp() override {
    ASSERT_TRUE(server_ && server_->ok());
    ASSERT_FALSE(id_.empty());
  }

  static TestServer& server() { return *server_; }
  // The suite's sandbox.
  static const std::string& sandbox() { return id_; }
  // A command in the suite's sandbox (as root): the JSON answer.
  static nlohmann::json Exec(const std::string& cmd, int timeout_seconds = 60) {
    return server_->Exec(id_, cmd, timeout_seconds);
  }
  // The same, stdout only.
  static std::string Sh(const std::string& cmd) { return StdoutOf(Exec(cmd)); }

 private:
  static inline TestServer* server_ = nullptr;
  static inline std::string id_;
};

}  // namespace hutch::testing
