// SHA-256 as lowercase hex: how API keys are stored and compared, and how
// an Idempotency-Key's request body is remembered without keeping it.
#pragma once

#include <string>
#include <string_view>

namespace hutch {

std::string Sha256Hex(std::string_view data);

}  // namespace hutch
