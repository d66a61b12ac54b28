// Signed file URLs of E2B's envd (the SDK's downloadUrl/uploadUrl): a
// `GET`/`POST /files` that carries `signature` (and optionally
// `signature_expiration`) in its query instead of X-Access-Token, so a
// client holding only the URL (a browser, curl) may read or write that one
// path as that one user until the expiry. The SDK signs on its side with
// the sandbox's envd access token, which hutch derives again here.
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace hutch::api::e2b {

enum class FileOperation { kRead, kWrite };

// The v1 signature of `path` for `op` as `user` ("" for the default user),
// under `token`, with `expiration` (unix seconds; 0: none):
// "v1_" + unpadded base64 of SHA-256("path:op:user:token[:expiration]").
std::string FileSignature(std::string_view path, FileOperation op, std::string_view user,
                          std::string_view token, int64_t expiration);

// Checks a request's `signature` / `signature_expiration` (as given in its
// query; `expiration_text` empty when absent) against `token` at `now`:
// unauthorized when it does not match or has expired, saying which.
Status CheckFileSignature(std::string_view signature, std::string_view expiration_text,
                          std::string_view path, FileOperation op, std::string_view user,
                          std::string_view token, SysTime now);

}  // namespace hutch::api::e2b
