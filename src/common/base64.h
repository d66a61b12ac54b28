// Base64 (RFC 4648), the one codec every layer uses: file bytes in /v1
// JSON and SSE, E2B's protobuf-JSON `bytes`, template specs' `content_b64`,
// and the client reading them back.
#pragma once

#include <string>
#include <string_view>

namespace hutch {

// Standard alphabet, padded.
std::string Base64Encode(std::string_view in);

// Accepts the standard and the URL-safe alphabet, with or without padding
// ('=' only at the end). Returns false on any other character or a lone
// trailing character (not a whole byte); `out` is then unspecified.
bool Base64Decode(std::string_view in, std::string* out);

}  // namespace hutch
