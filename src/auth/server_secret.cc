#include "auth/server_secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/unique_fd.h"

namespace hutch::auth {

namespace {

constexpr size_t kMinSecretBytes = 32;  // hex characters of 16 random bytes

Result<std::string> ReadSecret(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return ErrnoError("stat " + path, errno);
  if ((st.st_mode & 077) != 0)
    return MakeError(Code::kInvalidRequest,
                     "server secret " + path + " may be read by other users (chmod 600 it)");
  std::ifstream in(path);
  if (!in) return MakeError(Code::kInternal, "cannot read server secret " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.size() < kMinSecretBytes)
    return MakeError(Code::kInvalidRequest, "server secret " + path + " is shorter than " +
                                                std::to_string(kMinSecretBytes) + " characters");
  return s;
}

}  // namespace

Result<std::string> LoadOrCreateServerSecret(const std::string& path) {
  if (access(path.c_str(), F_OK) == 0) return ReadSecret(path);
  const std::string secret = RandomHex(32);
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return ErrnoError("create " + tmp, errno);
  const std::string line = secret + "\n";
  if (write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
      fsync(fd.get()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    return ErrnoError("write " + tmp, e);
  }
  fd.reset();
  // link() rather than rename(): two hutchds racing on a fresh state dir
  // both keep the one secret that landed first.
  if (link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    const int e = errno;
    unlink(tmp.c_str());
    return ErrnoError("install " + path, e);
  }
  unlink(tmp.c_str());
  return ReadSecret(path);
}

}  // namespace hutch::auth
