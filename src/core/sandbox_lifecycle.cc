#include "core/sandbox_lifecycle.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/create_steps.h"
#include "core/exec_session.h"
#include "core/process_ops.h"
#include "core/sandbox_events.h"
#include "core/snapshot_book.h"

namespace hutch {

void SandboxLifecycle::WatchLoss(Sandbox& sb) {
  std::string id = sb.rec.id;
  sb.instance->on_lost = [this, id](const std::string& why) { MarkFailed(id, why); };
}

asio::awaitable<Status> SandboxLifecycle::Recover(RecoverReport* rep, std::set<std::string>* keep) {
  auto rows = s_.store->LoadSandboxes();
  if (!rows.ok()) co_return rows.error().Context("recover");
  const auto now = std::chrono::system_clock::now();
  for (const auto& row : *rows) {
    auto sb = std::make_shared<Sandbox>();
    SandboxRecord& r = sb->rec;
    if (!SandboxRecord::FromStoreJson(row.record, &r) || r.id != row.id) {
      spdlog::error("sandbox={} recover_unreadable_record (dropped)", row.id);
      s_.Forget(row.id);
      continue;
    }
    if (r.status == SandboxStatus::kStarting) {
      // Its create was never answered: as if it never happened.
      ++rep->forgotten;
      s_.Forget(r.id);
      continue;
    }
    if (r.status == SandboxStatus::kRunning || r.status == SandboxStatus::kPaused) {
      if (r.expires_at <= now) {
        r.status = SandboxStatus::kStopped;
        r.reason = "expired";
        r.expires_at = now + s_.opts.tombstone_ttl;
        sb->events = &s_.events;
        NoteStopped(*sb, r.reason);
        ++rep->expired;
        spdlog::info("sandbox={} ttl_expired (while hutchd was down)", r.id);
      } else {
        InstanceSpec spec;
        spec.id = r.id;
        spec.cpus = r.cpu;
        spec.memory_mb = r.memory_mb;
        spec.disk_mb = r.disk_mb;
        spec.pids_max = s_.opts.pids_max;
        // Records from before drivers were named are the jail's.
        auto drv = s_.PickDriver(r.driver.empty() ? std::string("jail") : r.driver);
        Result<std::shared_ptr<Instance>> inst = MakeError(Code::kInternal, "no driver");
        if (drv.ok()) {
          inst =
              co_await drv.value()->Adopt(spec, row.instance, r.status == SandboxStatus::kPaused);
        } else {
          inst = drv.error();
        }
        if (inst.ok() && r.net_slot >= 0) {
          // Its processes live on in the slot's namespace; the slot's
          // rules and DNS listener must come back with them.
          Status net_ok = MakeError(Code::kUnavailable, s_.net_unavailable);
          if (s_.net) {
            auto lease = co_await s_.net->Adopt(r.net_slot, r.network);
            net_ok = lease.ok() ? Status{} : Status(lease.error());
          }
          if (!net_ok.ok()) {
            co_await inst.value()->Destroy();
            inst = net_ok.error().Context("network");
          }
        }
        sb->events = &s_.events;
        if (inst.ok()) {
          sb->instance = inst.value();
          sb->exits.rediscover = true;
          NoteAdopted(*sb);
          WatchLoss(*sb);
          keep->insert(r.id);
          ++rep->adopted;
          spdlog::info("sandbox={} adopted", r.id);
        } else {
          r.status = SandboxStatus::kFailed;
          r.reason = "lost while hutchd was down: " + inst.error().message;
          NoteFailed(*sb, r.reason);
          ++rep->lost;
          spdlog::warn("sandbox={} adopt_failed err=\"{}\"", r.id, inst.error().message);
        }
      }
      if (r.status != SandboxStatus::kRunning && r.status != SandboxStatus::kPaused)
        (void)s_.Persist(*sb);
    }
    sb->events = &s_.events;
    s_.sandboxes[r.id] = sb;
  }
  co_return Status{};
}

asio::awaitable<Result<SandboxRecord>> SandboxLifecycle::Create(CreateOptions o) {
  CreateSteps steps;
  auto rec = co_await CreateIn(steps, std::move(o));
  if (rec.ok()) {
    steps.Commit();
    co_return rec;
  }
  // Whatever the step, nothing it acquired outlives the answer.
  if (steps.entry)
    spdlog::error("sandbox={} create_failed err=\"{}\"", steps.entry->id(), rec.error().message);
  co_await steps.Unwind();
  co_return rec;
}

asio::awaitable<Result<SandboxRecord>> SandboxLifecycle::CreateIn(CreateSteps& steps,
                                                                  CreateOptions o) {
  const ManagerOptions& opts = s_.opts;
  if (s_.shutting_down) co_return MakeError(Code::kUnavailable, "server is shutting down");
  int64_t ttl = o.ttl_seconds.value_or(opts.default_ttl_seconds);
  if (ttl <= 0) co_return MakeError(Code::kInvalidRequest, "ttl_seconds must be positive");
  if (ttl > opts.max_ttl_seconds)
    co_return MakeError(Code::kInvalidRequest, "ttl_seconds exceeds the maximum of " +
                                                   std::to_string(opts.max_ttl_seconds));
  double cpu = o.cpu.value_or(opts.default_cpu);
  if (!(cpu > 0 && cpu <= 64)) co_return MakeError(Code::kInvalidRequest, "cpu must be in (0, 64]");
  int64_t mem = o.memory_mb.value_or(opts.default_memory_mb);
  if (mem < 16 || mem > opts.max_memory_mb)
    co_return MakeError(Code::kInvalidRequest,
                        "memory_mb must be in [16, " + std::to_string(opts.max_memory_mb) + "]");
  int64_t disk = o.disk_mb.value_or(opts.default_disk_mb);
  if (disk < 16 || disk > opts.max_disk_mb)
    co_return MakeError(Code::kInvalidRequest,
                        "disk_mb must be in [16, " + std::to_string(opts.max_disk_mb) + "]");
  std::vector<std::string> layers = std::move(o.layers);
  std::string rootfs = o.rootfs;
  const bool from_layers = !o.snapshot.empty() || !layers.empty();
  if (!o.snapshot.empty()) {
    auto snap = s_.snapshots.find(o.snapshot);
    if (snap == s_.snapshots.end() || snap->second.deleted ||
        (!o.scope.empty() && snap->second.owner != o.scope))
      co_return MakeError(Code::kSnapshotNotFound, "snapshot " + o.snapshot + " not found");
    o.template_name = snap->second.template_name;
    layers = snap->second.layers;
    rootfs = snap->second.rootfs;
  }
  auto drv = s_.PickDriver(o.driver);
  if (!drv.ok()) co_return drv.error();
  // An image's template is pulled on first use (a cache hit afterwards).
  if (IsImageTemplateName(o.template_name) && !from_layers) {
    if (!s_.images)
      co_return MakeError(Code::kNotSupported,
                          "this server has no image puller for '" + o.template_name + "'");
    const ImagePullSink no_progress;
    auto img = co_await s_.images->Ensure(o.template_name, no_progress);
    if (!img.ok()) co_return img.error();
    o.template_name = img->name;
  }
  auto tpl = s_.templates->Resolve(o.template_name);
  if (!tpl.ok()) co_return tpl.error();
  if (!o.scope.empty() && !tpl->owner.empty() && tpl->owner != o.scope)
    co_return MakeError(Code::kTemplateNotFound, "template '" + o.template_name + "' not found");
  // A snapshot's stack already lists the template's layers; a template's
  // own create stands on the template's stack.
  if (!from_layers) layers = tpl->layers;
  if (rootfs.empty()) rootfs = tpl->rootfs;
  if (auto st = CheckVolumeMounts(o.volumes); !st.ok()) co_return st.error();
  if (o.auto_pause_seconds < 0)
    co_return MakeError(Code::kInvalidRequest, "auto_pause_seconds must be >= 0");
  // Parents before children: "/a" sorts before "/a/b".
  std::sort(
      o.volumes.begin(), o.volumes.end(),
      [](const VolumeMountRequest& a, const VolumeMountRequest& b) { return a.path < b.path; });
  std::vector<InstanceMount> mounts;
  for (const auto& v : o.volumes) {
    if (!s_.volumes) co_return MakeError(Code::kNotSupported, "this server has no volumes");
    if (!o.scope.empty()) {
      auto vol = s_.volumes->Get(v.name);
      if (vol.ok() && vol->owner != o.scope)
        co_return MakeError(Code::kVolumeNotFound, "volume " + v.name + " not found");
    }
    auto dir = s_.volumes->DataDir(v.name);
    if (!dir.ok()) co_return dir.error();
    mounts.push_back({*dir, v.path, v.read_only});
  }
  if (o.tenant || !o.scope.empty()) {
    // Counted with the starting ones, and the new entry is registered
    // below before the first co_await: concurrent creates cannot all pass.
    if (auto st = CheckCountQuota("live sandboxes", s_.live_count(o.owner_key), 1,
                                  opts.quotas.max_sandboxes, "--tenant-max-sandboxes");
        !st.ok())
      co_return st.error();
  }
  if (o.network.mode != net::NetMode::kNone && !s_.net)
    co_return MakeError(Code::kNotSupported,
                        "network mode " + std::string(net::NetModeName(o.network.mode)) +
                            " is not available on this server: " + s_.net_unavailable);

  WarmShape shape{tpl->name, tpl->hash, drv.value()->name(), cpu, mem, disk, o.network.mode};
  if (warm_ && !tpl->hash.empty()) {
    // Anything a running sandbox cannot take afterwards rules a warm one out.
    const bool warmable = !from_layers && o.volumes.empty() && !o.machine && o.env.empty() &&
                          tpl->owner.empty() && IsWarmableNetwork(o.network);
    // A claim moves a sandbox the host already holds from the pool to its
    // owner: nothing more to admit.
    if (warmable) {
      if (auto sb = warm_->Take(shape)) co_return co_await Claim(steps, std::move(sb), o, ttl);
    }
  }
  if (auto st = Admit(1, mem); !st.ok()) co_return st.error();

  auto sb = std::make_shared<Sandbox>();
  SandboxRecord& r = sb->rec;
  r.id = "sb_" + RandomHex(8);
  r.template_name = o.template_name;
  r.status = SandboxStatus::kStarting;
  r.created_at = std::chrono::system_clock::now();
  r.expires_at = r.created_at + std::chrono::seconds(ttl);
  r.metadata = std::move(o.metadata);
  // The template's env first; the create's own overrides it.
  r.env = tpl->env;
  for (auto& [k, v] : o.env) r.env[k] = std::move(v);
  r.user = tpl->user;
  r.workdir = tpl->workdir;
  r.cpu = cpu;
  r.memory_mb = mem;
  r.disk_mb = disk;
  r.driver = drv.value()->name();
  r.owner_key = o.owner_key;
  r.snapshot = o.snapshot;
  r.layers = layers;
  r.rootfs = rootfs;
  r.volumes = o.volumes;
  r.auto_pause_seconds = o.auto_pause_seconds;
  r.pause_on_expiry = o.pause_on_expiry;
  r.network = o.network;

  // From here on every step acquires something; `steps` gives it back if a
  // later step fails.
  steps.starting = std::make_unique<StartingCount>(s_.starting);
  steps.entry = std::make_unique<RegistryEntry>(s_, sb);
  steps.resources = std::make_unique<SandboxResources>(s_, sb);
  if (auto st = co_await Launch(steps, sb, *drv, *tpl, std::move(mounts), o.machine); !st.ok())
    co_return st.error();
  // Acknowledged state must be durable before the client hears of it.
  if (auto st = s_.Persist(*sb); !st.ok()) co_return st.error().Context("create sandbox");
  WatchLoss(*sb);
  sb->events = &s_.events;
  NoteCreated(*sb, false);
  spdlog::info("sandbox={} created template={} cpu={} memory_mb={} disk_mb={} network={}", r.id,
               r.template_name, cpu, mem, disk, net::NetModeName(r.network.mode));
  co_return r;
}

asio::awaitable<Status> SandboxLifecycle::Launch(CreateSteps& steps, std::shared_ptr<Sandbox> sb,
                                                 Driver* drv, const TemplateInfo& tpl,
                                                 std::vector<InstanceMount> mounts,
                                                 std::shared_ptr<MachineImage> machine) {
  SandboxRecord& r = sb->rec;
  InstanceSpec spec;
  spec.id = r.id;
  spec.rootfs = r.rootfs;
  spec.layers = r.layers;
  spec.mounts = std::move(mounts);
  spec.cpus = r.cpu;
  spec.memory_mb = r.memory_mb;
  spec.disk_mb = r.disk_mb;
  spec.pids_max = s_.opts.pids_max;
  spec.machine = machine;
  if (r.network.mode != net::NetMode::kNone) {
    auto lease = co_await s_.net->Acquire(r.network);
    if (!lease.ok()) co_return lease.error().Context("create sandbox: network");
    r.net_slot = lease->slot;
    spec.netns_path = lease->netns_path;
    spec.resolv_conf = lease->resolv_conf;
    spec.gateway = lease->gateway;
  }
  auto inst = co_await drv->Create(spec);
  steps.starting.reset();
  if (!inst.ok()) co_return inst.error().Context("create sandbox");
  sb->instance = inst.value();
  // Deleted while starting: its tombstone stays, what we made goes.
  auto deleted = [&] {
    return MakeError(Code::kSandboxNotRunning, "sandbox " + r.id + " was deleted while starting");
  };
  if (sb->deleting || r.status != SandboxStatus::kStarting) co_return deleted();
  r.status = SandboxStatus::kRunning;
  r.boot = sb->instance->boot();
  // A fork child of a running machine has its source's processes already.
  if (!machine) {
    if (auto st = co_await StartTemplateProcess(sb, tpl); !st.ok())
      co_return sb->deleting
          ? deleted()
          : st.error().Context("create sandbox from template '" + tpl.name + "'");
    if (sb->deleting) co_return deleted();
  }
  co_return Status{};
}

asio::awaitable<Result<SandboxRecord>> SandboxLifecycle::Claim(CreateSteps& steps,
                                                               std::shared_ptr<Sandbox> sb,
                                                               CreateOptions& o, int64_t ttl) {
  SandboxRecord& r = sb->rec;
  // Its life as the caller's sandbox starts now.
  r.template_name = o.template_name;
  r.created_at = std::chrono::system_clock::now();
  r.expires_at = r.created_at + std::chrono::seconds(ttl);
  r.metadata = std::move(o.metadata);
  r.owner_key = o.owner_key;
  r.auto_pause_seconds = o.auto_pause_seconds;
  r.pause_on_expiry = o.pause_on_expiry;
  sb->last_active = std::chrono::steady_clock::now();
  steps.entry = std::make_unique<RegistryEntry>(s_, sb);
  steps.resources = std::make_unique<SandboxResources>(s_, sb);
  if (auto st = s_.Persist(*sb); !st.ok()) co_return st.error().Context("create sandbox");
  WatchLoss(*sb);
  sb->events = &s_.events;
  NoteCreated(*sb, true);
  spdlog::info("sandbox={} created template={} cpu={} memory_mb={} disk_mb={} network={} warm=1",
               r.id, r.template_name, r.cpu, r.memory_mb, r.disk_mb,
               net::NetModeName(r.network.mode));
  co_return r;
}

Status SandboxLifecycle::Admit(int count, int64_t memory_mb) {
  auto st = s_.Admit(count, memory_mb);
  // A warm sandbox's place frees at once; its memory once torn down (in
  // the background), so a refusal for memory still stands for this create
  // but the next finds the room.
  while (!st.ok() && warm_ && warm_->Yield("the host needs its room for a create"))
    st = s_.Admit(count, memory_mb);
  return st;
}

asio::awaitable<Result<std::shared_ptr<Sandbox>>> SandboxLifecycle::CreateWarm(
    const WarmShape& shape) {
  if (s_.shutting_down) co_return MakeError(Code::kUnavailable, "server is shutting down");
  auto drv = s_.PickDriver(shape.driver);
  if (!drv.ok()) co_return drv.error();
  auto tpl = s_.templates->Resolve(shape.template_name);
  if (!tpl.ok()) co_return tpl.error();
  if (tpl->hash != shape.build)
    co_return MakeError(Code::kConflict, "template '" + shape.template_name + "' was rebuilt");
  if (shape.network != net::NetMode::kNone && !s_.net)
    co_return MakeError(Code::kNotSupported, "networking is not available: " + s_.net_unavailable);
  auto sb = std::make_shared<Sandbox>();
  SandboxRecord& r = sb->rec;
  r.id = "sb_" + RandomHex(8);
  r.template_name = tpl->name;
  r.status = SandboxStatus::kStarting;
  r.env = tpl->env;
  r.user = tpl->user;
  r.workdir = tpl->workdir;
  r.cpu = shape.cpu;
  r.memory_mb = shape.memory_mb;
  r.disk_mb = shape.disk_mb;
  r.driver = drv.value()->name();
  r.layers = tpl->layers;
  r.rootfs = tpl->rootfs;
  r.network.mode = shape.network;
  // Counted as starting (the caps see it) but not registered: nobody can
  // name it until a create claims it.
  CreateSteps steps;
  steps.starting = std::make_unique<StartingCount>(s_.starting);
  steps.resources = std::make_unique<SandboxResources>(s_, sb);
  auto st = co_await Launch(steps, sb, *drv, *tpl, {}, nullptr);
  if (!st.ok()) {
    co_await steps.Unwind();
    co_return st.error();
  }
  steps.Commit();
  co_return sb;
}

bool IsWarmableNetwork(const net::NetworkPolicy& p) {
  return (p.mode == net::NetMode::kNone || p.mode == net::NetMode::kAll) && p.private_hosts.empty();
}

asio::awaitable<Status> SandboxLifecycle::StartTemplateProcess(std::shared_ptr<Sandbox> sb,
                                                               const TemplateInfo& tpl) {
  if (!tpl.start.empty()) {
    ExecRequest req;
    req.argv = {"/bin/sh", "-c", tpl.start};
    req.timeout_seconds = 0;
    const std::optional<std::string> tag = std::string("template-start");
    auto p = co_await StartProcess(sb, req, tag);
    if (!p.ok()) co_return p.error().Context("start command");
  }
  if (tpl.ready.empty()) co_return Status{};
  // Polled until it exits 0: the start command may take a while to listen.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(tpl.ready_timeout_seconds);
  asio::steady_timer wait(co_await asio::this_coro::executor);
  std::string last;
  while (true) {
    ExecRequest req;
    req.argv = {"/bin/sh", "-c", tpl.ready};
    req.timeout_seconds = std::max<int64_t>(1, tpl.ready_timeout_seconds);
    auto res = co_await RunExec(sb, req, 4096);
    if (!res.ok()) co_return res.error().Context("ready check");
    if (res->exit.exit_code == 0) co_return Status{};
    last = res->stderr_data.empty() ? res->stdout_data : res->stderr_data;
    if (std::chrono::steady_clock::now() >= deadline) break;
    wait.expires_after(std::chrono::milliseconds(100));
    boost::system::error_code ec;
    co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return MakeError(Code::kUnavailable, "ready check '" + tpl.ready +
                                              "' did not succeed within " +
                                              std::to_string(tpl.ready_timeout_seconds) + " s" +
                                              (last.empty() ? "" : ": " + last));
}

asio::awaitable<Result<SandboxRecord>> SandboxLifecycle::CreateIdempotent(
    CreateOptions o, const std::string& key, const std::string& canonical_body, bool* replayed) {
  *replayed = false;
  const std::string scope = o.owner_key;
  asio::steady_timer wait(co_await asio::this_coro::executor);
  for (int i = 0; i < 3000; ++i) {
    auto l = s_.idempotency.Claim(scope, key, canonical_body);
    switch (l.state) {
      case IdempotencyCache::State::kMismatch:
        co_return MakeError(Code::kConflict,
                            "Idempotency-Key '" + key + "' was already used with a different body");
      case IdempotencyCache::State::kDone: {
        auto rec = Get(l.sandbox_id);
        if (!rec.ok())
          co_return MakeError(Code::kConflict,
                              "the sandbox created under Idempotency-Key '" + key + "' is gone");
        *replayed = true;
        co_return rec.value();
      }
      case IdempotencyCache::State::kPending: {
        // The first request with this key is still creating: wait for it.
        wait.expires_after(std::chrono::milliseconds(10));
        boost::system::error_code ec;
        co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      case IdempotencyCache::State::kNew: {
        auto rec = co_await Create(std::move(o));
        if (!rec.ok()) {
          s_.idempotency.Abandon(scope, key);
        } else if (auto st = s_.idempotency.Complete(scope, key, rec->id); !st.ok()) {
          // The sandbox exists and is answered; only a retry after a
          // restart would miss it and create another.
          spdlog::error("sandbox={} idempotency_persist_failed err=\"{}\"", rec->id,
                        st.error().message);
        }
        co_return rec;
      }
    }
  }
  co_return MakeError(Code::kUnavailable,
                      "the first create with Idempotency-Key '" + key + "' did not finish");
}

void SandboxLifecycle::MarkFailed(const std::string& id, const std::string& reason) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) return;
  auto& sb = it->second;
  if (sb->rec.status != SandboxStatus::kRunning && sb->rec.status != SandboxStatus::kPaused) return;
  spdlog::warn("sandbox={} failed reason=\"{}\"", id, reason);
  sb->rec.status = SandboxStatus::kFailed;
  sb->rec.reason = reason;
  auto inst = std::move(sb->instance);
  const int slot = std::exchange(sb->rec.net_slot, -1);
  (void)s_.Persist(*sb);
  NoteFailed(*sb, reason);
  // Free the kernel resources now; the record stays until deleted.
  if (inst || slot >= 0) {
    auto done = std::make_shared<asio::steady_timer>(s_.ex, asio::steady_timer::time_point::max());
    sb->teardown = done;
    asio::co_spawn(
        s_.ex,
        [s = &s_, inst, slot, done]() -> asio::awaitable<void> {
          co_await s->Teardown(inst, slot);
          // Wakes a waiting delete, and any later wait ends at once.
          done->expires_at(asio::steady_timer::time_point::min());
        },
        asio::detached);
  }
}

Result<std::shared_ptr<Sandbox>> SandboxLifecycle::GetRunning(const std::string& id) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) return SandboxNotFound(id);
  auto& sb = it->second;
  if (sb->rec.status == SandboxStatus::kPaused && sb->rec.auto_paused) {
    if (auto r = Resume(id); !r.ok()) return r.error().Context("resume idle sandbox");
  }
  if (sb->rec.status == SandboxStatus::kPaused)
    return MakeError(Code::kConflict, "sandbox " + id + " is paused");
  if (sb->rec.status != SandboxStatus::kRunning || !sb->instance)
    return MakeError(Code::kSandboxNotRunning,
                     "sandbox " + id + " is " + StatusName(sb->rec.status) +
                         (sb->rec.reason.empty() ? "" : " (" + sb->rec.reason + ")"));
  sb->last_active = std::chrono::steady_clock::now();
  return sb;
}

