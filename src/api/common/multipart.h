// A streaming reader of multipart/form-data request bodies (RFC 7578), as
// the E2B and OpenSandbox SDKs upload files: bytes go in as they arrive, parts' headers and
// data come out, so a 50 MB upload is never held in memory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hutch::api {

// The boundary parameter of a multipart Content-Type; "" if none.
std::string MultipartBoundary(std::string_view content_type);

class MultipartReader {
 public:
  struct Event {
    enum Kind { kPartBegin, kData, kPartEnd } kind = kData;
    std::string name;      // kPartBegin: the form field name
    std::string filename;  // kPartBegin: the filename parameter ("" if none)
    std::string data;      // kData
  };
  explicit MultipartReader(const std::string& boundary) : delim_("\r\n--" + boundary) {}
  // Consumes bytes; returns the events they complete.
  Result<std::vector<Event>> Feed(std::string_view bytes);
  // True once the closing boundary was read.
  bool done() const { return state_ == kDone; }

 private:
  enum State { kPreamble, kAfterBoundary, kHeaders, kBody, kDone } state_ = kPreamble;
  std::string delim_;  // CRLF "--" boundary
  std::string buf_;
};

}  // namespace hutch::api
