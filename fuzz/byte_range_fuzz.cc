// Range header parsing and fitting to a file size. Invariant: a partial
// window lies inside the file and is not empty.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "http/byte_range.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  int64_t file_size = 0;
  std::memcpy(&file_size, data, 8);
  file_size = file_size < 0 ? -(file_size + 1) : file_size;
  file_size %= int64_t{1} << 50;
  std::string header(reinterpret_cast<const char*>(data + 8), size - 8);
  auto r = hutch::api::ParseRange(header);
  auto w = hutch::api::FitRange(r, file_size);
  if (!w.ok()) return 0;
  if (w->partial) {
    if (w->offset < 0 || w->length <= 0 || w->offset + w->length > file_size) abort();
  } else if (w->offset != 0 || w->length != -1) {
    abort();
  }
  return 0;
}
