#include "api/common/output_budget.h"

#include <algorithm>

namespace hutch::api {

bool OutputBudget::Lease::TryGrow(size_t n) {
  if (n == 0) return true;
  const size_t limit = b_->total_ == 0 ? SIZE_MAX : b_->Limit(held_ + n);
  size_t used = b_->used_.load(std::memory_order_relaxed);
  do {
    if (used > limit || limit - used < n) return false;
  } while (!b_->used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  held_ += n;
  return true;
}

size_t OutputBudget::Lease::Room() const {
  if (b_->total_ == 0) return SIZE_MAX;
  const size_t used = b_->used_.load(std::memory_order_relaxed);
  auto room_under = [&](size_t limit) { return used < limit ? limit - used : 0; };
  // Up to kSmallAnswer held, the whole budget; beyond it, three quarters.
  const size_t small =
      held_ < kSmallAnswer ? std::min(kSmallAnswer - held_, room_under(b_->total_)) : 0;
  return std::max(small, room_under(b_->total_ - b_->total_ / 4));
}

void OutputBudget::Lease::Release(size_t n) {
  n = std::min(n, held_);
  held_ -= n;
  if (n) b_->used_.fetch_sub(n, std::memory_order_relaxed);
}

}  // namespace hutch::api
