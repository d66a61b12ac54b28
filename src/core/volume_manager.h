// VolumeManager: the registry of named volumes (see core/volume.h).
//
// On the host a volume is <dir>/<name>/volume.img, loop-mounted at
// <dir>/<name>/data while hutchd runs (sandboxes get a bind of that
// directory). Records live in the state store; a directory without a record
// is what a crash left mid-create or mid-delete, and Recover removes it.
// Runs on the I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tenant_quotas.h"
#include "core/volume.h"
#include "store/state_store.h"

namespace asio = boost::asio;

namespace hutch {

struct VolumeOptions {
  std::string dir;        // <state>/volumes
  uint32_t uid_base = 0;  // host uid of a sandbox's root: owns the volume's root dir
  int64_t default_size_mb = 1024;
  int64_t max_size_mb = 65536;
  int max_volumes = 1000;
};

class VolumeManager {
 public:
  // `store` may be null (nothing persists).
  VolumeManager(VolumeOptions opts, store::StateStore* store)
      : opts_(std::move(opts)), store_(store) {}

  // At start: loads the records, mounts each volume again (keeping a mount
  // a crashed run left), removes directories that have no record.
  struct RecoverReport {
    int mounted = 0, kept = 0, removed = 0, broken = 0;
  };
  Result<RecoverReport> Recover();

  // `owner`: the owner id of the key creating it (VolumeRecord::owner).
  // `quota`: a tenant key's limits on the owner's volumes (null: an admin
  // key, exempt); volumes still being created count.
  asio::awaitable<Result<VolumeRecord>> Create(const std::string& name,
                                               std::optional<int64_t> size_mb,
                                               const std::string& owner = "",
                                               const TenantQuotas* quota = nullptr);
  Result<VolumeRecord> Get(const std::string& name) const;
  std::vector<VolumeRecord> List() const;
  // The caller has checked that no sandbox uses it.
  Status Delete(const std::string& name);
  // Where the volume is mounted on the host.
  Result<std::string> DataDir(const std::string& name) const;
  // Unmounts every volume (server shutdown; sandboxes are gone by then).
  void Shutdown();
  const VolumeOptions& options() const { return opts_; }

 private:
  std::string VolumeDir(const std::string& name) const { return opts_.dir + "/" + name; }
  VolumeOptions opts_;
  store::StateStore* store_;
  std::map<std::string, VolumeRecord> volumes_;
  std::map<std::string, VolumeRecord> creating_;  // name -> its owner and size
};

}  // namespace hutch
