#include "core/snapshot_book.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <filesystem>

#include "core/sandbox_events.h"
#include "core/sandbox_lifecycle.h"

namespace hutch {

Status SnapshotBook::Load() {
  if (!s_.store) return Status{};
  auto snaps = s_.store->LoadSnapshots();
  if (!snaps.ok()) return snaps.error().Context("recover snapshots");
  for (const auto& [sid, text] : *snaps) {
    SnapshotRecord sr;
    if (SnapshotRecord::FromStoreJson(text, &sr) && sr.id == sid) s_.snapshots[sid] = sr;
    else spdlog::error("snapshot={} recover_unreadable_record (kept on disk)", sid);
  }
  return Status{};
}

void SnapshotBook::CleanAtStart() {
  // Layer dirs without a row were being captured when hutchd died.
  if (!s_.opts.snapshots_dir.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(s_.opts.snapshots_dir, ec)) {
      if (s_.snapshots.count(e.path().filename().string())) continue;
      std::error_code rec;
      std::filesystem::remove_all(e.path(), rec);
    }
  }
  Collect();
}

asio::awaitable<Result<SnapshotRecord>> SnapshotBook::Take(Sandbox& sb, bool internal) {
  if (s_.opts.snapshots_dir.empty())
    co_return MakeError(Code::kNotSupported, "snapshots are not configured");
  SnapshotRecord snap;
  snap.id = "snap_" + RandomHex(8);
  snap.sandbox_id = sb.rec.id;
  snap.owner = sb.rec.owner_key;
  snap.template_name = sb.rec.template_name;
  snap.internal = internal;
  snap.deleted = internal;  // a fork's layer goes when its sandboxes go
  snap.created_at = std::chrono::system_clock::now();
  const std::string dir = s_.opts.snapshots_dir + "/" + snap.id;
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
  if (auto ps = s_.PersistSnapshot(snap); !ps.ok()) {
    std::filesystem::remove_all(dir, ec);
    co_return ps.error().Context("snapshot");
  }
  s_.snapshots[snap.id] = snap;
  NoteEvent(sb, EventLevel::kInfo, internal ? "forked" : "snapshot_taken",
            internal
                ? "its files copied for a fork"
                : "snapshot " + snap.id + " taken (" + std::to_string(snap.size_bytes) + " bytes)",
            {{"snapshot", snap.id}, {"size_bytes", snap.size_bytes}});
  spdlog::info("sandbox={} snapshot={} size_bytes={} internal={}", sb.rec.id, snap.id,
               snap.size_bytes, internal);
  co_return snap;
}

Status SnapshotBook::CheckQuota(const std::string& owner) const {
  int count = 0;
  uint64_t bytes = 0;
  for (const auto& [id, s] : s_.snapshots) {
    if (s.internal || s.deleted || s.owner != owner) continue;
    ++count;
    bytes += s.size_bytes;
  }
  if (auto it = taking_.find(owner); it != taking_.end()) count += it->second;
  const TenantQuotas& q = s_.opts.quotas;
  if (auto st = CheckCountQuota("snapshots", count, 1, q.max_snapshots, "--tenant-max-snapshots");
      !st.ok())
    return st;
  // A snapshot's size is known once taken: the next one is refused at or over.
  return CheckBytesQuota("snapshots", bytes, 0, q.max_snapshot_gb, "--tenant-max-snapshot-gb");
}

asio::awaitable<Result<SnapshotRecord>> SnapshotBook::Snapshot(const std::string& id, bool tenant) {
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) co_return SandboxNotFound(id);
  auto sb = it->second;
  if ((sb->rec.status != SandboxStatus::kRunning && sb->rec.status != SandboxStatus::kPaused) ||
      !sb->instance)
    co_return MakeError(Code::kSandboxNotRunning,
                        "sandbox " + id + " is " + StatusName(sb->rec.status));
  if (!tenant) co_return co_await Take(*sb, false);
  const std::string owner = sb->rec.owner_key;
  if (auto st = CheckQuota(owner); !st.ok()) co_return st.error();
  // Reserved before the copy (no suspension since the check) and held
  // across it, so concurrent takes of one owner count each other; given
  // back however the take ends.
  struct Reservation {
    std::map<std::string, int>& taking;
    const std::string& owner;
    explicit Reservation(std::map<std::string, int>& t, const std::string& o)
        : taking(t), owner(o) {
      ++taking[owner];
    }
    ~Reservation() {
      if (--taking[owner] == 0) taking.erase(owner);
    }
  } held(taking_, owner);
  co_return co_await Take(*sb, false);
}

std::vector<SnapshotRecord> SnapshotBook::List() const {
  std::vector<SnapshotRecord> out;
  for (const auto& [id, s] : s_.snapshots)
    if (!s.internal && !s.deleted) out.push_back(s);
  return out;
}

Result<SnapshotRecord> SnapshotBook::Get(const std::string& id) const {
  auto it = s_.snapshots.find(id);
  if (it == s_.snapshots.end() || it->second.internal || it->second.deleted)
    return MakeError(Code::kSnapshotNotFound, "snapshot " + id + " not found");
  return it->second;
}

Result<SnapshotRecord> SnapshotBook::Name(const std::string& id, const std::string& name) {
  auto it = s_.snapshots.find(id);
  if (it == s_.snapshots.end() || it->second.internal || it->second.deleted)
    return MakeError(Code::kSnapshotNotFound, "snapshot " + id + " not found");
  for (auto& [other_id, other] : s_.snapshots) {
    if (other_id == id || other.owner != it->second.owner || other.name != name) continue;
    other.name.clear();
    if (auto st = s_.PersistSnapshot(other); !st.ok())
      return st.error().Context("move snapshot name '" + name + "'");
  }
  it->second.name = name;
  if (auto st = s_.PersistSnapshot(it->second); !st.ok())
    return st.error().Context("name snapshot " + id);
  return it->second;
}

