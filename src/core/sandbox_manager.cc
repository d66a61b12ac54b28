#include "core/sandbox_manager.h"

#include "core/exec_session.h"
#include "core/process_ops.h"

#include <algorithm>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <spdlog/spdlog.h>

namespace hutch {

namespace {
Error NotFound(const std::string& id) { return MakeError(Code::kSandboxNotFound, "sandbox " + id + " not found"); }
}  // namespace

Status SandboxManager::Persist(const Sandbox& sb) {
  if (!store_) return Status{};
  store::SandboxRow row;
  row.id = sb.rec.id;
  row.status = StatusName(sb.rec.status);
  row.expires_at_ms = ToUnixMs(sb.rec.expires_at);
  row.record = sb.rec.ToStoreJson();
  if (sb.instance) row.instance = sb.instance->AdoptionFacts();
  auto st = store_->PutSandbox(row);
  if (!st.ok()) spdlog::error("sandbox={} persist_failed err=\"{}\"", sb.rec.id, st.error().message);
  return st;
}

std::vector<std::string> SandboxManager::driver_names() const {
  std::vector<std::string> out;
  for (const auto& [name, d] : drivers_) out.push_back(name);
  return out;
}

Result<Driver*> SandboxManager::PickDriver(const std::string& name) const {
  if (name.empty()) return driver_;
  if (auto it = drivers_.find(name); it != drivers_.end()) return it->second;
  if (auto it = unavailable_drivers_.find(name); it != unavailable_drivers_.end())
    return MakeError(Code::kNotSupported, "driver '" + name + "' is not available on this server: " + it->second);
  std::string known;
  for (const auto& [n, d] : drivers_) known += (known.empty() ? "" : ", ") + n;
  return MakeError(Code::kInvalidRequest, "unknown driver '" + name + "' (this server has: " + known + ")");
}

void SandboxManager::Forget(const std::string& id) {
  sandboxes_.erase(id);
  if (!store_) return;
  if (auto st = store_->DeleteSandbox(id); !st.ok())
    spdlog::error("sandbox={} forget_failed err=\"{}\"", id, st.error().message);
}

asio::awaitable<Result<SandboxManager::RecoverReport>> SandboxManager::Recover() {
  RecoverReport rep;
  ex_ = co_await asio::this_coro::executor;
  std::set<std::string> keep;
  if (store_) {
    auto snaps = store_->LoadSnapshots();
    if (!snaps.ok()) co_return snaps.error().Context("recover snapshots");
    for (const auto& [sid, text] : *snaps) {
      SnapshotRecord sr;
      if (SnapshotRecord::FromStoreJson(text, &sr) && sr.id == sid) snapshots_[sid] = sr;
      else spdlog::error("snapshot={} recover_unreadable_record (kept on disk)", sid);
    }
    auto rows = store_->LoadSandboxes();
    if (!rows.ok()) co_return rows.error().Context("recover");
    const auto now = std::chrono::system_clock::now();
    for (const auto& row : *rows) {
      auto sb = std::make_shared<Sandbox>();
      SandboxRecord& r = sb->rec;
      if (!SandboxRecord::FromStoreJson(row.record, &r) || r.id != row.id) {
        spdlog::error("sandbox={} recover_unreadable_record (dropped)", row.id);
        Forget(row.id);
        continue;
      }
      if (r.status == SandboxStatus::kStarting) {
        // Its create was never answered: as if it never happened.
        ++rep.forgotten;
        Forget(r.id);
        continue;
      }
      if (r.status == SandboxStatus::kRunning || r.status == SandboxStatus::kPaused) {
        if (r.expires_at <= now) {
          r.status = SandboxStatus::kStopped;
          r.reason = "expired";
          r.expires_at = now + opts_.tombstone_ttl;
          ++rep.expired;
          spdlog::info("sandbox={} ttl_expired (while hutchd was down)", r.id);
        } else {
          InstanceSpec spec;
          spec.id = r.id;
          spec.cpus = r.cpu;
          spec.memory_mb = r.memory_mb;
          spec.disk_mb = r.disk_mb;
          spec.pids_max = opts_.pids_max;
          // Records from before drivers were named are the jail's.
          auto drv = PickDriver(r.driver.empty() ? std::string("jail") : r.driver);
          Result<std::shared_ptr<Instance>> inst = MakeError(Code::kInternal, "no driver");
          if (drv.ok()) {
            inst = co_await drv.value()->Adopt(spec, row.instance, r.status == SandboxStatus::kPaused);
          } else {
            inst = drv.error();
          }
          if (inst.ok() && r.net_slot >= 0) {
            // Its processes live on in the slot's namespace; the slot's
            // rules and DNS listener must come back with them.
            Status net_ok = MakeError(Code::kUnavailable, net_unavailable_);
            if (net_) {
              auto lease = co_await net_->Adopt(r.net_slot, r.network);
              net_ok = lease.ok() ? Status{} : Status(lease.error());
            }
            if (!net_ok.ok()) {
              co_await inst.value()->Destroy();
              inst = net_ok.error().Context("network");
            }
          }
          if (inst.ok()) {
            sb->instance = inst.value();
            std::string id = r.id;
            sb->instance->on_lost = [this, id](const std::string& why) { MarkFailed(id, why); };
            keep.insert(r.id);
            ++rep.adopted;
            spdlog::info("sandbox={} adopted", r.id);

          } else {
            r.status = SandboxStatus::kFailed;
            r.reason = "lost while hutchd was down: " + inst.error().message;
            ++rep.lost;
            spdlog::warn("sandbox={} adopt_failed err=\"{}\"", r.id, inst.error().message);
          }
        }
        if (r.status != SandboxStatus::kRunning && r.status != SandboxStatus::kPaused) (void)Persist(*sb);
      }
      sandboxes_[r.id] = sb;
    }
    if (auto st = idempotency_.Attach(store_); !st.ok()) co_return st.error().Context("recover idempotency keys");
  }
  for (const auto& [name, d] : drivers_) rep.removed += d->ReconcileAtStart(keep);
  if (net_) rep.removed += co_await net_->ReconcileAtStart();
  // Layer dirs without a row were being captured when hutchd died.
  if (!opts_.snapshots_dir.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(opts_.snapshots_dir, ec)) {
      if (snapshots_.count(e.path().filename().string())) continue;
      std::error_code rec;
      std::filesystem::remove_all(e.path(), rec);
    }
  }
  CollectSnapshots();
  co_return rep;
}

