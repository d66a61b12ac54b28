// The routes of the dialects as the security suite enumerates them
// (api_auth_test: every route refuses a missing key; tenants_test: every
// route refuses another tenant's key). "{id}" stands for a sandbox id,
// "{vol}" for a volume name.
#pragma once

#include <string>
#include <vector>

namespace hutch::testing {

struct Route {
  std::string method;
  std::string path;  // "{id}" stands for a sandbox id, "{vol}" for a volume
  std::string body = "";
};

// Every /v1 route (auth: Authorization: Bearer <key>).
std::vector<Route> V1Routes();
// Every E2B control-plane route (auth: X-API-Key).
std::vector<Route> E2bControlRoutes();
// Every envd route (auth: X-Access-Token of the sandbox named by
// E2b-Sandbox-Id).
std::vector<Route> EnvdRoutes();
// Every OpenSandbox lifecycle route naming a sandbox (auth:
// OPEN-SANDBOX-API-KEY).
std::vector<Route> OpenSandboxSandboxRoutes();
// `path` with "{id}" and "{vol}" replaced: by `id` and `vol` when real,
// else by names that do not exist.
std::string Fill(std::string path, bool real, const std::string& id,
                 const std::string& vol = "authvol");

}  // namespace hutch::testing