Result<SnapshotRecord> SnapshotBook::Named(const std::string& owner,
                                           const std::string& name) const {
  for (const auto& [id, s] : s_.snapshots)
    if (!s.internal && !s.deleted && s.owner == owner && s.name == name) return s;
  return MakeError(Code::kSnapshotNotFound, "snapshot '" + name + "' not found");
}

Status SnapshotBook::Delete(const std::string& id) {
  auto it = s_.snapshots.find(id);
  if (it == s_.snapshots.end() || it->second.internal || it->second.deleted)
    return MakeError(Code::kSnapshotNotFound, "snapshot " + id + " not found");
  it->second.deleted = true;
  if (auto st = s_.PersistSnapshot(it->second); !st.ok()) {
    it->second.deleted = false;
    return st.error().Context("delete snapshot");
  }
  Collect();
  return Status{};
}

std::set<std::string> SnapshotBook::UsedLowerDirs() const {
  std::set<std::string> used;
  for (const auto& [id, sb] : s_.sandboxes) {
    if (IsLive(sb->rec.status) || sb->instance) {
      used.insert(sb->rec.layers.begin(), sb->rec.layers.end());
      used.insert(sb->rec.rootfs);
    }
  }
  for (const auto& [id, sb] : s_.warm) {
    used.insert(sb->rec.layers.begin(), sb->rec.layers.end());
    used.insert(sb->rec.rootfs);
  }
  for (const auto& [id, s] : s_.snapshots) {
    if (s.deleted && !used.count(s.layers.front())) continue;
    used.insert(s.layers.begin(), s.layers.end());
    used.insert(s.rootfs);
  }
  return used;
}

void SnapshotBook::Collect() {
  // A layer is in use while a live sandbox or a kept snapshot has it in
  // its stack (stacks list every layer down to the template).
  std::set<std::string> used;
  for (const auto& [id, sb] : s_.sandboxes)
    if (IsLive(sb->rec.status) || sb->instance)
      used.insert(sb->rec.layers.begin(), sb->rec.layers.end());
  for (const auto& [id, s] : s_.snapshots)
    if (!s.deleted) used.insert(s.layers.begin(), s.layers.end());
  for (auto it = s_.snapshots.begin(); it != s_.snapshots.end();) {
    if (!it->second.deleted || used.count(it->second.layers.front())) {
      ++it;
      continue;
    }
    std::error_code ec;
    std::filesystem::remove_all(s_.opts.snapshots_dir + "/" + it->first, ec);
    if (ec) {
      spdlog::error("snapshot={} remove_failed err=\"{}\"", it->first, ec.message());
      ++it;
      continue;
    }
    if (s_.store) (void)s_.store->DeleteSnapshot(it->first);
    spdlog::info("snapshot={} removed", it->first);
    it = s_.snapshots.erase(it);
  }
}

asio::awaitable<Result<std::vector<SandboxRecord>>> SnapshotBook::Fork(const std::string& id,
                                                                       int count,
                                                                       const std::string& owner_key,
                                                                       bool tenant) {
  if (count < 1 || count > s_.opts.max_fork)
    co_return MakeError(Code::kInvalidRequest,
                        "count must be in [1, " + std::to_string(s_.opts.max_fork) + "]");
  auto it = s_.sandboxes.find(id);
  if (it == s_.sandboxes.end()) co_return SandboxNotFound(id);
  auto parent = it->second;
  if ((parent->rec.status != SandboxStatus::kRunning &&
       parent->rec.status != SandboxStatus::kPaused) ||
      !parent->instance)
    co_return MakeError(Code::kSandboxNotRunning,
                        "sandbox " + id + " is " + StatusName(parent->rec.status));
  // All or nothing: refused up front when the children cannot all fit;
  // each child's create checks again (other creates may run meanwhile).
  if (tenant) {
    if (auto st = CheckCountQuota("live sandboxes", s_.live_count(owner_key), count,
                                  s_.opts.quotas.max_sandboxes, "--tenant-max-sandboxes");
        !st.ok())
      co_return st.error();
  }
  if (auto st = life_->Admit(count, parent->rec.memory_mb); !st.ok())
    co_return st.error().Context("fork of " + std::to_string(count));
  // A driver that can copy the whole running machine (vm) forks it with
  // its memory and processes; otherwise the children start from a file
  // snapshot of the parent's writable layer.
  auto source = parent->instance;  // alive across the capture even if deleted meanwhile
  auto machine = co_await source->CaptureMachine();
  if (!machine.ok() && machine.error().code != Code::kNotSupported)
    co_return machine.error().Context("fork");
  Result<SnapshotRecord> snap = MakeError(Code::kNotSupported, "no snapshot");
  if (!machine.ok()) {
    snap = co_await Take(*parent, true);
    if (!snap.ok()) co_return snap.error().Context("fork");
  }
  std::vector<SandboxRecord> out;
  auto remaining = std::chrono::duration_cast<std::chrono::seconds>(
      parent->rec.expires_at - std::chrono::system_clock::now());
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
    o.tenant = tenant;
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
    auto rec = co_await life_->Create(std::move(o));
    if (!rec.ok()) {
      // All or nothing: a fork that made some children deletes them.
      for (const auto& r : out) (void)co_await life_->Delete(r.id, "fork failed");
      Collect();
      co_return rec.error().Context("fork child " + std::to_string(i + 1) + " of " +
                                    std::to_string(count));
    }
    out.push_back(*rec);
  }
  Collect();
  co_return out;
}

}  // namespace hutch