Result<SandboxRecord> SandboxLifecycle::Get(const std::string& id) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) return SandboxNotFound(id);
  return it->second->rec;
}

ListPage SandboxLifecycle::List(const ListFilter& f) {
  ListPage page;
  size_t limit = std::clamp<size_t>(f.limit, 1, 1000);
  auto it = f.cursor.empty() ? s_.sandboxes.begin() : s_.sandboxes.upper_bound(f.cursor);
  for (; it != s_.sandboxes.end(); ++it) {
    const SandboxRecord& r = it->second->rec;
    if (f.status && r.status != *f.status) continue;
    if (!f.owner.empty() && r.owner_key != f.owner) continue;
    if (!f.template_name.empty() && r.template_name != f.template_name) continue;
    if (f.created_after && r.created_at < *f.created_after) continue;
    if (!f.any_status.empty() &&
        std::find(f.any_status.begin(), f.any_status.end(), r.status) == f.any_status.end())
      continue;
    bool match = true;
    for (const auto& [k, v] : f.metadata) {
      auto m = r.metadata.find(k);
      if (m == r.metadata.end() || m->second != v) {
        match = false;
        break;
      }
    }
    if (!match) continue;
    if (page.items.size() == limit) {
      page.next_cursor = page.items.back().id;
      break;
    }
    page.items.push_back(r);
  }
  return page;
}