asio::awaitable<Result<SandboxRecord>> SandboxManager::Create(CreateOptions o) {
  if (shutting_down_) co_return MakeError(Code::kUnavailable, "server is shutting down");
  int64_t ttl = o.ttl_seconds.value_or(opts_.default_ttl_seconds);
  if (ttl <= 0) co_return MakeError(Code::kInvalidRequest, "ttl_seconds must be positive");
  if (ttl > opts_.max_ttl_seconds)
    co_return MakeError(Code::kInvalidRequest, "ttl_seconds exceeds the maximum of " + std::to_string(opts_.max_ttl_seconds));
  double cpu = o.cpu.value_or(opts_.default_cpu);
  if (!(cpu > 0 && cpu <= 64)) co_return MakeError(Code::kInvalidRequest, "cpu must be in (0, 64]");
  int64_t mem = o.memory_mb.value_or(opts_.default_memory_mb);
  if (mem < 16 || mem > opts_.max_memory_mb)
    co_return MakeError(Code::kInvalidRequest, "memory_mb must be in [16, " + std::to_string(opts_.max_memory_mb) + "]");
  int64_t disk = o.disk_mb.value_or(opts_.default_disk_mb);
  if (disk < 16 || disk > opts_.max_disk_mb)
    co_return MakeError(Code::kInvalidRequest, "disk_mb must be in [16, " + std::to_string(opts_.max_disk_mb) + "]");
  std::vector<std::string> layers = std::move(o.layers);
  std::string rootfs = o.rootfs;
  const bool from_layers = !o.snapshot.empty() || !layers.empty();
  if (!o.snapshot.empty()) {
    auto snap = snapshots_.find(o.snapshot);
    if (snap == snapshots_.end() || snap->second.deleted)
      co_return MakeError(Code::kSnapshotNotFound, "snapshot " + o.snapshot + " not found");
    o.template_name = snap->second.template_name;
    layers = snap->second.layers;
    rootfs = snap->second.rootfs;
  }
  auto drv = PickDriver(o.driver);
  if (!drv.ok()) co_return drv.error();
  auto tpl = templates_->Resolve(o.template_name);
  if (!tpl.ok()) co_return tpl.error();
  // A snapshot's stack already lists the template's layers; a template's
  // own create stands on the template's stack.
  if (!from_layers) layers = tpl->layers;
  if (rootfs.empty()) rootfs = tpl->rootfs;
  if (auto st = CheckVolumeMounts(o.volumes); !st.ok()) co_return st.error();
  if (o.auto_pause_seconds < 0) co_return MakeError(Code::kInvalidRequest, "auto_pause_seconds must be >= 0");
  // Parents before children: "/a" sorts before "/a/b".
  std::sort(o.volumes.begin(), o.volumes.end(),
            [](const VolumeMountRequest& a, const VolumeMountRequest& b) { return a.path < b.path; });
  std::vector<InstanceMount> mounts;
  for (const auto& v : o.volumes) {
    if (!volumes_) co_return MakeError(Code::kNotSupported, "this server has no volumes");
    auto dir = volumes_->DataDir(v.name);
    if (!dir.ok()) co_return dir.error();
    mounts.push_back({*dir, v.path, v.read_only});
  }
  if (static_cast<int>(running_count()) + starting_ >= opts_.max_sandboxes)
    co_return MakeError(Code::kCapacityExhausted,
                        "host is at its limit of " + std::to_string(opts_.max_sandboxes) + " sandboxes");
  if (opts_.max_memory_committed_mb > 0 && committed_memory_mb() + mem > opts_.max_memory_committed_mb)
    co_return MakeError(Code::kCapacityExhausted,
                        "host has no room for " + std::to_string(mem) + " MB more (" +
                            std::to_string(committed_memory_mb()) + " of " +
                            std::to_string(opts_.max_memory_committed_mb) + " MB committed)");

  if (o.network.mode != net::NetMode::kNone && !net_)
    co_return MakeError(Code::kNotSupported, "network mode " + std::string(net::NetModeName(o.network.mode)) +
                                                 " is not available on this server: " + net_unavailable_);

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
  r.network = o.network;
  sandboxes_[r.id] = sb;

  InstanceSpec spec;
  spec.id = r.id;
  spec.rootfs = rootfs;
  spec.layers = layers;
  spec.mounts = std::move(mounts);
  spec.cpus = cpu;
  spec.memory_mb = mem;
  spec.disk_mb = disk;
  spec.pids_max = opts_.pids_max;
  spec.machine = o.machine;
  ++starting_;
  if (r.network.mode != net::NetMode::kNone) {
    auto lease = co_await net_->Acquire(r.network);
    if (!lease.ok()) {
      --starting_;
      sandboxes_.erase(r.id);
      spdlog::error("sandbox={} create_failed err=\"{}\"", r.id, lease.error().message);
      co_return lease.error().Context("create sandbox: network");
    }
    r.net_slot = lease->slot;
    spec.netns_path = lease->netns_path;
    spec.resolv_conf = lease->resolv_conf;
    spec.gateway = lease->gateway;
  }
  auto inst = co_await drv.value()->Create(spec);
  --starting_;
  if (!inst.ok()) {
    sandboxes_.erase(r.id);
    if (r.net_slot >= 0) co_await net_->Release(r.net_slot);
    spdlog::error("sandbox={} create_failed err=\"{}\"", r.id, inst.error().message);
    co_return inst.error().Context("create sandbox");
  }
  if (sb->deleting || r.status != SandboxStatus::kStarting) {
    // Deleted while starting: tear down what we just made.
    co_await Teardown(inst.value(), r.net_slot);
    co_return MakeError(Code::kSandboxNotRunning, "sandbox " + r.id + " was deleted while starting");
  }
  sb->instance = inst.value();
  r.status = SandboxStatus::kRunning;
  r.boot = sb->instance->boot();
  // A fork child of a running machine has its source's processes already.
  const bool continued = o.machine != nullptr;
  Status started;
  if (!continued) started = co_await StartTemplateProcess(sb, *tpl);
  if (const Status& st = started; !st.ok()) {
    r.status = SandboxStatus::kStopped;
    sandboxes_.erase(r.id);
    if (auto i = std::move(sb->instance)) co_await i->Destroy();
    co_return st.error().Context("create sandbox from template '" + tpl->name + "'");
  }
  // Acknowledged state must be durable before the client hears of it.
  if (auto st = Persist(*sb); !st.ok()) {
    r.status = SandboxStatus::kStopped;
    sandboxes_.erase(r.id);
    co_await Teardown(std::move(sb->instance), r.net_slot);
    co_return st.error().Context("create sandbox");
  }
  std::string id = r.id;
  sb->instance->on_lost = [this, id](const std::string& why) { MarkFailed(id, why); };
  spdlog::info("sandbox={} created template={} cpu={} memory_mb={} disk_mb={} network={}", r.id, r.template_name, cpu,
               mem, disk, net::NetModeName(r.network.mode));
  co_return r;
}

