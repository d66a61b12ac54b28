// Writes cpio archives in the "newc" format the kernel unpacks as an
// initramfs (Documentation/driver-api/early-userspace/buffer-format.rst).
// hutchd makes the vm guest's second initramfs archive with it (init and
// agent), so the host needs no cpio tool at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hutch::vm {

struct CpioEntry {
  std::string name;   // path inside the archive, without a leading '/'
  uint32_t mode = 0;  // type and permission bits (S_IFREG | 0755, S_IFDIR | 0755)
  std::string data;   // file contents (empty for a directory)
};

// The archive: every entry, then the TRAILER!!! record.
std::string CpioNewc(const std::vector<CpioEntry>& entries);

}  // namespace hutch::vm
