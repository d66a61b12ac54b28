// Request-target parsing (the path and query of every request line).
// Invariants: segments are non-empty and hold no '/'; a well-formed target
// decodes to a path without NUL bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/request_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto t = hutch::api::ParseRequestTarget(in);
  if (t.ok && t.path.find('\0') != std::string::npos) abort();
  for (const auto& [k, v] : t.query)
    if (k.find('\0') != std::string::npos || v.find('\0') != std::string::npos) abort();
  for (const auto& s : hutch::api::PathSegments(t.path))
    if (s.empty() || s.find('/') != std::string::npos) abort();
  return 0;
}
