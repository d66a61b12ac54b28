// The retained output of one background process: stdout and stderr bytes
// interleaved in the order the agent read them, each byte at a fixed offset
// in the process's combined output (0 = its first byte). Bounded: once the
// retained bytes (plus a per-chunk overhead, so that alternating one-byte
// writes cannot cost more than the budget) exceed the capacity, the oldest
// bytes are dropped. Readers address bytes by offset, so a reader that fell
// behind learns exactly how much it missed (offset < oldest()).
//
// Single-threaded (the agent's loop); no locking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace hutch::agent {

class OutputRing {
 public:
  // What one chunk costs beyond its bytes (string and deque bookkeeping).
  static constexpr size_t kChunkOverhead = 64;
  // Appends to the last chunk while it is of the same kind and below this.
  static constexpr size_t kMaxChunk = 64 * 1024;

  explicit OutputRing(size_t capacity);

  // Appends bytes read from stdout (is_err=false) or stderr.
  void Append(bool is_err, std::string_view data);

  struct Piece {
    bool is_err = false;
    uint64_t offset = 0;
    std::string_view bytes;  // valid until the next Append
  };
  // Bytes of one kind starting at `offset` (oldest() <= offset <= end()),
  // at most `max` of them; empty when offset == end() or out of range.
  Piece Read(uint64_t offset, size_t max) const;

  uint64_t oldest() const { return chunks_.empty() ? end_ : chunks_.front().offset; }
  uint64_t end() const { return end_; }
  size_t capacity() const { return capacity_; }
  // Bytes charged against the capacity (retained bytes + chunk overhead).
  size_t charged() const { return bytes_ + chunks_.size() * kChunkOverhead; }

 private:
  struct Chunk {
    uint64_t offset;
    bool is_err;
    std::string data;
  };
  void Trim();

  size_t capacity_;
  std::deque<Chunk> chunks_;
  size_t bytes_ = 0;
  uint64_t end_ = 0;
};

}  // namespace hutch::agent
