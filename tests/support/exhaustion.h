// The exhaustion scenarios of the hostile-workload suite whose full size is
// too slow for every CI run: tests/security/exhaustion_test.cc runs them
// small, exhaustion_slow_test.cc (label slow) at the design's size. Each
// starts its own hutchd and reports figures with RecordProperty and on
// stdout; memory is asserted as a bound, never time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/test_server.h"

namespace hutch::testing {

// A command prints `bytes` to stdout; the client reads its exec stream
// slowly (1 ms per event). Every byte arrives, and hutchd's RSS stays
// bounded: backpressure, not buffering.
void StdoutFloodWithSlowReader(uint64_t bytes);

// Uploads `bytes` of pseudo-random data into a sandbox and downloads them
// back, both streamed; the hashes match and hutchd's RSS stays flat.
void UploadDownloadRoundTrip(uint64_t bytes);

// Opens `n` SSE streams (followers of one background process) at once:
// all are served, hutchd keeps answering other requests, and closing them
// gives hutchd's fds back.
void ManyOpenSseStreams(int n);

// Raw HTTP/1.1 GET of an SSE stream on a fresh connection: returns the
// open socket once the status line and headers arrived, or -1; the status
// goes to *status (0 when none came).
int OpenSseStream(int port, const std::string& key, const std::string& target, int* status);

}  // namespace hutch::testing