asio::awaitable<Status> SandboxLifecycle::Delete(const std::string& id, const std::string& reason) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) co_return SandboxNotFound(id);
  auto sb = it->second;
  if (sb->rec.status == SandboxStatus::kStopped) co_return Status{};
  sb->deleting = true;
  bool was_starting = sb->rec.status == SandboxStatus::kStarting;
  sb->rec.status = SandboxStatus::kStopped;
  if (sb->rec.reason.empty() || reason != "deleted") sb->rec.reason = reason;
  sb->rec.expires_at = std::chrono::system_clock::now() + s_.opts.tombstone_ttl;
  // A starting sandbox's create frees its own instance and slot when it
  // sees `deleting`.
  auto inst = was_starting ? nullptr : std::move(sb->instance);
  const int slot = was_starting ? -1 : std::exchange(sb->rec.net_slot, -1);
  // Record the deletion first: if hutchd dies while destroying, the next
  // run must not adopt this sandbox (it removes what is left instead).
  (void)s_.Persist(*sb);
  // Its credentials go now, not with the tombstone: no request of its
  // processes still running is matched from here on.
  if (s_.vaults) s_.vaults->Forget(id);
  NoteStopped(*sb, sb->rec.reason);
  if (!was_starting) co_await s_.Teardown(std::move(inst), slot);
  if (auto done = std::exchange(sb->teardown, nullptr)) {
    // A failed sandbox's teardown may still run: wait for its end.
    boost::system::error_code ec;
    co_await done->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  snaps_.Collect();
  spdlog::info("sandbox={} stopped reason=\"{}\"", id, reason);
  co_return Status{};
}

