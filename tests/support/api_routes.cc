#include "tests/support/api_routes.h"

#include <utility>

using namespace std::string_literals;

namespace hutch::testing {

std::vector<Route> V1Routes() {
  const std::string j = "{}";
  return {
      {"POST", "/v1/sandboxes", j},
      {"GET", "/v1/sandboxes"},
      {"GET", "/v1/sandboxes/{id}"},
      {"DELETE", "/v1/sandboxes/{id}"},
      {"POST", "/v1/sandboxes/{id}/exec", R"({"cmd":"touch /tmp/pwned"})"},
      {"POST", "/v1/sandboxes/{id}/exec/stream", R"({"cmd":"touch /tmp/pwned"})"},
      {"POST", "/v1/sandboxes/{id}/ttl", R"({"ttl_seconds":1})"},
      {"POST", "/v1/sandboxes/{id}/snapshots", j},
      {"POST", "/v1/sandboxes/{id}/fork", R"({"count":1})"},
      {"POST", "/v1/sandboxes/{id}/pause", j},
      {"POST", "/v1/sandboxes/{id}/resume", j},
      {"GET", "/v1/sandboxes/{id}/metrics"},
      {"GET", "/v1/sandboxes/{id}/fs?path=/etc/hostname"},
      {"PUT", "/v1/sandboxes/{id}/fs?path=/tmp/pwned", "x"},
      {"DELETE", "/v1/sandboxes/{id}/fs?path=/etc/hostname"},
      {"GET", "/v1/sandboxes/{id}/fs/list?path=/"},
      {"GET", "/v1/sandboxes/{id}/fs/stat?path=/"},
      {"POST", "/v1/sandboxes/{id}/fs/mkdir", R"({"path":"/tmp/pwned"})"},
      {"POST", "/v1/sandboxes/{id}/fs/move", R"({"from":"/etc/hostname","to":"/tmp/pwned"})"},
      {"POST", "/v1/sandboxes/{id}/processes", R"({"cmd":"touch /tmp/pwned"})"},
      {"GET", "/v1/sandboxes/{id}/processes"},
      {"GET", "/v1/sandboxes/{id}/processes/1"},
      {"GET", "/v1/sandboxes/{id}/processes/1/stream"},
      {"POST", "/v1/sandboxes/{id}/processes/1/stdin", R"({"text":"x"})"},
      {"POST", "/v1/sandboxes/{id}/processes/1/signal", R"({"signal":"KILL"})"},
      {"GET", "/v1/sandboxes/{id}/pty"},
      {"POST", "/v1/sandboxes/{id}/pty/ticket"},
      {"POST", "/v1/sandboxes/{id}/network", j},
      {"GET", "/v1/snapshots"},
      {"GET", "/v1/snapshots/snap_x"},
      {"DELETE", "/v1/snapshots/snap_x"},
      {"POST", "/v1/volumes", R"({"name":"pwned","size_mb":16})"},
      {"GET", "/v1/volumes"},
      {"GET", "/v1/volumes/{vol}"},
      {"DELETE", "/v1/volumes/{vol}"},
      {"GET", "/v1/volumes/{vol}/fs?path=/keep"},
      {"PUT", "/v1/volumes/{vol}/fs?path=/pwned", "x"},
      {"DELETE", "/v1/volumes/{vol}/fs?path=/keep"},
      {"GET", "/v1/volumes/{vol}/fs/list?path=/"},
      {"GET", "/v1/volumes/{vol}/fs/stat?path=/keep"},
      {"POST", "/v1/volumes/{vol}/fs/mkdir", R"({"path":"/pwned"})"},
      {"POST", "/v1/volumes/{vol}/fs/move", R"({"from":"/keep","to":"/pwned"})"},
      {"GET", "/v1/templates"},
      {"GET", "/v1/no-such-route"},
  };
}

std::vector<Route> E2bControlRoutes() {
  const std::string j = "{}";
  return {
      {"POST", "/e2b/sandboxes", j},
      {"GET", "/e2b/sandboxes"},
      {"GET", "/e2b/v2/sandboxes"},
      {"GET", "/e2b/sandboxes/{id}"},
      {"DELETE", "/e2b/sandboxes/{id}"},
      {"POST", "/e2b/sandboxes/{id}/connect", R"({"timeout":1})"},
      {"POST", "/e2b/v2/sandboxes/{id}/connect", R"({"timeout":1})"},
      {"POST", "/e2b/sandboxes/{id}/timeout", R"({"timeout":1})"},
      {"POST", "/e2b/sandboxes/{id}/pause", j},
      {"POST", "/e2b/sandboxes/{id}/resume", j},
      {"GET", "/e2b/sandboxes/{id}/metrics"},
      {"GET", "/e2b/sandboxes/{id}/logs"},
      {"POST", "/e2b/sandboxes/{id}/snapshots", j},
      {"POST", "/e2b/sandboxes/{id}/refreshes", j},
      {"POST", "/e2b/sandboxes/{id}/fork", j},
      {"PUT", "/e2b/sandboxes/{id}/network", j},
      {"GET", "/e2b/snapshots"},
      {"DELETE", "/e2b/templates/{id}"},
      {"POST", "/e2b/volumes", j},
      {"GET", "/e2b/volumes"},
      {"GET", "/e2b/volumes/{id}"},
      {"DELETE", "/e2b/volumes/{id}"},
      {"GET", "/e2b/no-such-route"},
  };
}

std::vector<Route> EnvdRoutes() {
  const std::string p = R"({"path":"/tmp/pwned"})";
  std::vector<Route> r = {
      {"GET", "/e2b/files?path=/etc/hostname"},
      {"POST", "/e2b/files?path=/tmp/pwned", "x"},
  };
  for (const char* m : {"Start", "Connect", "List", "SendInput", "StreamInput", "SendSignal",
                        "CloseStdin", "Update"})
    r.push_back({"POST", "/e2b/process.Process/"s + m,
                 R"({"process":{"cmd":"touch","args":["/tmp/pwned"]}})"});
  for (const char* m : {"Stat", "ListDir", "MakeDir", "Move", "Remove", "CreateWatcher",
                        "GetWatcherEvents", "RemoveWatcher", "WatchDir"})
    r.push_back({"POST", "/e2b/filesystem.Filesystem/"s + m, p});
  return r;
}

// The route with its placeholders filled: the real sandbox and volume, or
// (for the controls) names that do not exist.
std::string Fill(std::string path, bool real, const std::string& id, const std::string& vol) {
  const std::vector<std::pair<std::string, std::string>> fills = {
      {"{id}", real ? id : "sb_doesnotexist"}, {"{vol}", real ? vol : "vol_doesnotexist"}};
  for (const auto& [ph, value] : fills) {
    size_t at = path.find(ph);
    if (at != std::string::npos) path.replace(at, ph.size(), value);
  }
  return path;
}

std::vector<Route> OpenSandboxSandboxRoutes() {
  const std::string j = "{}";
  return {
      {"GET", "/opensandbox/v1/sandboxes/{id}"},
      {"DELETE", "/opensandbox/v1/sandboxes/{id}"},
      {"POST", "/opensandbox/v1/sandboxes/{id}/pause", j},
      {"POST", "/opensandbox/v1/sandboxes/{id}/resume", j},
      {"POST", "/opensandbox/v1/sandboxes/{id}/renew-expiration",
       R"({"expiresAt":"2099-01-01T00:00:00Z"})"},
      {"GET", "/opensandbox/v1/sandboxes/{id}/endpoints/44772"},
      {"PATCH", "/opensandbox/v1/sandboxes/{id}/metadata", R"({"k":"v"})"},
      {"POST", "/opensandbox/v1/sandboxes/{id}/snapshots", j},
  };
}

}  // namespace hutch::testing