asio::awaitable<Status> SandboxManager::StartTemplateProcess(std::shared_ptr<Sandbox> sb, const TemplateInfo& tpl) {
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(tpl.ready_timeout_seconds);
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
  co_return MakeError(Code::kUnavailable, "ready check '" + tpl.ready + "' did not succeed within " +
                                              std::to_string(tpl.ready_timeout_seconds) + " s" +
                                              (last.empty() ? "" : ": " + last));
}

asio::awaitable<Result<SandboxRecord>> SandboxManager::CreateIdempotent(CreateOptions o, const std::string& key,
                                                                        const std::string& canonical_body,
                                                                        bool* replayed) {
  *replayed = false;
  const std::string scope = o.owner_key;
  asio::steady_timer wait(co_await asio::this_coro::executor);
  for (int i = 0; i < 3000; ++i) {
    auto l = idempotency_.Claim(scope, key, canonical_body);
    switch (l.state) {
      case IdempotencyCache::State::kMismatch:
        co_return MakeError(Code::kConflict, "Idempotency-Key '" + key + "' was already used with a different body");
      case IdempotencyCache::State::kDone: {
        auto rec = Get(l.sandbox_id);
        if (!rec.ok())
          co_return MakeError(Code::kConflict, "the sandbox created under Idempotency-Key '" + key + "' is gone");
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
          idempotency_.Abandon(scope, key);
        } else if (auto st = idempotency_.Complete(scope, key, rec->id); !st.ok()) {
          // The sandbox exists and is answered; only a retry after a
          // restart would miss it and create another.
          spdlog::error("sandbox={} idempotency_persist_failed err=\"{}\"", rec->id, st.error().message);
        }
        co_return rec;
      }
    }
  }
  co_return MakeError(Code::kUnavailable, "the first create with Idempotency-Key '" + key + "' did not finish");
}

