// Prints hutchd's route table, one "METHOD /pattern" line a route ("*":
// any method; " not_supported" when the route answers that), then the
// matchers ("match <what>"). Nothing is started: the dialects register on a
// router without a SandboxManager. Used by the docs test
// (scripts/check-docs-routes) to hold docs/api.md and the compat docs to
// the code.
#include <iostream>

#include "server/hutch_api.h"

int main() {
  hutch::api::HutchApi api(hutch::api::ApiConfig{}, nullptr);
  for (const auto& line : api.router().Describe()) std::cout << line << "\n";
  for (const auto& m : api.router().matchers()) std::cout << "match " << m.name << "\n";
  return 0;
}
