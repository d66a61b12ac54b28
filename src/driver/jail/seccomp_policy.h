// The seccomp filter every sandbox process runs under.
//
// Built once with libseccomp at driver start and exported to raw BPF, so the
// child between clone() and exec() can install it with one prctl() and no
// allocation (libseccomp's seccomp_load mallocs, which is not
// async-signal-safe after clone() from a multithreaded hutchd).
#pragma once

#include <linux/filter.h>

#include <vector>

#include "common/result.h"

namespace hutch::jail {

class SeccompPolicy {
 public:
  // Builds the allow-list policy from the table in seccomp_table.h.
  static Result<SeccompPolicy> Build();
  // A sock_fprog that points into this object; valid while it lives.
  const sock_fprog* program() const { return &prog_; }
  size_t instructions() const { return filter_.size(); }

  SeccompPolicy(const SeccompPolicy&) = delete;
  SeccompPolicy& operator=(const SeccompPolicy&) = delete;
  SeccompPolicy(SeccompPolicy&& o) noexcept : filter_(std::move(o.filter_)) { Point(); }
  SeccompPolicy& operator=(SeccompPolicy&& o) noexcept {
    filter_ = std::move(o.filter_);
    Point();
    return *this;
  }

 private:
  SeccompPolicy() = default;
  void Point() {
    prog_.len = static_cast<unsigned short>(filter_.size());
    prog_.filter = filter_.data();
  }
  std::vector<sock_filter> filter_;
  sock_fprog prog_{};
};

}  // namespace hutch::jail
