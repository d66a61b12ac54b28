#include "api/e2b/connect_envelope.h"

namespace hutch::api::e2b {

std::string EncodeEnvelope(uint8_t flags, std::string_view payload) {
  std::string out;
  out.reserve(5 + payload.size());
  const auto n = static_cast<uint32_t>(payload.size());
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(payload);
  return out;
}

std::string DataEnvelope(const nlohmann::json& message) {
  return EncodeEnvelope(0, message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string EndStreamEnvelope(const Error* error) {
  nlohmann::json end = nlohmann::json::object();
  if (error) end["error"] = ConnectErrorJson(*error);
  return EncodeEnvelope(kEnvelopeEndStream,
                        end.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<std::optional<Envelope>> EnvelopeReader::Next() {
  if (buf_.size() - pos_ < 5) return std::optional<Envelope>();
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
  const uint32_t n =
      (uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 8) | uint32_t{p[4]};
  if (n > max_)
    return MakeError(Code::kPayloadTooLarge,
                     "envelope of " + std::to_string(n) + " bytes exceeds " + std::to_string(max_));
  if (buf_.size() - pos_ < 5 + size_t{n}) return std::optional<Envelope>();
  Envelope e;
  e.flags = p[0];
  e.payload = buf_.substr(pos_ + 5, n);
  pos_ += 5 + n;
  // Keep the buffer from growing with consumed bytes, also on a long stream
  // that always has a partial envelope pending.
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > 64 * 1024) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return std::optional<Envelope>(std::move(e));
}

const char* ConnectCodeName(Code c) {
  switch (c) {
    case Code::kInvalidRequest:
      return "invalid_argument";
    case Code::kUnauthorized:
      return "unauthenticated";
    case Code::kSandboxNotFound:
    case Code::kTemplateNotFound:
    case Code::kSnapshotNotFound:
    case Code::kVolumeNotFound:
    case Code::kProcessNotFound:
    case Code::kFileNotFound:
    case Code::kNotFound:
      return "not_found";
    case Code::kConflict:
      return "already_exists";
    case Code::kSandboxNotRunning:
    case Code::kSandboxExpired:
      return "unavailable";
    case Code::kNotADirectory:
    case Code::kIsADirectory:
    case Code::kRangeNotSatisfiable:
    case Code::kBuildFailed:
      return "failed_precondition";
    case Code::kPermissionDenied:
    case Code::kForbidden:
      return "permission_denied";
    case Code::kPayloadTooLarge:
    case Code::kRateLimited:
    case Code::kCapacityExhausted:
    case Code::kNoSpace:
    case Code::kStorageFull:
    case Code::kSandboxResourceExhausted:
    case Code::kQuotaExceeded:
      return "resource_exhausted";
    case Code::kUnavailable:
    case Code::kPortUnreachable:
      return "unavailable";
    case Code::kNotSupported:
    case Code::kMethodNotAllowed:
      return "unimplemented";
    case Code::kHeadersTooLarge:
      return "invalid_argument";
    case Code::kAgentTimeout:
      return "deadline_exceeded";
    case Code::kInternal:
      return "internal";
  }
  return "unknown";
}

int ConnectHttpStatus(std::string_view c) {
  // The Connect protocol's table (error code -> HTTP status).
  if (c == "canceled") return 499;
  if (c == "invalid_argument" || c == "failed_precondition" || c == "out_of_range") return 400;
  if (c == "deadline_exceeded") return 504;
  if (c == "not_found") return 404;
  if (c == "already_exists" || c == "aborted") return 409;
  if (c == "permission_denied") return 403;
  if (c == "resource_exhausted") return 429;
  if (c == "unimplemented") return 501;
  if (c == "unavailable") return 503;
  if (c == "unauthenticated") return 401;
  return 500;  // unknown, internal, data_loss
}

nlohmann::json ConnectErrorJson(const Error& e) {
  return nlohmann::json{{"code", ConnectCodeName(e.code)}, {"message", e.message}};
}

}  // namespace hutch::api::e2b