void SandboxManager::MarkFailed(const std::string& id, const std::string& reason) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return;
  auto& sb = it->second;
  if (sb->rec.status != SandboxStatus::kRunning && sb->rec.status != SandboxStatus::kPaused) return;
  spdlog::warn("sandbox={} failed reason=\"{}\"", id, reason);
  sb->rec.status = SandboxStatus::kFailed;
  sb->rec.reason = reason;
  auto inst = std::move(sb->instance);
  const int slot = std::exchange(sb->rec.net_slot, -1);
  (void)Persist(*sb);
  // Free the kernel resources now; the record stays until deleted.
  if (inst || slot >= 0) {
    asio::co_spawn(ex_, [this, inst, slot]() -> asio::awaitable<void> { co_await Teardown(inst, slot); },
                   asio::detached);
  }
}

Result<std::shared_ptr<Sandbox>> SandboxManager::GetRunning(const std::string& id) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return NotFound(id);
  auto& sb = it->second;
  if (sb->rec.status == SandboxStatus::kPaused && sb->rec.auto_paused) {
    if (auto r = Resume(id); !r.ok()) return r.error().Context("resume idle sandbox");
  }
  if (sb->rec.status == SandboxStatus::kPaused)
    return MakeError(Code::kConflict, "sandbox " + id + " is paused");
  if (sb->rec.status != SandboxStatus::kRunning || !sb->instance)
    return MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is " + StatusName(sb->rec.status) +
                                                   (sb->rec.reason.empty() ? "" : " (" + sb->rec.reason + ")"));
  sb->last_active = std::chrono::steady_clock::now();
  return sb;
}

Result<SandboxRecord> SandboxManager::Get(const std::string& id) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return NotFound(id);
  return it->second->rec;
}

ListPage SandboxManager::List(const ListFilter& f) {
  ListPage page;
  size_t limit = std::clamp<size_t>(f.limit, 1, 1000);
  auto it = f.cursor.empty() ? sandboxes_.begin() : sandboxes_.upper_bound(f.cursor);
  for (; it != sandboxes_.end(); ++it) {
    const SandboxRecord& r = it->second->rec;
    if (f.status && r.status != *f.status) continue;
    if (!f.any_status.empty() && std::find(f.any_status.begin(), f.any_status.end(), r.status) == f.any_status.end())
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

asio::awaitable<Status> SandboxManager::Delete(const std::string& id, const std::string& reason) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) co_return NotFound(id);
  auto sb = it->second;
  if (sb->rec.status == SandboxStatus::kStopped) co_return Status{};
  sb->deleting = true;
  bool was_starting = sb->rec.status == SandboxStatus::kStarting;
  sb->rec.status = SandboxStatus::kStopped;
  if (sb->rec.reason.empty() || reason != "deleted") sb->rec.reason = reason;
  sb->rec.expires_at = std::chrono::system_clock::now() + opts_.tombstone_ttl;
  auto inst = std::move(sb->instance);
  // A starting sandbox's create frees its own slot when it sees `deleting`.
  const int slot = was_starting ? -1 : std::exchange(sb->rec.net_slot, -1);
  // Record the deletion first: if hutchd dies while destroying, the next
  // run must not adopt this sandbox (it removes what is left instead).
  (void)Persist(*sb);
  if (!was_starting) co_await Teardown(std::move(inst), slot);
  CollectSnapshots();
  spdlog::info("sandbox={} stopped reason=\"{}\"", id, reason);
  co_return Status{};
}

