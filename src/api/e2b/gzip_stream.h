// Streaming gzip both ways (zlib), for envd's /files: downloads are
// compressed when the client accepts gzip, uploads may arrive with
// Content-Encoding: gzip. Chunks in, chunks out; nothing is buffered
// whole. Also Connect messages compressed with gzip (GunzipBounded).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hutch::api::e2b {

class GzipDeflater {
 public:
  GzipDeflater();
  ~GzipDeflater();
  GzipDeflater(const GzipDeflater&) = delete;
  GzipDeflater& operator=(const GzipDeflater&) = delete;
  // Compressed bytes for `in` (may be empty: zlib holds some back).
  std::string Feed(std::string_view in);
  // The rest, with the gzip trailer.
  std::string Finish();

 private:
  std::string Run(std::string_view in, int flush);
  struct State;
  std::unique_ptr<State> s_;
};

class GzipInflater {
 public:
  GzipInflater();
  ~GzipInflater();
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;
  // Decompressed bytes for `in`; invalid_request on corrupt data.
  Result<std::string> Feed(std::string_view in);
  // Whether the gzip stream was complete (its trailer read).
  bool finished() const { return finished_; }

 private:
  struct State;
  std::unique_ptr<State> s_;
  bool finished_ = false;
};

// A whole gzip body inflated at once (a Connect message compressed with
// gzip): invalid_request when corrupt or cut short, payload_too_large when
// it inflates past `limit` (checked as it grows, so a small bomb stays
// small).
Result<std::string> GunzipBounded(std::string_view in, size_t limit);

}  // namespace hutch::api::e2b
