#include "driver/vm/vm_fork.h"

#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <filesystem>

#include "common/clock.h"
#include "common/subprocess.h"
#include "driver/vm/boot_snapshots.h"
#include "driver/vm/migration.h"
#include "driver/vm/qemu_command.h"
#include "driver/vm/qmp_client.h"
#include "driver/vm/vm_instance.h"

namespace hutch::vm {

namespace fs = std::filesystem;

namespace {

// The read-only disks a sandbox runs on, by the names its directory gives
// them: the root image, and below its overlay the blank disk, a boot
// snapshot's disk, the copies of earlier forks (a fork of a fork). A child
// takes the source's own files, so a template rebuilt meanwhile does not
// change the disks under the copied guest.
bool IsBackingFile(const std::string& name) {
  return name == kRootfsFile || name == kDiskBaseFile || name == kSnapDiskFile ||
         (name.rfind("fork-", 0) == 0 && name.size() > 6 &&
          name.compare(name.size() - 6, 6, ".qcow2") == 0);
}

}  // namespace

VmForkImage::~VmForkImage() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (ec) spdlog::error("vm_fork_image remove_failed dir={} err=\"{}\"", dir_, ec.message());
}

std::string VmForkImage::state_path() const { return dir_ + "/" + kStateFile; }

asio::awaitable<Result<std::shared_ptr<MachineImage>>> VmInstance::CaptureMachine() {
  if (destroyed_ || destroying_) co_return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
  if (capturing_) co_return MakeError(Code::kConflict, "a fork of this sandbox is in progress");
  if (forks_dir_.empty()) co_return MakeError(Code::kNotSupported, "no fork directory");
  auto self = shared_from_this();  // alive across the awaits even if deleted meanwhile
  capturing_ = true;
  const bool was_paused = paused_;
  // Whatever happens below, a running source runs again.
  struct Continue {
    VmInstance* i;
    bool run;
    ~Continue() {
      i->capturing_ = false;
      if (run && !i->destroyed_ && !i->destroying_) {
        if (auto r = QmpExecute(i->qmp_path(), "cont"); !r.ok())
          spdlog::error("sandbox={} fork_continue_failed err=\"{}\"", i->id_, r.error().message);
      }
    }
  } cont{this, !was_paused};

  const std::string fid = RandomHex(8);
  const std::string dir = forks_dir_ + "/" + fid;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) co_return MakeError(Code::kInternal, "create " + dir + ": " + ec.message());
  if (chmod(dir.c_str(), 0700) != 0) {
    Error e = ErrnoError("chmod " + dir);
    fs::remove_all(dir, ec);
    co_return e;
  }
  // From here the image owns the directory.
  const std::string disk_name = "fork-" + fid + ".qcow2";
  std::vector<std::string> files = {disk_name};
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (IsBackingFile(name)) files.push_back(name);
  }
  auto image = std::make_shared<VmForkImage>(dir, disk_name, files);
  image->set_nic(!netns_path_.empty());

  // The whole machine: a sandbox's RAM is private memory (anonymous, or a
  // boot snapshot's memfd mapped copy-on-write), so it is all in the stream.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string state = image->state_path();
  if (auto st = co_await SaveState(qmp_path(), state, false, std::chrono::minutes(5)); !st.ok())
    co_return st.error().Context("fork " + id_);
  // QEMU flushed the disk when the VM stopped and when the migration
  // completed: the overlay on disk is the state the stream's guest sees.
  const std::string copy = dir + "/" + disk_name;
  std::vector<std::string> cp = {"/bin/cp", "--sparse=always", "--", dir_ + "/" + kDiskFile, copy};
  if (auto st = co_await RunTool(cp, std::chrono::minutes(5)); !st.ok())
    co_return st.error().Context("fork " + id_ + ": copy its disk");
  if (chown(copy.c_str(), 0, 0) != 0 || chmod(copy.c_str(), 0444) != 0)
    co_return ErrnoError("install " + copy);
  for (size_t i = 1; i < files.size(); ++i) {
    if (link((dir_ + "/" + files[i]).c_str(), (dir + "/" + files[i]).c_str()) != 0)
      co_return ErrnoError("link " + files[i] + " into the fork");
  }
  spdlog::info(
      "sandbox={} vm_fork_captured fork={} ms={}", id_, fid,
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  co_return std::shared_ptr<MachineImage>(image);
}

}  // namespace hutch::vm
