// A proto3 JSON value, as the envd handlers build it, written into a
// protobuf message by reflection: the answer side of the protobuf codec
// (connect_codec.h) without printing the JSON and parsing it again, which
// protobuf's own JSON parser makes slow for large `bytes` (stdout events).
// Proto3 JSON's rules for the types envd's messages use: lowerCamelCase
// or proto field names, int64 as decimal strings or numbers, bytes as
// base64 (either alphabet), enums by name or number,
// google.protobuf.Timestamp as RFC 3339, map<string, V> as objects, null
// as the default. Strict otherwise: an unknown field or a value of the
// wrong type is an error naming the field.
#pragma once

#include <string>

#include "api/e2b/proto_json.h"
#include "common/result.h"

namespace google::protobuf {
class Message;
}

namespace hutch::api::e2b {

// Sets the fields `value` (a JSON object) names on `out`.
Status JsonToMessage(const Json& value, google::protobuf::Message* out);

}  // namespace hutch::api::e2b
