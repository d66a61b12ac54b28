// Request-target parsing (the path and query of every request line).
// Invariants: segments are non-empty and hold no '/'; a well-formed target
// decodes to a path without NUL bytes; SplitRequestTarget's rest is the
// input's own tail.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "http/request_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto t = hutch::api::ParseRequestTarget(in);
  if (t.ok && t.path.find('\0') != std::string::npos) abort();
  for (const auto& [k, v] : t.query)
    if (k.find('\0') != std::string::npos || v.find('\0') != std::string::npos) abort();
  for (const auto& s : hutch::api::PathSegments(t.path))
    if (s.empty() || s.find('/') != std::string::npos) abort();
  // The port proxy's cut: the relayed rest is the input's own tail, or a
  // "/" put in front of an empty tail or of a bare query.
  auto is_tail = [&](std::string_view t) {
    return t.size() <= in.size() && in.substr(in.size() - t.size()) == t;
  };
  for (size_t n : {size_t{1}, size_t{5}}) {
    auto sp = hutch::api::SplitRequestTarget(in, n);
    if (!sp.ok) continue;
    if (sp.prefix.size() != n || sp.rest.empty() || sp.rest[0] != '/') abort();
    std::string_view rest = sp.rest;
    if (is_tail(rest)) continue;
    std::string_view after = rest.substr(1);
    if (!is_tail(after) || !(after.empty() || after[0] == '?')) abort();
  }
  return 0;
}