Result<SandboxRecord> SandboxManager::SetTtl(const std::string& id, int64_t ttl_seconds) {
  if (ttl_seconds <= 0) return MakeError(Code::kInvalidRequest, "ttl_seconds must be positive");
  if (ttl_seconds > opts_.max_ttl_seconds)
    return MakeError(Code::kInvalidRequest, "ttl_seconds exceeds the maximum of " + std::to_string(opts_.max_ttl_seconds));
  auto it = sandboxes_.find(id);
  if (it != sandboxes_.end() && it->second->rec.status == SandboxStatus::kPaused) {
    // A paused sandbox may be renewed too (its TTL keeps counting).
  } else if (auto run = GetRunning(id); !run.ok()) {
    return run.error();
  }
  auto sb = &it->second;
  SysTime before = (*sb)->rec.expires_at;
  (*sb)->rec.expires_at = std::chrono::system_clock::now() + std::chrono::seconds(ttl_seconds);
  if (auto st = Persist(**sb); !st.ok()) {
    (*sb)->rec.expires_at = before;
    return st.error().Context("renew ttl");
  }
  return (*sb)->rec;
}

Result<SandboxRecord> SandboxManager::PatchMetadata(const std::string& id,
                                                    const std::map<std::string, std::optional<std::string>>& patch) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return MakeError(Code::kSandboxNotFound, "sandbox " + id + " not found");
  auto& rec = it->second->rec;
  if (rec.status == SandboxStatus::kStopped || rec.status == SandboxStatus::kFailed)
    return MakeError(Code::kSandboxNotFound, "sandbox " + id + " is " + StatusName(rec.status));
  auto before = rec.metadata;
  for (const auto& [k, v] : patch) {
    if (v) rec.metadata[k] = *v;
    else rec.metadata.erase(k);
  }
  if (auto st = Persist(*it->second); !st.ok()) {
    rec.metadata = std::move(before);
    return st.error().Context("patch metadata");
  }
  return rec;
}

int64_t SandboxManager::committed_memory_mb() const {
  int64_t mb = 0;
  for (const auto& [id, sb] : sandboxes_) {
    auto st = sb->rec.status;
    if (st == SandboxStatus::kStarting || st == SandboxStatus::kRunning || st == SandboxStatus::kPaused)
      mb += sb->rec.memory_mb;
  }
  return mb;
}

Result<SandboxRecord> SandboxManager::Pause(const std::string& id, bool idle) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return NotFound(id);
  auto& sb = it->second;
  if (sb->rec.status == SandboxStatus::kPaused) {
    // Paused by the API now, whatever paused it: a request no longer wakes it.
    if (!idle && sb->rec.auto_paused) {
      sb->rec.auto_paused = false;
      if (auto st = Persist(*sb); !st.ok()) {
        sb->rec.auto_paused = true;
        return st.error().Context("pause");
      }
    }
    return sb->rec;
  }
  if (sb->rec.status != SandboxStatus::kRunning || !sb->instance)
    return MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is " + StatusName(sb->rec.status));
  if (auto st = sb->instance->Pause(); !st.ok()) return st.error();
  sb->rec.status = SandboxStatus::kPaused;
  sb->rec.auto_paused = idle;
  if (auto st = Persist(*sb); !st.ok()) {
    (void)sb->instance->Resume();
    sb->rec.status = SandboxStatus::kRunning;
    sb->rec.auto_paused = false;
    return st.error().Context("pause");
  }
  spdlog::info("sandbox={} paused", id);
  return sb->rec;
}

Result<SandboxRecord> SandboxManager::Resume(const std::string& id) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return NotFound(id);
  auto& sb = it->second;
  if (sb->rec.status == SandboxStatus::kRunning) return sb->rec;
  if (sb->rec.status != SandboxStatus::kPaused || !sb->instance)
    return MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is " + StatusName(sb->rec.status));
  if (auto st = sb->instance->Resume(); !st.ok()) return st.error();
  sb->rec.status = SandboxStatus::kRunning;
  const bool was_idle = sb->rec.auto_paused;
  sb->rec.auto_paused = false;
  sb->last_active = std::chrono::steady_clock::now();
  if (auto st = Persist(*sb); !st.ok()) {
    (void)sb->instance->Pause();
    sb->rec.status = SandboxStatus::kPaused;
    sb->rec.auto_paused = was_idle;
    return st.error().Context("resume");
  }
  spdlog::info("sandbox={} resumed", id);
  return sb->rec;
}

