#include "driver/vm/boot_snapshots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sha256.h"
#include "driver/vm/guest_files.h"
#include "driver/vm/qemu_command.h"

namespace hutch::vm {

namespace fs = std::filesystem;

namespace {

std::string StatStamp(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return path + " missing";
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

std::string BootKey(const BootKeyParts& p) {
  const std::string stamp = p.rootfs_image + "\n" + p.blank_disk + "\n" +
                            std::to_string(p.memory_mb) + "\n" + std::to_string(p.vcpus) + "\n" +
                            p.accel + "\n" + p.guest_identity + "\n" + (p.nic ? "nic\n" : "");
  return Sha256Hex(stamp).substr(0, 24);
}

Result<std::string> GuestIdentity(const std::string& guest_dir, const std::string& init_path,
                                  const std::string& agent_path, const std::string& qemu) {
  std::string stamp = StatStamp(guest_dir + "/vmlinux") + "\n" + StatStamp(qemu) + "\n";
  for (const std::string& f : {guest_dir + "/modules.cpio", init_path, agent_path}) {
    auto data = ReadAll(f);
    if (!data.ok()) return data.error();
    stamp += Sha256Hex(*data) + "\n";
  }
  return Sha256Hex(stamp);
}

Status InstallBootSnapshot(const std::string& build_dir, const std::string& final_dir,
                           const std::string& guest_identity, const std::string& rootfs_image) {
  for (const auto& [name, mode] :
       {std::pair<const char*, mode_t>{kStateFile, 0400}, {kRamFile, 0400}, {kDiskFile, 0444}}) {
    const std::string p = build_dir + "/" + name;
    if (chown(p.c_str(), 0, 0) != 0 || chmod(p.c_str(), mode) != 0)
      return ErrnoError("install " + p);
  }
  {
    std::ofstream(build_dir + "/guest") << guest_identity << "\n";
    std::ofstream(build_dir + "/rootfs") << rootfs_image << "\n";
  }
  std::error_code ec;
  fs::remove_all(final_dir,
                 ec);  // an older copy of the same key (a rebuild after a failed restore)
  if (rename(build_dir.c_str(), final_dir.c_str()) != 0) return ErrnoError("install " + final_dir);
  return Status{};
}

int RemoveStaleBootSnapshots(const std::string& dir, const std::string& guest_identity) {
  int removed = 0;
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kSnapshotsBuildPrefix, 0) == 0) {
      stale.push_back(e.path());
      continue;
    }
    const std::string rootfs = ReadLine(e.path().string() + "/rootfs");
    if (ReadLine(e.path().string() + "/guest") != guest_identity || rootfs.empty() ||
        access(rootfs.c_str(), F_OK) != 0)
      stale.push_back(e.path());
  }
  for (const auto& p : stale) {
    std::error_code rec;
    fs::remove_all(p, rec);
    if (!rec) ++removed;
  }
  return removed;
}

}  // namespace hutch::vm
