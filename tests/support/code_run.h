// One run of POST /v1/sandboxes/{id}/code, read to its end: the SSE events
// in order, with helpers for what the tests check (output by stream,
// the error, the results, the end). Shared by the code interpreter's API
// tests and the security suite's kernel tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/test_server.h"

namespace hutch::testing {

struct CodeEvent {
  std::string name;
  nlohmann::json data;
};

struct CodeRun {
  int status = 0;
  std::string body;  // the JSON error when status != 200
  std::vector<CodeEvent> events;
  // Every stdout (or stderr) text joined.
  std::string Out(const char* stream = "stdout") const;
  // The `error` event's data, or null.
  nlohmann::json Error() const;
  std::vector<nlohmann::json> Results() const;
  // The `end` event's data if it came last, or null.
  nlohmann::json End() const;
};

// POST /code with `body`; `stop_after` > 0 drops the connection after that
// many events.
CodeRun RunCode(const TestServer& s, const std::string& id, const nlohmann::json& body,
                size_t stop_after = 0);

}  // namespace hutch::testing
