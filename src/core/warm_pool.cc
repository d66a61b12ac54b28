#include "core/warm_pool.h"

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

#include "core/sandbox_lifecycle.h"

namespace hutch {

namespace {
// After a warm start fails (a broken start command, no room on a driver),
// the template is not tried again for this long: the pool must not turn a
// broken template into a busy loop.
constexpr std::chrono::seconds kRetryPause{30};
}  // namespace

Result<TemplateInfo> WarmPool::ResolveTarget(const std::string& name) const {
  auto tpl = s_.templates->Resolve(name);
  if (!tpl.ok()) return tpl;
  // A name that is not built yet resolves to base (code-interpreter falls
  // back so creates still work): that is not the template the operator
  // asked to keep warm, and a fresh server must not start base sandboxes.
  if (tpl->name == "base" && name != "base")
    return MakeError(Code::kTemplateNotFound, "template '" + name + "' is not built");
  return tpl;
}

void WarmPool::Configure(const std::map<std::string, int>& targets) {
  targets_.clear();
  for (const auto& [name, n] : targets)
    if (n > 0) targets_[name].count = n;
}

std::shared_ptr<Sandbox> WarmPool::Take(const WarmShape& shape) {
  bool configured = false;
  for (auto& [name, t] : targets_) {
    auto tpl = ResolveTarget(name);
    if (tpl.ok() && tpl->name == shape.template_name) {
      t.shape = shape;
      configured = true;
    }
  }
  if (!configured) return nullptr;
  for (auto it = s_.warm.begin(); it != s_.warm.end(); ++it) {
    auto sh = shapes_.find(it->first);
    if (sh == shapes_.end() || !(sh->second == shape)) continue;
    auto sb = it->second;
    if (!sb->instance || sb->rec.status != SandboxStatus::kRunning) continue;
    shapes_.erase(sh);
    s_.warm.erase(it);
    sb->instance->on_lost = nullptr;  // the claim watches it from now on
    return sb;
  }
  return nullptr;
}

std::optional<WarmShape> WarmPool::WantedShape(const std::string& name, Target& t) const {
  auto tpl = ResolveTarget(name);
  // A tenant's template is only ever its owner's: not made ahead for anyone.
  if (!tpl.ok() || !tpl->owner.empty()) return std::nullopt;
  if (t.shape && t.shape->template_name == tpl->name) {
    WarmShape s = *t.shape;
    s.build = tpl->hash;  // rebuilt since: the same shape on the new build
    return s;
  }
  // Until a create says otherwise: the defaults, with the network E2B's
  // clients get by default (mode all where the server has networking).
  return WarmShape{tpl->name,
                   tpl->hash,
                   s_.driver->name(),
                   s_.opts.default_cpu,
                   s_.opts.default_memory_mb,
                   s_.opts.default_disk_mb,
                   s_.net ? net::NetMode::kAll : net::NetMode::kNone};
}

bool WarmPool::HostHasRoom(int64_t memory_mb) const {
  // The same admission as a create's, counting the warm ones: a pool never
  // takes the room (or the memory headroom) a create would be refused for.
  return s_.Admit(1, memory_mb).ok();
}

bool WarmPool::Yield(const char* why) {
  if (s_.warm.empty()) return false;
  const std::string id = s_.warm.begin()->first;  // Drop erases the key it is given
  Drop(id, why);
  return true;
}

void WarmPool::Tick() {
  if (s_.shutting_down || !s_.ex) return;
  // What each target wants now; warm sandboxes beyond it (a shape no
  // create asks for any more, a rebuilt or removed template) go.
  std::vector<std::pair<std::string, WarmShape>> wanted;
  for (auto& [name, t] : targets_)
    if (auto shape = WantedShape(name, t)) wanted.emplace_back(name, *shape);
  std::vector<std::string> surplus;
  std::vector<int> have(wanted.size(), 0);
  for (const auto& [id, shape] : shapes_) {
    bool kept = false;
    for (size_t i = 0; i < wanted.size() && !kept; ++i) {
      if (wanted[i].second == shape && have[i] < targets_[wanted[i].first].count) {
        ++have[i];
        kept = true;
      }
    }
    if (!kept) surplus.push_back(id);
  }
  for (const auto& id : surplus) Drop(id, "no longer wanted");
  if (filling_) return;
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < wanted.size(); ++i) {
    Target& t = targets_[wanted[i].first];
    if (have[i] >= t.count || now < t.retry_after || !HostHasRoom(wanted[i].second.memory_mb))
      continue;
    filling_ = true;
    asio::co_spawn(
        s_.ex,
        [this, name = wanted[i].first, shape = wanted[i].second]() -> asio::awaitable<void> {
          co_await Fill(name, shape);
        },
        asio::detached);
    return;
  }
}

asio::awaitable<void> WarmPool::Fill(std::string name, WarmShape shape) {
  auto sb = co_await life_.CreateWarm(shape);
  if (!sb.ok()) {
    filling_ = false;
    if (s_.shutting_down) co_return;
    if (auto t = targets_.find(name); t != targets_.end())
      t->second.retry_after = std::chrono::steady_clock::now() + kRetryPause;
    spdlog::warn("warm_start_failed template={} err=\"{}\" retry_in_s={}", name, sb.error().message,
                 kRetryPause.count());
    co_return;
  }
  std::shared_ptr<Sandbox> warm = std::move(sb).value();
  const std::string id = warm->rec.id;
  s_.warm[id] = warm;
  shapes_[id] = shape;
  // Set before filling_ drops, so Shutdown (which waits for it) sees it.
  filling_ = false;
  warm->instance->on_lost = [this, id](const std::string& why) { Drop(id, why.c_str()); };
  spdlog::info("sandbox={} warm_ready template={} memory_mb={} network={}", id, shape.template_name,
               shape.memory_mb, net::NetModeName(shape.network));
}

void WarmPool::Drop(const std::string& id, const char* why) {
  auto it = s_.warm.find(id);
  if (it == s_.warm.end()) return;
  auto sb = it->second;
  s_.warm.erase(it);
  shapes_.erase(id);
  spdlog::info("sandbox={} warm_dropped why=\"{}\"", id, why);
  sb->rec.status = SandboxStatus::kStopped;
  auto inst = std::move(sb->instance);
  if (inst) inst->on_lost = nullptr;
  const int slot = std::exchange(sb->rec.net_slot, -1);
  if (!s_.ex) return;
  asio::co_spawn(
      s_.ex,
      [s = &s_, inst = std::move(inst), slot]() -> asio::awaitable<void> {
        co_await s->Teardown(inst, slot);
      },
      asio::detached);
}

asio::awaitable<void> WarmPool::Shutdown() {
  asio::steady_timer wait(co_await asio::this_coro::executor);
  while (filling_) {
    wait.expires_after(std::chrono::milliseconds(50));
    boost::system::error_code ec;
    co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  auto warm = std::exchange(s_.warm, {});
  shapes_.clear();
  for (auto& [id, sb] : warm) {
    sb->rec.status = SandboxStatus::kStopped;
    auto inst = std::move(sb->instance);
    if (inst) inst->on_lost = nullptr;
    co_await s_.Teardown(std::move(inst), std::exchange(sb->rec.net_slot, -1));
  }
}

}  // namespace hutch
