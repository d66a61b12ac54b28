// Result<T>: the error convention of the whole codebase (see ARCHITECTURE.md).
//
// A fallible function returns Result<T>: either a value or an Error that
// carries a stable machine code (mapped to an HTTP status only at the API
// edge), the errno when a syscall failed, and a message to which each layer
// prepends its context ("create sb_1: mount overlay: EPERM").
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace hutch {

// Stable error codes. They are the `code` strings of the /v1 API.
enum class Code {
  kInvalidRequest,
  kUnauthorized,
  kSandboxNotFound,
  kTemplateNotFound,
  kSnapshotNotFound,
  kVolumeNotFound,
  kProcessNotFound,
  kFileNotFound,
  kConflict,
  kSandboxNotRunning,
  kPayloadTooLarge,
  kNotADirectory,
  kIsADirectory,
  kPermissionDenied,
  kRateLimited,
  kInternal,
  kCapacityExhausted,
  kUnavailable,
  kNotSupported,
  kNotFound,  // route not found
  kMethodNotAllowed,
  kNoSpace,
  kRangeNotSatisfiable,
  kSandboxResourceExhausted,  // the sandbox hit its own process/memory limit
  kSandboxExpired,            // the sandbox's TTL ran out (it was deleted)
  kHeadersTooLarge,
  kStorageFull,      // the host's state dir is full (not the sandbox's own disk)
  kBuildFailed,      // a template build step failed (its step, exit code and log tail go with it)
  kPortUnreachable,  // nothing accepts connections on a sandbox's port (proxy)
  kAgentTimeout,     // the sandbox's agent did not answer in time (stopped, starved)
  kForbidden,        // the key's role may not do this (a tenant key on an admin route)
  kQuotaExceeded,    // a tenant key is at its quota of sandboxes, snapshots, volumes, ...
};

const char* CodeName(Code c);
int CodeHttpStatus(Code c);
bool CodeRetryable(Code c);

struct Error {
  Code code = Code::kInternal;
  int err = 0;  // errno, 0 when not a syscall failure
  std::string message;

  // Returns a copy with `context: ` prepended to the message.
  Error Context(const std::string& ctx) const {
    Error e = *this;
    e.message = ctx + ": " + message;
    return e;
  }
};

inline Error MakeError(Code code, std::string message) {
  return Error{code, 0, std::move(message)};
}

// Error from the current errno; `what` names the failed operation.
inline Error ErrnoError(const std::string& what, int err = errno) {
  return Error{Code::kInternal, err, what + ": " + std::strerror(err)};
}

// Maps a filesystem errno to the API code users switch on.
Code CodeFromErrno(int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}      // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace hutch

// Propagates an error, adding context. Usage:
//   HUTCH_CHECK_OK(WriteFile(path, v), "memory limit");
#define HUTCH_CHECK_OK(expr, ctx)                 \
  do {                                            \
    auto _r = (expr);                             \
    if (!_r.ok()) return _r.error().Context(ctx); \
  } while (0)
