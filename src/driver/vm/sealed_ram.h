// A boot snapshot's guest RAM as a sealed memfd: the one copy every
// sandbox restored from that snapshot maps privately (copy-on-write).
//
// Why not the RAM file itself: QEMU 7.2 opens a memory-backend-file's
// mem-path read-write even when it maps it private (its `readonly=on` maps
// the guest's RAM read-only, which a guest cannot run on), and every VM
// runs as the same unprivileged user — so a file QEMU may open read-write
// is a file any escaped QEMU could rewrite for every later restore. A
// memfd sealed with F_SEAL_WRITE, SHRINK, GROW and SEAL can be opened
// read-write (QEMU reaches it as /proc/self/fd/N) and mapped private, but
// no process can change its contents or size any more.
#pragma once

#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch::vm {

// Copies the file at `path` into a new memfd, allocates every page of it,
// and seals it.
//
// Why every page: a guest restored from the memfd that touches a page the
// base guest never did would otherwise make the kernel allocate that page
// in the memfd (shmem fills a hole on any fault, even a read fault of a
// private mapping) and charge it to that sandbox's QEMU cgroup — on top of
// the private copy its write then makes. Such pages cannot be reclaimed
// (no swap), outlive the sandbox in the memfd, and a guest that touches
// all its RAM is OOM-killed at about half its size (found by the 1 GiB
// upload of security_vm_exhaustion_slow). Allocated here, they are charged
// once to hutchd, shared by every restore, and each sandbox is charged
// only for what it writes: a loaded snapshot costs the host its RAM size.
// Zero pages are not copied (the allocation zeroes them).
Result<UniqueFd> SealedCopy(const std::string& path);

}  // namespace hutch::vm
