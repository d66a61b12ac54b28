// Proto3's canonical JSON mapping, the subset E2B's envd messages use:
// lowerCamelCase keys, int64 as decimal strings, bytes as base64, enums by
// name (numbers accepted on input), google.protobuf.Timestamp as RFC 3339,
// and default values omitted on output. Readers are lenient where the
// mapping says parsers must be (numbers as strings, both base64 alphabets,
// null = default) and strict about types otherwise.
#pragma once

#include "common/base64.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace hutch::api::e2b {

using Json = nlohmann::json;

// Reads field `key` of message `m` (absent or null: the default).
Result<std::string> PjString(const Json& m, const char* key);
Result<bool> PjBool(const Json& m, const char* key);
Result<uint32_t> PjUint32(const Json& m, const char* key);
Result<int64_t> PjInt64(const Json& m, const char* key);
// bytes: standard or URL-safe base64, padding optional.
Result<std::string> PjBytes(const Json& m, const char* key);
// A sub-message; absent or null reads as {}.
Result<Json> PjMessage(const Json& m, const char* key);
// map<string,string>.
Result<std::vector<std::pair<std::string, std::string>>> PjStringMap(const Json& m,
                                                                     const char* key);
Result<std::vector<std::string>> PjStringList(const Json& m, const char* key);
// An enum given by name or number; `names` maps each known name to its number.
Result<int> PjEnum(const Json& m, const char* key,
                   const std::vector<std::pair<const char*, int>>& names);

// Output helpers (defaults omitted by the caller's choice of setter).
inline std::string PjBase64(std::string_view bytes) { return Base64Encode(bytes); }
// int64 as proto3 JSON writes it: a decimal string.
inline std::string PjInt64String(int64_t v) { return std::to_string(v); }
// Seconds (and nanoseconds) since the epoch as an RFC 3339 UTC timestamp.
std::string PjTimestamp(int64_t unix_seconds, int32_t nanos = 0);

}  // namespace hutch::api::e2b
