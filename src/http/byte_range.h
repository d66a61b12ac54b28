// HTTP single byte ranges (RFC 9110 §14) for file downloads: parsing the
// Range header and fitting it to a file's size.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace hutch::api {

struct ByteRange {
  bool present = false;
  bool suffix = false;
  int64_t first = 0;
  int64_t last = -1;  // -1: to the end
};

// Parses a single "bytes=a-b" / "bytes=a-" / "bytes=-n" range. Anything
// else (multiple ranges, other units) gives present=false, as RFC 9110
// allows: the whole file is sent.
ByteRange ParseRange(const std::string& header);

// What to send of a file of `size` bytes. `partial` false: the whole file
// (200). An unsatisfiable range is a range_not_satisfiable error (416).
struct ByteWindow {
  bool partial = false;
  int64_t offset = 0;
  int64_t length = -1;  // -1: to the end
};
Result<ByteWindow> FitRange(const ByteRange& r, int64_t size);

}  // namespace hutch::api