Status SandboxManager::PersistSnapshot(const SnapshotRecord& snap) {
  if (!store_) return Status{};
  return store_->PutSnapshot(snap.id, snap.ToStoreJson());
}

asio::awaitable<Result<SnapshotRecord>> SandboxManager::TakeSnapshot(Sandbox& sb, bool internal) {
  if (opts_.snapshots_dir.empty()) co_return MakeError(Code::kNotSupported, "snapshots are not configured");
  SnapshotRecord snap;
  snap.id = "snap_" + RandomHex(8);
  snap.sandbox_id = sb.rec.id;
  snap.template_name = sb.rec.template_name;
  snap.internal = internal;
  snap.deleted = internal;  // a fork's layer goes when its sandboxes go
  snap.created_at = std::chrono::system_clock::now();
  const std::string dir = opts_.snapshots_dir + "/" + snap.id;
  const std::string layer = dir + "/layer";
  std::error_code ec;
  std::filesystem::create_directories(layer, ec);
  if (ec) co_return MakeError(Code::kInternal, "create " + layer + ": " + ec.message());
  // Keep the sandbox alive across the copy even if it is deleted meanwhile.
  auto inst = sb.instance;
  auto st = co_await inst->CaptureLayer(layer);
  if (!st.ok()) {
    std::filesystem::remove_all(dir, ec);
    co_return st.error().Context("snapshot " + sb.rec.id);
  }
  for (auto it = std::filesystem::recursive_directory_iterator(layer, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) snap.size_bytes += it->file_size(ec);
  }
  snap.layers.push_back(layer);
  for (const auto& l : sb.rec.layers) snap.layers.push_back(l);
  snap.rootfs = sb.rec.rootfs;
  if (auto ps = PersistSnapshot(snap); !ps.ok()) {
    std::filesystem::remove_all(dir, ec);
    co_return ps.error().Context("snapshot");
  }
  snapshots_[snap.id] = snap;
  spdlog::info("sandbox={} snapshot={} size_bytes={} internal={}", sb.rec.id, snap.id, snap.size_bytes, internal);
  co_return snap;
}

asio::awaitable<Result<SnapshotRecord>> SandboxManager::Snapshot(const std::string& id) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) co_return NotFound(id);
  auto sb = it->second;
  if ((sb->rec.status != SandboxStatus::kRunning && sb->rec.status != SandboxStatus::kPaused) || !sb->instance)
    co_return MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is " + StatusName(sb->rec.status));
  co_return co_await TakeSnapshot(*sb, false);
}

std::vector<SnapshotRecord> SandboxManager::ListSnapshots() const {
  std::vector<SnapshotRecord> out;
  for (const auto& [id, s] : snapshots_)
    if (!s.internal && !s.deleted) out.push_back(s);
  return out;
}

Result<SnapshotRecord> SandboxManager::GetSnapshot(const std::string& id) const {
  auto it = snapshots_.find(id);
  if (it == snapshots_.end() || it->second.internal || it->second.deleted)
    return MakeError(Code::kSnapshotNotFound, "snapshot " + id + " not found");
  return it->second;
}

Status SandboxManager::DeleteSnapshot(const std::string& id) {
  auto it = snapshots_.find(id);
  if (it == snapshots_.end() || it->second.internal || it->second.deleted)
    return MakeError(Code::kSnapshotNotFound, "snapshot " + id + " not found");
  it->second.deleted = true;
  if (auto st = PersistSnapshot(it->second); !st.ok()) {
    it->second.deleted = false;
    return st.error().Context("delete snapshot");
  }
  CollectSnapshots();
  return Status{};
}

Status SandboxManager::DeleteTemplate(const std::string& name) {
  if (name == "base") return MakeError(Code::kConflict, "'base' is hutchd's own template and cannot be removed");
  if (builder_ && builder_->building(name))
    return MakeError(Code::kConflict, "template '" + name + "' is being built");
  if (auto st = templates_->Remove(name); !st.ok()) return st;
  templates_->Collect(UsedLowerDirs());
  return Status{};
}

std::set<std::string> SandboxManager::UsedLowerDirs() const {
  std::set<std::string> used;
  for (const auto& [id, sb] : sandboxes_) {
    auto st = sb->rec.status;
    if (st == SandboxStatus::kStarting || st == SandboxStatus::kRunning || st == SandboxStatus::kPaused ||
        sb->instance) {
      used.insert(sb->rec.layers.begin(), sb->rec.layers.end());
      used.insert(sb->rec.rootfs);
    }
  }
  for (const auto& [id, s] : snapshots_) {
    if (s.deleted && !used.count(s.layers.front())) continue;
    used.insert(s.layers.begin(), s.layers.end());
    used.insert(s.rootfs);
  }
  return used;
}

