// Time helpers: RFC 3339 formatting and random ids.
#pragma once

#include <chrono>
#include <string>

namespace hutch {

using SysTime = std::chrono::system_clock::time_point;

// "2026-12-01T02:42:21.123Z"
std::string FormatRfc3339(SysTime t);
// `bytes` random bytes as lowercase hex (getrandom).
std::string RandomHex(size_t bytes);

}  // namespace hutch
