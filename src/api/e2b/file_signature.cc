// E2B's v1 file URL signature (see file_signature.h).
#include "api/e2b/file_signature.h"

#include <charconv>

#include "auth/credentials.h"
#include "common/base64.h"
#include "common/sha256.h"

namespace hutch::api::e2b {

namespace {

// The raw 32 bytes of a SHA-256 from its hex form.
std::string HexBytes(std::string_view hex) {
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    unsigned v = 0;
    std::from_chars(hex.data() + i, hex.data() + i + 2, v, 16);
    out.push_back(static_cast<char>(v));
  }
  return out;
}

}  // namespace

std::string FileSignature(std::string_view path, FileOperation op, std::string_view user,
                          std::string_view token, int64_t expiration) {
  std::string raw;
  raw.append(path).append(":").append(op == FileOperation::kRead ? "read" : "write");
  raw.append(":").append(user).append(":").append(token);
  if (expiration != 0) raw.append(":").append(std::to_string(expiration));
  std::string b64 = Base64Encode(HexBytes(Sha256Hex(raw)));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "v1_" + b64;
}

Status CheckFileSignature(std::string_view signature, std::string_view expiration_text,
                          std::string_view path, FileOperation op, std::string_view user,
                          std::string_view token, SysTime now) {
  int64_t expiration = 0;
  if (!expiration_text.empty()) {
    const char* end = expiration_text.data() + expiration_text.size();
    auto [p, ec] = std::from_chars(expiration_text.data(), end, expiration);
    if (ec != std::errc() || p != end || expiration <= 0)
      return MakeError(Code::kUnauthorized,
                       "malformed signature_expiration '" + std::string(expiration_text) + "'");
  }
  const std::string want = FileSignature(path, op, user, token, expiration);
  if (!auth::SecretEquals(signature, want))
    return MakeError(Code::kUnauthorized,
                     "invalid signature for this path, operation and user (signed URLs are made "
                     "with the sandbox's envdAccessToken)");
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (expiration != 0 && expiration < now_s)
    return MakeError(Code::kUnauthorized,
                     "the signed URL expired at " + std::to_string(expiration) + " (unix seconds)");
  return Status{};
}

}  // namespace hutch::api::e2b
