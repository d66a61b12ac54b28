// Time helpers: RFC 3339 formatting, elapsed milliseconds and random ids.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hutch {

using SysTime = std::chrono::system_clock::time_point;

// "2026-12-01T02:42:21.123Z"
std::string FormatRfc3339(SysTime t);
// Unix milliseconds: how times are stored (state store rows, JSON records).
inline int64_t ToUnixMs(SysTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline SysTime FromUnixMs(int64_t ms) { return SysTime(std::chrono::milliseconds(ms)); }
// Milliseconds since `t0` on the steady clock (phase times in debug logs).
inline double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
// `bytes` random bytes as lowercase hex (getrandom).
std::string RandomHex(size_t bytes);

}  // namespace hutch
