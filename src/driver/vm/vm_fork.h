// A running VM's whole machine for a fork (Instance::CaptureMachine): its
// source is stopped, its full state — RAM included, since a sandbox's RAM
// is private memory — migrated into <vm dir>/forks/<fork id>/state, its
// disk overlay copied while it stands still (a few MB: only the sandbox's
// own writes; the read-only backing files it stands on are linked, not
// copied), and the source continued. Each child is restored from that
// state on its own overlay over the copy, and re-identified.
//
// The fork directory is root-only and lives as long as this object (the
// fork request): children hold hard links of the disks they stand on, and
// have read the state once they run. A crashed run's leftovers go at start
// (VmDriver::ReconcileAtStart).
#pragma once

#include <string>
#include <vector>

#include "driver/driver.h"

namespace hutch::vm {

class VmForkImage : public MachineImage {
 public:
  VmForkImage(std::string dir, std::string disk_name, std::vector<std::string> files)
      : dir_(std::move(dir)), disk_name_(std::move(disk_name)), files_(std::move(files)) {}
  ~VmForkImage() override;
  VmForkImage(const VmForkImage&) = delete;
  VmForkImage& operator=(const VmForkImage&) = delete;

  const std::string& dir() const { return dir_; }
  std::string state_path() const;
  // The copied overlay (fork-<id>.qcow2): each child's overlay stands on it.
  const std::string& disk_name() const { return disk_name_; }
  // Every file a child links into its directory: the copy and the
  // read-only disks below it.
  const std::vector<std::string>& files() const { return files_; }
  // The source has a NIC: so must every child, whose devices must match
  // the saved ones (a child without a network slot gets an unconnected tap).
  bool nic() const { return nic_; }
  void set_nic(bool n) { nic_ = n; }

 private:
  std::string dir_, disk_name_;
  std::vector<std::string> files_;
  bool nic_ = false;
};

}  // namespace hutch::vm
