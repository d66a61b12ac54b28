#include "driver/vm/cpio_archive.h"

#include <cstdio>

namespace hutch::vm {

namespace {

void Pad4(std::string* out) {
  while (out->size() % 4 != 0) out->push_back('\0');
}

void Append(std::string* out, uint32_t ino, const std::string& name, uint32_t mode,
            const std::string& data) {
  // 110-byte header: magic, then 13 fields of 8 hex digits.
  char hdr[111];
  std::snprintf(hdr, sizeof hdr, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino,
                mode, 0u, 0u, 1u, 0u, static_cast<uint32_t>(data.size()), 0u, 0u, 0u, 0u,
                static_cast<uint32_t>(name.size() + 1), 0u);
  out->append(hdr, 110);
  out->append(name);
  out->push_back('\0');
  Pad4(out);  // the name ends on a 4-byte boundary (header included)
  out->append(data);
  Pad4(out);
}

}  // namespace

std::string CpioNewc(const std::vector<CpioEntry>& entries) {
  std::string out;
  uint32_t ino = 1;
  for (const auto& e : entries) Append(&out, ino++, e.name, e.mode, e.data);
  Append(&out, 0, "TRAILER!!!", 0, "");
  return out;
}

}  // namespace hutch::vm
