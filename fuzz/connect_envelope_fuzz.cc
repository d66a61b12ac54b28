// The Connect envelope reader (src/api/e2b/connect_envelope): a client's
// streaming request body is untrusted bytes. The input is fed in pieces
// whose sizes come from the input itself. Invariants: every envelope taken
// re-encodes to exactly the bytes it was read from (so nothing is skipped
// or invented), its payload never exceeds the limit, and the reader stops
// for good at the first error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/e2b/connect_envelope.h"

using hutch::api::e2b::EncodeEnvelope;
using hutch::api::e2b::EnvelopeReader;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t step = 1 + data[0] % 64;         // how the bytes are split
  const size_t max_payload = 1 + data[1] * 64;  // up to ~16 KiB
  std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);
  EnvelopeReader r(max_payload);
  std::string reencoded;
  bool failed = false;
  for (size_t off = 0; off < in.size() && !failed; off += step) {
    r.Feed(in.substr(off, step));
    while (true) {
      auto next = r.Next();
      if (!next.ok()) {
        failed = true;
        break;
      }
      if (!next.value()) break;
      const auto& env = *next.value();
      if (env.payload.size() > max_payload) abort();
      reencoded += EncodeEnvelope(env.flags, env.payload);
    }
  }
  // What was taken is a prefix of the input, byte for byte.
  if (reencoded.size() > in.size() || in.compare(0, reencoded.size(), reencoded) != 0) abort();
  if (!failed && reencoded.size() + r.pending() != in.size()) abort();
  return 0;
}
