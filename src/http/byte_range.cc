#include "http/byte_range.h"

#include <algorithm>

namespace hutch::api {

ByteRange ParseRange(const std::string& h) {
  ByteRange r;
  const std::string prefix = "bytes=";
  if (h.rfind(prefix, 0) != 0) return r;
  std::string spec = h.substr(prefix.size());
  if (spec.find(',') != std::string::npos) return r;
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return r;
  auto num = [](const std::string& s, int64_t* out) {
    if (s.empty() || s.size() > 18) return false;
    for (char c : s)
      if (c < '0' || c > '9') return false;
    *out = std::stoll(s);
    return true;
  };
  std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  if (a.empty()) {
    if (!num(b, &r.first)) return r;
    r.suffix = true;
  } else {
    if (!num(a, &r.first)) return r;
    if (!b.empty() && (!num(b, &r.last) || r.last < r.first)) return r;
  }
  r.present = true;
  return r;
}

Result<ByteWindow> FitRange(const ByteRange& r, int64_t size) {
  ByteWindow w;
  // "The last n bytes" of nothing: the whole (empty) file, 200.
  if (!r.present || (size == 0 && r.suffix)) return w;
  w.partial = true;
  if (r.suffix) {
    if (r.first == 0)
      return MakeError(Code::kRangeNotSatisfiable, "a suffix range of 0 bytes selects nothing");
    w.length = std::min(r.first, size);
    w.offset = size - w.length;
    return w;
  }
  w.offset = r.first;
  if (w.offset >= size)
    return MakeError(Code::kRangeNotSatisfiable, "range starts at " + std::to_string(w.offset) +
                                                     " but the file has " + std::to_string(size) +
                                                     " bytes");
  w.length = (r.last < 0 ? size - 1 : std::min(r.last, size - 1)) - w.offset + 1;
  return w;
}

}  // namespace hutch::api
