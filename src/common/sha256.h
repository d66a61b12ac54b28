// SHA-256 as lowercase hex: how API keys are stored and compared, and how
// an Idempotency-Key's request body is remembered without keeping it; and
// its HMAC, which per-sandbox tokens are (auth/sandbox_token.h).
#pragma once

#include <string>
#include <string_view>

namespace hutch {

std::string Sha256Hex(std::string_view data);
// HMAC-SHA-256 of `data` under `key`, as lowercase hex ("" on failure).
std::string HmacSha256Hex(std::string_view key, std::string_view data);

}  // namespace hutch