void SandboxManager::CollectSnapshots() {
  // A layer is in use while a live sandbox or a kept snapshot has it in
  // its stack (stacks list every layer down to the template).
  std::set<std::string> used;
  for (const auto& [id, sb] : sandboxes_) {
    auto st = sb->rec.status;
    if (st == SandboxStatus::kStarting || st == SandboxStatus::kRunning || st == SandboxStatus::kPaused || sb->instance)
      used.insert(sb->rec.layers.begin(), sb->rec.layers.end());
  }
  for (const auto& [id, s] : snapshots_)
    if (!s.deleted) used.insert(s.layers.begin(), s.layers.end());
  for (auto it = snapshots_.begin(); it != snapshots_.end();) {
    if (!it->second.deleted || used.count(it->second.layers.front())) {
      ++it;
      continue;
    }
    std::error_code ec;
    std::filesystem::remove_all(opts_.snapshots_dir + "/" + it->first, ec);
    if (ec) {
      spdlog::error("snapshot={} remove_failed err=\"{}\"", it->first, ec.message());
      ++it;
      continue;
    }
    if (store_) (void)store_->DeleteSnapshot(it->first);
    spdlog::info("snapshot={} removed", it->first);
    it = snapshots_.erase(it);
  }
}

asio::awaitable<Result<std::vector<SandboxRecord>>> SandboxManager::Fork(const std::string& id, int count,
                                                                          const std::string& owner_key) {
  if (count < 1 || count > opts_.max_fork)
    co_return MakeError(Code::kInvalidRequest, "count must be in [1, " + std::to_string(opts_.max_fork) + "]");
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) co_return NotFound(id);
  auto parent = it->second;
  if ((parent->rec.status != SandboxStatus::kRunning && parent->rec.status != SandboxStatus::kPaused) ||
      !parent->instance)
    co_return MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is " + StatusName(parent->rec.status));
  if (static_cast<int>(running_count()) + starting_ + count > opts_.max_sandboxes)
    co_return MakeError(Code::kCapacityExhausted, "host has no room for " + std::to_string(count) + " more sandboxes");
  // A driver that can copy the whole running machine (vm) forks it with
  // its memory and processes; otherwise the children start from a file
  // snapshot of the parent's writable layer.
  auto source = parent->instance;  // alive across the capture even if deleted meanwhile
  auto machine = co_await source->CaptureMachine();
  if (!machine.ok() && machine.error().code != Code::kNotSupported) co_return machine.error().Context("fork");
  Result<SnapshotRecord> snap = MakeError(Code::kNotSupported, "no snapshot");
  if (!machine.ok()) {
    snap = co_await TakeSnapshot(*parent, true);
    if (!snap.ok()) co_return snap.error().Context("fork");
  }
  std::vector<SandboxRecord> out;
  auto remaining = std::chrono::duration_cast<std::chrono::seconds>(parent->rec.expires_at -
                                                                    std::chrono::system_clock::now());
  for (int i = 0; i < count; ++i) {
    CreateOptions o;
    o.template_name = parent->rec.template_name;
    o.driver = parent->rec.driver;
    o.ttl_seconds = std::max<int64_t>(remaining.count(), 1);
    o.env = parent->rec.env;
    o.metadata = parent->rec.metadata;
    o.cpu = parent->rec.cpu;
    o.memory_mb = parent->rec.memory_mb;
    o.disk_mb = parent->rec.disk_mb;
    o.owner_key = owner_key;
    o.metadata["hutch.fork_of"] = id;
    o.auto_pause_seconds = parent->rec.auto_pause_seconds;
    if (machine.ok()) {
      o.machine = machine.value();
      o.layers = parent->rec.layers;  // the same disks as the source
      o.rootfs = parent->rec.rootfs;
    } else {
      o.layers = snap->layers;  // the internal snapshot, not nameable by the API
      o.rootfs = snap->rootfs;
    }
    o.volumes = parent->rec.volumes;  // shared, as named volumes are
    o.network = parent->rec.network;  // each child gets its own subnet
    auto rec = co_await Create(std::move(o));
    if (!rec.ok()) {
      // All or nothing: a fork that made some children deletes them.
      for (const auto& r : out) (void)co_await Delete(r.id, "fork failed");
      CollectSnapshots();
      co_return rec.error().Context("fork child " + std::to_string(i + 1) + " of " + std::to_string(count));
    }
    out.push_back(*rec);
  }
  CollectSnapshots();
  co_return out;
}

