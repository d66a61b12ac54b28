#include "driver/vm/guest_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "driver/vm/cpio_archive.h"

namespace hutch::vm {

namespace fs = std::filesystem;

namespace {

// Writes `data` to `path` through a temp file and a rename, read-only for
// everyone (the confined QEMU reads it as an unprivileged user).
Status WriteFileAtomic(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) return MakeError(Code::kInternal, "cannot write " + tmp);
  }
  if (chmod(tmp.c_str(), 0444) != 0) return ErrnoError("chmod " + tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("rename " + tmp);
  return Status{};
}

}  // namespace

Result<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(Code::kNotFound, "cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<GuestFiles> PrepareGuestFiles(const std::string& guest_dir, const std::string& vm_dir,
                                     const std::string& init_path, const std::string& agent_path) {
  GuestFiles g;
  auto release = ReadAll(guest_dir + "/kernel-release");
  if (!release.ok())
    return MakeError(Code::kNotFound, "no guest kernel in " + guest_dir +
                                          " (run scripts/vm-guest " + guest_dir + ")");
  g.kernel_release = *release;
  while (!g.kernel_release.empty() && g.kernel_release.back() == '\n') g.kernel_release.pop_back();

  auto modules = ReadAll(guest_dir + "/modules.cpio");
  if (!modules.ok()) return modules.error().Context("guest modules");
  auto init = ReadAll(init_path);
  if (!init.ok()) return init.error().Context("hutch-vm-init");
  auto agent = ReadAll(agent_path);
  if (!agent.ok()) return agent.error().Context("hutch-agent");
  std::vector<CpioEntry> own = {{"init", S_IFREG | 0755, std::move(*init)},
                                {"hutch-agent", S_IFREG | 0755, std::move(*agent)}};
  // The kernel unpacks concatenated archives one after the other (the
  // modules archive is padded to a 512-byte block by cpio).
  g.initrd = vm_dir + "/initrd.cpio";
  if (auto st = WriteFileAtomic(g.initrd, *modules + CpioNewc(own)); !st.ok()) return st.error();

  // The kernel is big (≈50 MB): link it when the guest dir is on the same
  // filesystem, copy it once otherwise.
  g.kernel = vm_dir + "/vmlinux";
  const std::string src = guest_dir + "/vmlinux";
  std::error_code ec;
  const bool same = fs::exists(g.kernel, ec) &&
                    fs::file_size(g.kernel, ec) == fs::file_size(src, ec) &&
                    fs::last_write_time(g.kernel, ec) >= fs::last_write_time(src, ec);
  if (!same) {
    fs::remove(g.kernel, ec);
    fs::create_hard_link(src, g.kernel, ec);
    if (ec) {
      ec.clear();
      fs::copy_file(src, g.kernel, fs::copy_options::overwrite_existing, ec);
      if (ec) return MakeError(Code::kInternal, "copy guest kernel: " + ec.message());
    }
    if (chmod(g.kernel.c_str(), 0444) != 0) return ErrnoError("chmod " + g.kernel);
  }
  return g;
}

}  // namespace hutch::vm
