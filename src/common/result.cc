#include "common/result.h"

namespace hutch {

const char* CodeName(Code c) {
  switch (c) {
    case Code::kInvalidRequest:
      return "invalid_request";
    case Code::kUnauthorized:
      return "unauthorized";
    case Code::kSandboxNotFound:
      return "sandbox_not_found";
    case Code::kTemplateNotFound:
      return "template_not_found";
    case Code::kSnapshotNotFound:
      return "snapshot_not_found";
    case Code::kVolumeNotFound:
      return "volume_not_found";
    case Code::kProcessNotFound:
      return "process_not_found";
    case Code::kFileNotFound:
      return "file_not_found";
    case Code::kConflict:
      return "conflict";
    case Code::kSandboxNotRunning:
      return "sandbox_not_running";
    case Code::kPayloadTooLarge:
      return "payload_too_large";
    case Code::kNotADirectory:
      return "not_a_directory";
    case Code::kIsADirectory:
      return "is_a_directory";
    case Code::kPermissionDenied:
      return "permission_denied";
    case Code::kRateLimited:
      return "rate_limited";
    case Code::kInternal:
      return "internal";
    case Code::kCapacityExhausted:
      return "capacity_exhausted";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kNotSupported:
      return "not_supported";
    case Code::kNotFound:
      return "not_found";
    case Code::kMethodNotAllowed:
      return "method_not_allowed";
    case Code::kNoSpace:
      return "no_space";
    case Code::kRangeNotSatisfiable:
      return "range_not_satisfiable";
    case Code::kSandboxResourceExhausted:
      return "sandbox_resource_exhausted";
    case Code::kSandboxExpired:
      return "sandbox_expired";
    case Code::kHeadersTooLarge:
      return "headers_too_large";
    case Code::kStorageFull:
      return "storage_full";
    case Code::kBuildFailed:
      return "build_failed";
    case Code::kPortUnreachable:
      return "port_unreachable";
    case Code::kAgentTimeout:
      return "agent_timeout";
    case Code::kForbidden:
      return "forbidden";
    case Code::kQuotaExceeded:
      return "quota_exceeded";
  }
  return "internal";
}

int CodeHttpStatus(Code c) {
  switch (c) {
    case Code::kInvalidRequest:
      return 400;
    case Code::kUnauthorized:
      return 401;
    case Code::kSandboxNotFound:
    case Code::kTemplateNotFound:
    case Code::kSnapshotNotFound:
    case Code::kVolumeNotFound:
    case Code::kProcessNotFound:
    case Code::kFileNotFound:
    case Code::kNotFound:
      return 404;
    case Code::kMethodNotAllowed:
      return 405;
    case Code::kConflict:
    case Code::kSandboxNotRunning:
    case Code::kSandboxResourceExhausted:
    case Code::kSandboxExpired:
      return 409;
    case Code::kPayloadTooLarge:
      return 413;
    case Code::kNotADirectory:
    case Code::kIsADirectory:
    case Code::kPermissionDenied:
    case Code::kNoSpace:
    case Code::kBuildFailed:
      return 422;
    case Code::kRangeNotSatisfiable:
      return 416;
    case Code::kHeadersTooLarge:
      return 431;
    case Code::kStorageFull:
      return 507;
    case Code::kPortUnreachable:
      return 502;
    case Code::kAgentTimeout:
      return 504;
    case Code::kForbidden:
    case Code::kQuotaExceeded:
      return 403;
    case Code::kRateLimited:
      return 429;
    case Code::kInternal:
      return 500;
    case Code::kNotSupported:
      return 501;
    case Code::kCapacityExhausted:
    case Code::kUnavailable:
      return 503;
  }
  return 500;
}

bool CodeRetryable(Code c) {
  return c == Code::kRateLimited || c == Code::kCapacityExhausted || c == Code::kUnavailable ||
         c == Code::kInternal || c == Code::kStorageFull || c == Code::kPortUnreachable ||
         c == Code::kAgentTimeout;
}

Code CodeFromErrno(int err) {
  switch (err) {
    case ENOENT:
      return Code::kFileNotFound;
    case ENOTDIR:
      return Code::kNotADirectory;
    case EISDIR:
      return Code::kIsADirectory;
    case EACCES:
    case EPERM:
    case EROFS:
      return Code::kPermissionDenied;
    case ENOSPC:
    case EDQUOT:
      return Code::kNoSpace;
    case EEXIST:
    case ENOTEMPTY:
      return Code::kConflict;
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP:
      return Code::kInvalidRequest;
    default:
      return Code::kInternal;
  }
}

}  // namespace hutch