Result<SandboxRecord> SandboxLifecycle::SetTtl(const std::string& id, int64_t ttl_seconds) {
  if (ttl_seconds <= 0) return MakeError(Code::kInvalidRequest, "ttl_seconds must be positive");
  if (ttl_seconds > s_.opts.max_ttl_seconds)
    return MakeError(Code::kInvalidRequest, "ttl_seconds exceeds the maximum of " +
                                                std::to_string(s_.opts.max_ttl_seconds));
  auto it = s_.sandboxes.find(id);
  if (it != s_.sandboxes.end() && it->second->rec.status == SandboxStatus::kPaused) {
    // A paused sandbox may be renewed too (its TTL keeps counting).
  } else if (auto run = GetRunning(id); !run.ok()) {
    return run.error();
  }
  Sandbox& sb = *it->second;
  SysTime before = sb.rec.expires_at;
  sb.rec.expires_at = std::chrono::system_clock::now() + std::chrono::seconds(ttl_seconds);
  if (auto st = s_.Persist(sb); !st.ok()) {
    sb.rec.expires_at = before;
    return st.error().Context("renew ttl");
  }
  NoteEvent(sb, EventLevel::kInfo, "ttl_changed",
            "time to live set to " + std::to_string(ttl_seconds) + " s (until " +
                FormatRfc3339(sb.rec.expires_at) + ")",
            {{"ttl_seconds", ttl_seconds}, {"expires_at", FormatRfc3339(sb.rec.expires_at)}});
  return sb.rec;
}

