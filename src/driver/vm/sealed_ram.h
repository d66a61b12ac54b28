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

// Copies the file at `path` (only its data extents: the holes of a sparse
// RAM file stay holes) into a new memfd and seals it.
Result<UniqueFd> SealedCopy(const std::string& path);

}  // namespace hutch::vm
