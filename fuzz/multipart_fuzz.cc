// The multipart/form-data reader (src/api/common/multipart): upload bodies are
// untrusted and arrive in arbitrary pieces. Two modes, chosen by the first
// byte:
//  - raw: the input is a body; events must be well nested (a part begins,
//    carries data, ends) and nothing follows the closing boundary;
//  - round trip: the input is split into part contents, encoded as a valid
//    body, fed in input-chosen pieces; the parts must come back unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "api/common/multipart.h"

using hutch::api::MultipartBoundary;
using hutch::api::MultipartReader;

namespace {

constexpr std::string_view kContentType = "multipart/form-data; boundary=\"fz-B0undary\"";

struct Parsed {
  std::vector<std::string> names, bodies;
  bool error = false;
};

Parsed Parse(std::string_view body, size_t step) {
  Parsed p;
  MultipartReader r(MultipartBoundary(kContentType));
  bool open = false;
  for (size_t off = 0; off < body.size(); off += step) {
    bool was_done = r.done();
    auto ev = r.Feed(body.substr(off, step));
    if (!ev.ok()) {
      p.error = true;
      return p;
    }
    if (was_done && !ev.value().empty()) abort();  // events after the end
    for (auto& e : ev.value()) {
      switch (e.kind) {
        case MultipartReader::Event::kPartBegin:
          if (open) abort();
          open = true;
          p.names.push_back(e.name);
          p.bodies.emplace_back();
          break;
        case MultipartReader::Event::kData:
          if (!open) abort();
          p.bodies.back() += e.data;
          break;
        case MultipartReader::Event::kPartEnd:
          if (!open) abort();
          open = false;
          break;
      }
    }
  }
  if (r.done() && open) abort();  // the closing boundary ends the last part
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool round_trip = data[0] & 1;
  const size_t step = 1 + data[1] % 97;
  std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);
  if (!round_trip) {
    (void)Parse(in, step);
    return 0;
  }
  // Parts are separated by 0xFF in the input; a part holding the delimiter
  // cannot be encoded (a real client picks another boundary), so skip it.
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = in.find('\xff', start);
    parts.emplace_back(
        in.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  std::string body;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].find("--fz-B0undary") != std::string::npos) return 0;
    body += "--fz-B0undary\r\nContent-Disposition: form-data; name=\"f" + std::to_string(i) +
            "\"; filename=\"x\"\r\nContent-Type: application/octet-stream\r\n\r\n" + parts[i] +
            "\r\n";
  }
  body += "--fz-B0undary--\r\n";
  Parsed p = Parse(body, step);
  if (p.error || p.bodies.size() != parts.size()) abort();
  for (size_t i = 0; i < parts.size(); ++i)
    if (p.bodies[i] != parts[i] || p.names[i] != "f" + std::to_string(i)) abort();
  return 0;
}