Result<SandboxRecord> SandboxLifecycle::PatchMetadata(
    const std::string& id, const std::map<std::string, std::optional<std::string>>& patch) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) return SandboxNotFound(id);
  auto& rec = it->second->rec;
  if (rec.status == SandboxStatus::kStopped || rec.status == SandboxStatus::kFailed)
    return MakeError(Code::kSandboxNotFound, "sandbox " + id + " is " + StatusName(rec.status));
  auto before = rec.metadata;
  for (const auto& [k, v] : patch) {
    if (v) rec.metadata[k] = *v;
    else rec.metadata.erase(k);
  }
  if (auto st = s_.Persist(*it->second); !st.ok()) {
    rec.metadata = std::move(before);
    return st.error().Context("patch metadata");
  }
  return rec;
}

Result<SandboxRecord> SandboxLifecycle::Pause(const std::string& id, bool idle) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) return SandboxNotFound(id);
  auto& sb = it->second;
  if (sb->rec.status == SandboxStatus::kPaused) {
    // Paused by the API now, whatever paused it: a request no longer wakes it.
    if (!idle && sb->rec.auto_paused) {
      sb->rec.auto_paused = false;
      if (auto st = s_.Persist(*sb); !st.ok()) {
        sb->rec.auto_paused = true;
        return st.error().Context("pause");
      }
    }
    return sb->rec;
  }
  if (sb->rec.status != SandboxStatus::kRunning || !sb->instance)
    return MakeError(Code::kSandboxNotRunning,
                     "sandbox " + id + " is " + StatusName(sb->rec.status));
  if (auto st = sb->instance->Pause(); !st.ok()) return st.error();
  sb->rec.status = SandboxStatus::kPaused;
  sb->rec.auto_paused = idle;
  if (auto st = s_.Persist(*sb); !st.ok()) {
    (void)sb->instance->Resume();
    sb->rec.status = SandboxStatus::kRunning;
    sb->rec.auto_paused = false;
    return st.error().Context("pause");
  }
  NoteEvent(*sb, EventLevel::kInfo, "paused",
            idle ? "paused: idle for " + std::to_string(sb->rec.auto_pause_seconds) + " s"
                 : std::string("paused"),
            {{"idle", idle}});
  spdlog::info("sandbox={} paused", id);
  return sb->rec;
}

