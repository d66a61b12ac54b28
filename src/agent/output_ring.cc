#include "agent/output_ring.h"

#include <algorithm>

namespace hutch::agent {

OutputRing::OutputRing(size_t capacity)
    : capacity_(std::max<size_t>(capacity, 2 * kChunkOverhead + 1)) {}

void OutputRing::Append(bool is_err, std::string_view data) {
  while (!data.empty()) {
    if (chunks_.empty() || chunks_.back().is_err != is_err ||
        chunks_.back().data.size() >= kMaxChunk)
      chunks_.push_back(Chunk{end_, is_err, {}});
    Chunk& c = chunks_.back();
    const size_t n = std::min(data.size(), kMaxChunk - c.data.size());
    c.data.append(data.data(), n);
    bytes_ += n;
    end_ += n;
    data.remove_prefix(n);
    Trim();
  }
}

void OutputRing::Trim() {
  while (charged() > capacity_ && !chunks_.empty()) {
    Chunk& front = chunks_.front();
    const size_t excess = charged() - capacity_;
    if (excess >= front.data.size() ||
        (chunks_.size() > 1 && excess + kChunkOverhead >= front.data.size())) {
      // Dropping the whole chunk also frees its overhead.
      bytes_ -= front.data.size();
      chunks_.pop_front();
      continue;
    }
    front.data.erase(0, excess);
    front.offset += excess;
    bytes_ -= excess;
  }
}

OutputRing::Piece OutputRing::Read(uint64_t offset, size_t max) const {
  Piece p;
  p.offset = offset;
  if (chunks_.empty() || offset < oldest() || offset >= end_ || max == 0) return p;
  // The last chunk whose first offset is <= offset holds it (chunks are
  // contiguous: each starts where the previous one ends).
  auto it = std::upper_bound(chunks_.begin(), chunks_.end(), offset,
                             [](uint64_t off, const Chunk& c) { return off < c.offset; });
  --it;
  const size_t skip = static_cast<size_t>(offset - it->offset);
  p.is_err = it->is_err;
  p.bytes = std::string_view(it->data).substr(skip, max);
  return p;
}

}  // namespace hutch::agent
