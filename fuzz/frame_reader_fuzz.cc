// The host<->agent frame reader (src/wire): bytes from the agent are
// untrusted (the agent runs inside the sandbox, next to hostile code). The
// input is fed in pieces whose sizes come from the input itself; every
// frame taken must re-encode to bytes that parse back to the same frame.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "wire/frame.h"

using hutch::wire::Frame;
using hutch::wire::FrameReader;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step = 1 + data[0] % 64;  // how the bytes are split
  FrameReader r;
  for (size_t off = 1; off < size; off += step) {
    size_t n = std::min(step, size - off);
    if (!r.Feed(reinterpret_cast<const char*>(data + off), n).ok()) break;
  }
  Frame f;
  while (r.Next(&f)) {
    (void)hutch::wire::DecodeCredit(f.payload);
    hutch::wire::ProcStdin ps;
    (void)hutch::wire::DecodeProcStdin(f.payload, &ps);
    if (f.flags != 0) continue;  // Encode writes no flags
    std::string again = hutch::wire::Encode(f.type, f.stream, f.payload);
    FrameReader r2;
    Frame g;
    if (!r2.Feed(again.data(), again.size()).ok() || !r2.Next(&g) || g.type != f.type ||
        g.stream != f.stream || g.payload != f.payload)
      abort();
  }
  return 0;
}
