// The one table the jail's seccomp filter is built from (issue 32): every
// syscall a sandbox may make, every one it is refused with a reason, and
// Docker's default profile beside each row. A syscall the table does not
// name (one newer than the table, or one no workload needs) answers ENOSYS,
// so libc falls back to an older call where it has one.
//
// SeccompPolicy::Build compiles the table; SeccompTableMarkdown renders it
// for docs/security.md, and seccomp_table_test keeps the two in step.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace hutch::jail {

enum class SeccompAction {
  kAllow,   // always allowed
  kEperm,   // refused with EPERM (what a missing privilege answers)
  kEnosys,  // refused with ENOSYS (libc falls back, as on an older kernel)
  kArgs,    // allowed when an argument passes `filter`, refused otherwise
};

// A condition on one argument: `(arg & mask)` must be one of `allowed`;
// any other value is refused with `refuse_errno` (with values_are_refused,
// the list is of the refused values and any other is allowed). When the
// allowed value `refine_value` is chosen, a second argument must pass
// `refine` too (the netlink protocol of an AF_NETLINK socket). The mask
// defaults to the low 32 bits: the kernel reads these arguments as int,
// whatever the upper half of the register holds.
struct SeccompArgFilter {
  unsigned arg = 0;
  uint64_t mask = 0xffffffffu;
  std::span<const uint64_t> allowed;
  int refuse_errno = 0;
  const char* what = "";  // for the docs: what is allowed
  uint64_t refine_value = 0;
  const SeccompArgFilter* refine = nullptr;
  bool values_are_refused = false;
};

struct SeccompRule {
  const char* names;  // space-separated syscall names
  SeccompAction action;
  const SeccompArgFilter* filter;  // kArgs only
  const char* docker;              // Docker's default profile for these calls
  const char* why;
};

std::span<const SeccompRule> SeccompTable();

// The table as a Markdown table (one row per rule), for docs/security.md.
std::string SeccompTableMarkdown();

}  // namespace hutch::jail