asio::awaitable<void> SandboxManager::Teardown(std::shared_ptr<Instance> inst, int net_slot) {
  if (inst) co_await inst->Destroy();
  // After the processes: nothing is left to use the namespace.
  if (net_slot >= 0 && net_) co_await net_->Release(net_slot);
}

asio::awaitable<Result<SandboxRecord>> SandboxManager::SetNetworkPolicy(const std::string& id, net::NetworkPolicy p) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) co_return NotFound(id);
  auto sb = it->second;
  if ((sb->rec.status != SandboxStatus::kRunning && sb->rec.status != SandboxStatus::kPaused) || !sb->instance)
    co_return MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is " + StatusName(sb->rec.status));
  if (sb->rec.net_slot < 0) {
    if (p.mode == net::NetMode::kNone) co_return sb->rec;
    co_return MakeError(Code::kNotSupported,
                        "sandbox " + id +
                            " was created with network mode none and has no network interface; create it with "
                            "mode all or policy to change its policy later (policy with default deny allows nothing)");
  }
  if (auto st = co_await net_->SetPolicy(sb->rec.net_slot, p); !st.ok()) co_return st.error();
  sb->rec.network = std::move(p);
  if (auto st = Persist(*sb); !st.ok()) co_return st.error().Context("network policy applied but not stored");
  spdlog::info("sandbox={} network_policy mode={}", id, net::NetModeName(sb->rec.network.mode));
  co_return sb->rec;
}

std::vector<std::string> SandboxManager::VolumeUsers(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& [id, sb] : sandboxes_) {
    if (sb->rec.status != SandboxStatus::kStarting && sb->rec.status != SandboxStatus::kRunning &&
        sb->rec.status != SandboxStatus::kPaused)
      continue;
    for (const auto& v : sb->rec.volumes)
      if (v.name == name) {
        out.push_back(id);
        break;
      }
  }
  return out;
}

size_t SandboxManager::running_count() const {
  size_t n = 0;
  for (const auto& [id, sb] : sandboxes_)
    if (sb->rec.status == SandboxStatus::kRunning || sb->rec.status == SandboxStatus::kPaused) ++n;
  return n;
}

void SandboxManager::StartReaper(asio::any_io_executor ex) {
  ex_ = ex;
  asio::co_spawn(ex, [this]() -> asio::awaitable<void> { co_await ReapLoop(); }, asio::detached);
}

asio::awaitable<void> SandboxManager::ReapLoop() {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (!shutting_down_) {
    t.expires_after(std::chrono::milliseconds(250));
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    auto now = std::chrono::system_clock::now();
    std::vector<std::string> expired, forget;
    for (const auto& [id, sb] : sandboxes_) {
      if (sb->rec.expires_at > now) continue;
      if (sb->rec.status == SandboxStatus::kStopped) forget.push_back(id);
      else if (sb->rec.status != SandboxStatus::kStarting) expired.push_back(id);
    }
    for (const auto& id : forget) Forget(id);
    idempotency_.Prune(now);
    PauseIdle();
    for (const auto& id : expired) {
      spdlog::info("sandbox={} ttl_expired", id);
      auto st = co_await Delete(id, "expired");
      (void)st;
    }
  }
}

void SandboxManager::PauseIdle() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> idle;
  for (const auto& [id, sb] : sandboxes_) {
    if (sb->rec.auto_pause_seconds <= 0 || sb->rec.status != SandboxStatus::kRunning || !sb->instance) continue;
    // An open stream (a running exec, a transfer, an attached terminal)
    // is use, however long ago its request came in.
    auto agent = sb->instance->agent();
    if (agent && agent->open_streams() > 0) {
      sb->last_active = now;
      continue;
    }
    if (now - sb->last_active >= std::chrono::seconds(sb->rec.auto_pause_seconds)) idle.push_back(id);
  }
  for (const auto& id : idle) {
    if (auto r = Pause(id, true); !r.ok()) {
      spdlog::error("sandbox={} idle_pause_failed err=\"{}\"", id, r.error().message);
      continue;
    }
    spdlog::info("sandbox={} idle_paused", id);
  }
}

asio::awaitable<void> SandboxManager::Shutdown() {
  shutting_down_ = true;
  std::vector<std::string> ids;
  for (const auto& [id, sb] : sandboxes_) ids.push_back(id);
  for (const auto& id : ids) {
    auto st = co_await Delete(id, "server shutdown");
    (void)st;
  }
}

}  // namespace hutch
