#include "api/common/port_proxy.h"

#include <algorithm>

#include "api/common/http_relay.h"
#include "api/common/sandbox_dial.h"

namespace hutch::api {

namespace {

// Where a relay goes: a running sandbox and its instance.
struct Target {
  std::shared_ptr<Sandbox> sb;
  std::shared_ptr<Instance> inst;
};

Result<Target> RunningTarget(SandboxManager* mgr, const std::string& id) {
  auto sb = mgr->GetRunning(id);
  if (!sb.ok()) return sb.error();
  Target t{std::move(sb).value(), nullptr};
  t.inst = t.sb->instance;
  if (!t.inst) return MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is not running");
  return t;
}

// One more relay to a sandbox that has `open` of at most `max`.
Status CheckCapacity(const std::string& id, int open, int max) {
  if (open < max) return {};
  return MakeError(Code::kCapacityExhausted, "sandbox " + id + " already has " +
                                                 std::to_string(max) + " proxied connections open");
}

}  // namespace

Result<int> PortProxy::ParsePort(std::string_view s) {
  if (s.empty() || s.size() > 5 || s[0] == '0')
    return MakeError(Code::kInvalidRequest, "port must be a number from 1 to 65535");
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return MakeError(Code::kInvalidRequest, "port must be a number from 1 to 65535");
    v = v * 10 + (c - '0');
  }
  if (v > 65535) return MakeError(Code::kInvalidRequest, "port must be a number from 1 to 65535");
  return v;
}

std::optional<PortProxy::PortHost> PortProxy::ParsePortHost(std::string_view host) {
  const size_t dot = host.find('.');
  if (dot == std::string_view::npos || dot + 1 >= host.size()) return std::nullopt;
  const std::string_view label = host.substr(0, dot);
  const size_t dash = label.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 5) return std::nullopt;
  PortHost out;
  out.port = std::string(label.substr(0, dash));
  for (char c : out.port)
    if (c < '0' || c > '9') return std::nullopt;
  for (char c : label.substr(dash + 1))
    out.id.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  // The id form of SandboxManager::Create ("sb_" + hex).
  if (out.id.size() <= 3 || out.id.size() > 64 || out.id.compare(0, 3, "sb_") != 0)
    return std::nullopt;
  for (size_t i = 3; i < out.id.size(); ++i) {
    const char c = out.id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  return out;
}

asio::awaitable<void> PortProxy::Serve(HttpContext& ctx, ProxyRequest req) {
  const std::string& id = req.sandbox_id;
  auto target = RunningTarget(mgr_, id);
  if (!target.ok()) co_return co_await ctx.SendError(target.error());
  if (auto room = CheckCapacity(id, open_[id], opts_.max_connections_per_sandbox); !room.ok())
    co_return co_await ctx.SendError(room.error());
  // Counted from here until the relay ends, however it ends.
  ++open_[id];
  ++total_;
  struct Count {
    PortProxy* p;
    std::string id;
    ~Count() {
      --p->total_;
      if (--p->open_[id] <= 0) p->open_.erase(id);
    }
  } count{this, id};

  auto up = co_await DialSandboxPort(*target->inst, id, req.port, opts_.connect_timeout);
  if (!up.ok()) co_return co_await ctx.SendError(up.error());
  RelaySpec spec;
  spec.target = std::move(req.target);
  spec.strip_headers = std::move(req.strip_headers);
  spec.forwarded_prefix = std::move(req.forwarded_prefix);
  spec.idle_timeout = opts_.idle_timeout;
  spec.upstream_name = "the server on port " + std::to_string(req.port) + " in sandbox " + id;
  // The relay ends when the sandbox stops (delete, TTL, failure) or its
  // instance is replaced; traffic through it is use of the sandbox: the
  // idle policy must not pause a sandbox that is serving.
  std::weak_ptr<Sandbox> wsb = target->sb;
  std::weak_ptr<Instance> winst = target->inst;
  spec.gone = [wsb, winst] {
    auto sb = wsb.lock();
    auto inst = winst.lock();
    return !sb || !inst || sb->instance != inst || sb->deleting ||
           sb->rec.status == SandboxStatus::kStopped || sb->rec.status == SandboxStatus::kFailed;
  };
  spec.active = [wsb](std::chrono::steady_clock::time_point last) {
    if (auto sb = wsb.lock()) sb->last_active = std::max(sb->last_active, last);
  };
  co_await RelayHttp(ctx, std::move(up).value(), spec);
}

}  // namespace hutch::api
