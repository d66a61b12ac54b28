#include "core/volume_manager.h"

#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <filesystem>

#include "common/ext4_image.h"

namespace hutch {

namespace fs = std::filesystem;

Result<VolumeManager::RecoverReport> VolumeManager::Recover() {
  RecoverReport rep;
  std::error_code ec;
  fs::create_directories(opts_.dir, ec);
  if (ec) return MakeError(Code::kInternal, "create " + opts_.dir + ": " + ec.message());
  // Only root may walk into volumes: their files belong to sandbox uids.
  chmod(opts_.dir.c_str(), 0700);
  if (store_) {
    auto rows = store_->LoadVolumes();
    if (!rows.ok()) return rows.error().Context("load volumes");
    for (const auto& [name, text] : *rows) {
      VolumeRecord r;
      if (!VolumeRecord::FromStoreJson(text, &r) || r.name != name) {
        spdlog::error("volume={} unreadable record: skipped", name);
        ++rep.broken;
        continue;
      }
      const std::string data = VolumeDir(name) + "/data";
      if (IsMountPoint(data)) {
        ++rep.kept;
      } else if (auto st = MountExt4Image(VolumeDir(name) + "/volume.img", data); !st.ok()) {
        // Kept in the registry (its data may be recoverable by hand), but
        // sandboxes asking for it get the error.
        spdlog::error("volume={} mount_failed err=\"{}\"", name, st.error().message);
        ++rep.broken;
      } else {
        ++rep.mounted;
      }
      volumes_[name] = r;
    }
  }
  for (const auto& e : fs::directory_iterator(opts_.dir, ec)) {
    std::string name = e.path().filename().string();
    if (volumes_.count(name)) continue;
    const std::string data = e.path().string() + "/data";
    if (IsMountPoint(data)) {
      if (auto st = UnmountLazily(data); !st.ok()) {
        spdlog::error("volume_dir={} unmount_failed err=\"{}\"", e.path().string(),
                      st.error().message);
        continue;  // never delete through a mount
      }
    }
    fs::remove_all(e.path(), ec);
    if (!ec) ++rep.removed;
  }
  return rep;
}

asio::awaitable<Result<VolumeRecord>> VolumeManager::Create(const std::string& name,
                                                            std::optional<int64_t> size_mb,
                                                            const std::string& owner,
                                                            const TenantQuotas* quota) {
  if (auto st = CheckVolumeName(name); !st.ok()) co_return st.error();
  int64_t size = size_mb.value_or(opts_.default_size_mb);
  if (size < 16 || size > opts_.max_size_mb)
    co_return MakeError(Code::kInvalidRequest,
                        "size_mb must be in [16, " + std::to_string(opts_.max_size_mb) + "]");
  if (volumes_.count(name) || creating_.count(name))
    co_return MakeError(Code::kConflict, "volume " + name + " already exists");
  if (static_cast<int>(volumes_.size() + creating_.size()) >= opts_.max_volumes)
    co_return MakeError(
        Code::kCapacityExhausted,
        "host is at its limit of " + std::to_string(opts_.max_volumes) + " volumes");
  if (quota) {
    int count = 0;
    uint64_t mb = 0;
    for (const auto* m : {&volumes_, &creating_})
      for (const auto& [n, v] : *m)
        if (v.owner == owner) {
          ++count;
          mb += static_cast<uint64_t>(v.size_mb);
        }
    if (auto st = CheckCountQuota("volumes", count, 1, quota->max_volumes, "--tenant-max-volumes");
        !st.ok())
      co_return st.error();
    if (auto st = CheckBytesQuota("volumes", mb << 20, static_cast<uint64_t>(size) << 20,
                                  quota->max_volume_gb, "--tenant-max-volume-gb");
        !st.ok())
      co_return st.error();
  }
  VolumeRecord pending;
  pending.name = name;
  pending.size_mb = size;
  pending.owner = owner;
  creating_[name] = pending;
  const std::string dir = VolumeDir(name);
  auto fail = [&](Error e) {
    creating_.erase(name);
    if (IsMountPoint(dir + "/data")) (void)UnmountLazily(dir + "/data");
    std::error_code ec;
    fs::remove_all(dir, ec);
    spdlog::error("volume={} create_failed err=\"{}\"", name, e.message);
    return e.Context("create volume " + name);
  };
  std::error_code ec;
  fs::remove_all(dir, ec);  // a leftover of a create that crashed
  if (mkdir(dir.c_str(), 0700) != 0 || mkdir((dir + "/data").c_str(), 0755) != 0)
    co_return fail(ErrnoError("mkdir " + dir));
  // Named: GCC 12 miscompiles braced temporaries inside co_await.
  Ext4ImageOptions image_opts;
  image_opts.root_uid = opts_.uid_base;
  if (auto st = co_await CreateExt4Image(dir + "/volume.img", size, image_opts); !st.ok())
    co_return fail(st.error());
  if (auto st = MountExt4Image(dir + "/volume.img", dir + "/data"); !st.ok())
    co_return fail(st.error());
  VolumeRecord r;
  r.name = name;
  r.size_mb = size;
  r.created_at = std::chrono::system_clock::now();
  r.owner = owner;
  if (store_) {
    if (auto st = store_->PutVolume(name, r.ToStoreJson()); !st.ok()) co_return fail(st.error());
  }
  creating_.erase(name);
  volumes_[name] = r;
  spdlog::info("volume={} created size_mb={}", name, size);
  co_return r;
}

Result<VolumeRecord> VolumeManager::Get(const std::string& name) const {
  auto it = volumes_.find(name);
  if (it == volumes_.end())
    return MakeError(Code::kVolumeNotFound, "volume " + name + " not found");
  return it->second;
}

std::vector<VolumeRecord> VolumeManager::List() const {
  std::vector<VolumeRecord> out;
  for (const auto& [n, r] : volumes_) out.push_back(r);
  return out;
}

Status VolumeManager::Delete(const std::string& name) {
  if (!volumes_.count(name))
    return MakeError(Code::kVolumeNotFound, "volume " + name + " not found");
  // The record goes first: once the delete is acknowledged it must stay
  // deleted; files a crash leaves behind are removed by the next Recover.
  if (store_) {
    if (auto st = store_->DeleteVolume(name); !st.ok())
      return st.error().Context("delete volume " + name);
  }
  volumes_.erase(name);
  const std::string dir = VolumeDir(name);
  if (auto st = UnmountLazily(dir + "/data"); !st.ok()) {
    spdlog::error("volume={} unmount_failed err=\"{}\"", name, st.error().message);
    return Status{};  // Recover retries
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  spdlog::info("volume={} deleted", name);
  return Status{};
}

Result<std::string> VolumeManager::DataDir(const std::string& name) const {
  if (!volumes_.count(name))
    return MakeError(Code::kVolumeNotFound, "volume " + name + " not found");
  std::string data = VolumeDir(name) + "/data";
  if (!IsMountPoint(data))
    return MakeError(Code::kUnavailable, "volume " + name + " is not mounted on the host");
  return data;
}

void VolumeManager::Shutdown() {
  for (const auto& [name, r] : volumes_) (void)UnmountLazily(VolumeDir(name) + "/data");
}

}  // namespace hutch