Result<SandboxRecord> SandboxLifecycle::Resume(const std::string& id) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) return SandboxNotFound(id);
  auto& sb = it->second;
  if (sb->rec.status == SandboxStatus::kRunning) return sb->rec;
  if (sb->rec.status != SandboxStatus::kPaused || !sb->instance)
    return MakeError(Code::kSandboxNotRunning,
                     "sandbox " + id + " is " + StatusName(sb->rec.status));
  if (auto st = sb->instance->Resume(); !st.ok()) return st.error();
  sb->rec.status = SandboxStatus::kRunning;
  const bool was_idle = sb->rec.auto_paused;
  sb->rec.auto_paused = false;
  sb->last_active = std::chrono::steady_clock::now();
  if (auto st = s_.Persist(*sb); !st.ok()) {
    (void)sb->instance->Pause();
    sb->rec.status = SandboxStatus::kPaused;
    sb->rec.auto_paused = was_idle;
    return st.error().Context("resume");
  }
  NoteEvent(*sb, EventLevel::kInfo, "resumed",
            was_idle ? "resumed by a request (it was idle)" : "resumed", {{"idle", was_idle}});
  spdlog::info("sandbox={} resumed", id);
  return sb->rec;
}

asio::awaitable<Result<SandboxRecord>> SandboxLifecycle::SetNetworkPolicy(const std::string& id,
                                                                          net::NetworkPolicy p) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) co_return SandboxNotFound(id);
  auto sb = it->second;
  if ((sb->rec.status != SandboxStatus::kRunning && sb->rec.status != SandboxStatus::kPaused) ||
      !sb->instance)
    co_return MakeError(Code::kSandboxNotRunning,
                        "sandbox " + id + " is " + StatusName(sb->rec.status));
  if (sb->rec.net_slot < 0) {
    if (p.mode == net::NetMode::kNone) co_return sb->rec;
    co_return MakeError(
        Code::kNotSupported,
        "sandbox " + id +
            " was created with network mode none and has no network interface; create it with "
            "mode all or policy to change its policy later (policy with default deny allows "
            "nothing)");
  }
  if (auto st = co_await s_.net->SetPolicy(sb->rec.net_slot, p); !st.ok()) co_return st.error();
  sb->rec.network = std::move(p);
  if (auto st = s_.Persist(*sb); !st.ok())
    co_return st.error().Context("network policy applied but not stored");
  NoteEvent(*sb, EventLevel::kInfo, "network_policy_changed",
            std::string("network policy set to mode ") + net::NetModeName(sb->rec.network.mode),
            {{"mode", net::NetModeName(sb->rec.network.mode)}});
  spdlog::info("sandbox={} network_policy mode={}", id, net::NetModeName(sb->rec.network.mode));
  co_return sb->rec;
}

std::vector<std::string> SandboxLifecycle::VolumeUsers(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& [id, sb] : s_.sandboxes) {
    if (!IsLive(sb->rec.status)) continue;
    for (const auto& v : sb->rec.volumes)
      if (v.name == name) {
        out.push_back(id);
        break;
      }
  }
  return out;
}

asio::awaitable<void> SandboxLifecycle::Shutdown() {
  s_.shutting_down = true;
  std::vector<std::string> ids;
  for (const auto& [id, sb] : s_.sandboxes) ids.push_back(id);
  for (const auto& id : ids) {
    auto st = co_await Delete(id, "server shutdown");
    (void)st;
  }
}

}  // namespace hutch
