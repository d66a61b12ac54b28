#include "driver/vm/sealed_ram.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace hutch::vm {

namespace {

bool AllZero(const char* p, size_t n) {
  return std::all_of(p, p + n, [](char c) { return c == 0; });
}

}  // namespace

Result<UniqueFd> SealedCopy(const std::string& path) {
  UniqueFd src(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!src) return ErrnoError("open " + path);
  struct stat st;
  if (fstat(src.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return MakeError(Code::kInternal, path + " is no regular file");
  UniqueFd mem(memfd_create("hutch-guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!mem) return ErrnoError("memfd_create");
  if (ftruncate(mem.get(), st.st_size) != 0) return ErrnoError("size the guest RAM memfd");
  // Data extents only, and within them only pages that are not zero (the
  // rest is zero once allocated below).
  std::vector<char> buf(1 << 20);
  off_t pos = 0;
  while (pos < st.st_size) {
    off_t data = lseek(src.get(), pos, SEEK_DATA);
    if (data < 0) break;  // ENXIO: no data after pos
    off_t hole = lseek(src.get(), data, SEEK_HOLE);
    if (hole < 0) hole = st.st_size;
    for (off_t off = data; off < hole;) {
      const size_t want =
          static_cast<size_t>(std::min<off_t>(static_cast<off_t>(buf.size()), hole - off));
      ssize_t n = pread(src.get(), buf.data(), want, off);
      if (n <= 0) return ErrnoError("read " + path);
      for (ssize_t page = 0; page < n; page += 4096) {
        const size_t len = static_cast<size_t>(std::min<ssize_t>(4096, n - page));
        if (AllZero(buf.data() + page, len)) continue;
        if (pwrite(mem.get(), buf.data() + page, len, off + page) != static_cast<ssize_t>(len))
          return ErrnoError("copy guest RAM into its memfd");
      }
      off += n;
    }
    pos = hole;
  }
  if (fallocate(mem.get(), 0, 0, st.st_size) != 0)
    return ErrnoError("allocate the guest RAM memfd");
  if (fcntl(mem.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    return ErrnoError("seal the guest RAM memfd");
  return mem;
}

}  // namespace hutch::vm
