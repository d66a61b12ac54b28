// The exhaustion items at the design's full size (label slow: minutes under
// the sanitizer build, so out of the CI run; exhaustion_test.cc runs each
// smaller). Run with: ctest -L slow -R exhaustion_slow_test.
#include <gtest/gtest.h>

#include "tests/support/exhaustion.h"

namespace {
constexpr uint64_t kGiB = uint64_t{1} << 30;
}  // namespace

TEST(ExhaustionSlow, GigabyteOfStdoutWithASlowReaderKeepsServerMemoryBounded) {
  hutch::testing::StdoutFloodWithSlowReader(kGiB);
}

TEST(ExhaustionSlow, GigabyteUploadAndDownloadStreamWithFlatServerMemory) {
  hutch::testing::UploadDownloadRoundTrip(kGiB);
}

TEST(ExhaustionSlow, TenThousandOpenSseStreams) { hutch::testing::ManyOpenSseStreams(10000); }
