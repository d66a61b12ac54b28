// OutputBudget: the bytes that every blocking exec answer being gathered or
// written may hold at once, server-wide (--exec-buffer-budget-mb), counted
// after encoding (what the answer will carry). A request takes a Lease and
// grows it as it keeps output; what does not fit is dropped and the answer
// says it was truncated, so many big answers at once cost the server a
// bounded amount of memory instead of growing it (issue 32 #3).
//
// A quarter of the budget is kept for small answers: a request may grow
// past kSmallAnswer only while less than three quarters are in use, so a
// few floods cannot leave a neighbour's `echo ok` without room.
//
// Thread-safe (an atomic count); a Lease is used by one request at a time.
#pragma once

#include <atomic>
#include <cstddef>

namespace hutch::api {

class OutputBudget {
 public:
  // What a request may always hold from the whole budget.
  static constexpr size_t kSmallAnswer = 64 << 10;

  // `total` 0: no server-wide bound (each request still has its own cap).
  explicit OutputBudget(size_t total) : total_(total) {}
  OutputBudget(const OutputBudget&) = delete;
  OutputBudget& operator=(const OutputBudget&) = delete;

  class Lease {
   public:
    explicit Lease(OutputBudget* b) : b_(b) {}
    ~Lease() { Release(held_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // Grows the lease by `n` bytes if the budget has room; false: nothing taken.
    bool TryGrow(size_t n);
    // The most TryGrow could take now.
    size_t Room() const;
    // Gives back `n` bytes (at most what is held).
    void Release(size_t n);
    size_t held() const { return held_; }

   private:
    OutputBudget* b_;
    size_t held_ = 0;
  };

  size_t total() const { return total_; }
  // Held by all leases now (counted without a bound too: /metrics).
  size_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  // How far the server-wide count may go for a request that would hold
  // `after` bytes.
  size_t Limit(size_t after) const { return after <= kSmallAnswer ? total_ : total_ - total_ / 4; }
  const size_t total_;
  std::atomic<size_t> used_{0};
};

}  // namespace hutch::api
