#include "driver/jail/seccomp_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"
#include "driver/jail/seccomp_table.h"

namespace hutch::jail {

namespace {

struct CtxDeleter {
  void operator()(void* c) const { seccomp_release(static_cast<scmp_filter_ctx>(c)); }
};

// A set of masked argument values as MASKED_EQ comparisons: the values of
// `(arg & mask)` are numbers of popcount(mask) bits; a block of them that
// shares its top bits is one comparison on those bits. Splitting the
// complement of a value list into such blocks gives rules that never
// overlap the list's own, so libseccomp's order of evaluation cannot
// matter (it has no "not in" and takes one comparison per argument).
struct Block {
  uint64_t mask;
  uint64_t datum;
};

std::vector<Block> ComplementBlocks(uint64_t mask, std::span<const uint64_t> values) {
  std::vector<unsigned> bits;  // positions of the mask's bits, low to high
  for (unsigned b = 0; b < 64; ++b)
    if (mask & (uint64_t{1} << b)) bits.push_back(b);
  const unsigned k = static_cast<unsigned>(bits.size());
  auto expand = [&](uint64_t c) {
    uint64_t v = 0;
    for (unsigned i = 0; i < k; ++i)
      if (c & (uint64_t{1} << i)) v |= uint64_t{1} << bits[i];
    return v;
  };
  auto compress = [&](uint64_t v) {
    uint64_t c = 0;
    for (unsigned i = 0; i < k; ++i)
      if (v & (uint64_t{1} << bits[i])) c |= uint64_t{1} << i;
    return c;
  };
  std::vector<uint64_t> taken;
  for (uint64_t v : values) taken.push_back(compress(v & mask));
  std::sort(taken.begin(), taken.end());
  const uint64_t top = k == 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1;
  std::vector<Block> out;
  auto cover = [&](uint64_t lo, uint64_t hi) {  // [lo, hi], compressed
    while (lo <= hi) {
      unsigned n = 0;  // the largest aligned block from lo inside [lo, hi]
      while (n < k && (lo & (uint64_t{1} << n)) == 0 && lo + (uint64_t{2} << n) - 1 <= hi) ++n;
      uint64_t m = 0;
      for (unsigned i = n; i < k; ++i) m |= uint64_t{1} << bits[i];
      out.push_back({m, expand(lo)});
      const uint64_t size = uint64_t{1} << n;
      if (hi - lo < size) break;
      lo += size;
    }
  };
  uint64_t next = 0;
  bool done = false;
  for (uint64_t t : taken) {
    if (t > next) cover(next, t - 1);
    if (t == top) {
      done = true;
      break;
    }
    next = std::max(next, t + 1);
  }
  if (!done) cover(next, top);
  return out;
}

Status AddRule(scmp_filter_ctx ctx, uint32_t action, int nr, const char* name,
               std::initializer_list<scmp_arg_cmp> cmps) {
  std::vector<scmp_arg_cmp> v(cmps);
  if (int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(v.size()), v.data());
      rc < 0)
    return ErrnoError(std::string("seccomp rule ") + name, -rc);
  return {};
}

scmp_arg_cmp Masked(unsigned arg, uint64_t mask, uint64_t datum) {
  return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, mask, datum};
}

// The rules of one kArgs row for one syscall.
Status AddArgRules(scmp_filter_ctx ctx, int nr, const char* name, const SeccompArgFilter& f) {
  const uint32_t refuse = SCMP_ACT_ERRNO(static_cast<uint32_t>(f.refuse_errno));
  const uint32_t listed = f.values_are_refused ? refuse : SCMP_ACT_ALLOW;
  const uint32_t others = f.values_are_refused ? SCMP_ACT_ALLOW : refuse;
  for (uint64_t v : f.allowed) {
    if (f.refine != nullptr && v == f.refine_value) {
      const SeccompArgFilter& g = *f.refine;
      for (uint64_t w : g.allowed)
        if (auto st = AddRule(ctx, listed, nr, name,
                              {Masked(f.arg, f.mask, v), Masked(g.arg, g.mask, w)});
            !st.ok())
          return st;
      for (const Block& b : ComplementBlocks(g.mask, g.allowed))
        if (auto st = AddRule(ctx, SCMP_ACT_ERRNO(static_cast<uint32_t>(g.refuse_errno)), nr, name,
                              {Masked(f.arg, f.mask, v), Masked(g.arg, b.mask, b.datum)});
            !st.ok())
          return st;
      continue;
    }
    if (auto st = AddRule(ctx, listed, nr, name, {Masked(f.arg, f.mask, v)}); !st.ok()) return st;
  }
  for (const Block& b : ComplementBlocks(f.mask, f.allowed))
    if (auto st = AddRule(ctx, others, nr, name, {Masked(f.arg, b.mask, b.datum)}); !st.ok())
      return st;
  return {};
}

}  // namespace

Result<SeccompPolicy> SeccompPolicy::Build() {
  // An allow-list: what the table does not name answers ENOSYS.
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ERRNO(ENOSYS)));
  if (!ctx) return MakeError(Code::kInternal, "seccomp_init failed");
  // A syscall from a foreign ABI (int 0x80 / x32) bypasses the per-arch
  // numbers below: kill the process instead of letting it through.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc < 0)
    return ErrnoError("seccomp badarch", -rc);
  // A binary tree over syscall numbers instead of a chain of ~300 tests.
  (void)seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);

  for (const SeccompRule& row : SeccompTable()) {
    std::string_view names = row.names;
    while (!names.empty()) {
      const size_t sp = names.find(' ');
      const std::string name(names.substr(0, sp));
      names = sp == std::string_view::npos ? std::string_view() : names.substr(sp + 1);
      // Not on this arch, or newer than this libseccomp: it stays ENOSYS.
      const int nr = seccomp_syscall_resolve_name(name.c_str());
      if (nr < 0) continue;
      Status st;
      switch (row.action) {
        case SeccompAction::kAllow:
          st = AddRule(ctx.get(), SCMP_ACT_ALLOW, nr, name.c_str(), {});
          break;
        case SeccompAction::kEperm:
          st = AddRule(ctx.get(), SCMP_ACT_ERRNO(EPERM), nr, name.c_str(), {});
          break;
        // The default action already (libseccomp refuses a rule that
        // repeats it): the row documents the choice.
        case SeccompAction::kEnosys:
          break;
        case SeccompAction::kArgs:
          st = AddArgRules(ctx.get(), nr, name.c_str(), *row.filter);
          break;
      }
      if (!st.ok()) return st.error();
    }
  }

  // Export the compiled BPF through a memfd and keep it in memory.
  UniqueFd mfd(memfd_create("hutch-seccomp", MFD_CLOEXEC));
  if (!mfd) return ErrnoError("memfd_create");
  if (int rc = seccomp_export_bpf(ctx.get(), mfd.get()); rc < 0)
    return ErrnoError("seccomp_export_bpf", -rc);
  off_t size = lseek(mfd.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0)
    return MakeError(Code::kInternal, "seccomp export produced " + std::to_string(size) + " bytes");
  SeccompPolicy p;
  p.filter_.resize(static_cast<size_t>(size) / sizeof(sock_filter));
  if (pread(mfd.get(), p.filter_.data(), static_cast<size_t>(size), 0) != size)
    return ErrnoError("read seccomp program");
  p.Point();
  return p;
}

}  // namespace hutch::jail
