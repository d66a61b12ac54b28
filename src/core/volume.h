// A volume: named persistent storage that outlives the sandboxes it is
// mounted into. Each is an ext4 filesystem in a sparse image file of a
// fixed size (the size cap), so one sandbox filling it cannot fill the
// host's disk, and nothing on it can refer to a host file: hard links and
// `..` stop at its own root. The jail driver loop-mounts the image once on
// the host and binds it into each sandbox; a VM driver can attach the same
// image as a disk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"

namespace hutch {

struct VolumeRecord {
  std::string name;
  int64_t size_mb = 0;
  SysTime created_at;
  std::string owner;  // the owner id of the key that made it (auth/principal.h)

  nlohmann::json ToJson() const;  // the API's view, without live figures
  std::string ToStoreJson() const;
  static bool FromStoreJson(const std::string& text, VolumeRecord* out);
};

// A volume as a sandbox asks for it at create.
struct VolumeMountRequest {
  std::string name;
  std::string path;  // absolute path inside the sandbox
  bool read_only = false;
};

// Names: 1-63 of [a-z0-9_.-], starting with a letter or digit (they are
// directory names on the host, so nothing else is allowed in).
Status CheckVolumeName(const std::string& name);
// Mount paths: absolute, normalized (no `.`, `..` or empty components), at
// most 1024 bytes, not `/` and not under /proc, /dev or /sys (the sandbox
// needs those as the jail builds them).
Status CheckVolumeMountPath(const std::string& path);
// A whole create request's list: each entry valid, no path given twice.
Status CheckVolumeMounts(const std::vector<VolumeMountRequest>& mounts);

nlohmann::json VolumeMountsToJson(const std::vector<VolumeMountRequest>& mounts);
std::vector<VolumeMountRequest> VolumeMountsFromJson(const nlohmann::json& j);

}  // namespace hutch
