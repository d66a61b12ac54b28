// The codec of one envd Connect call, chosen at the edge from its
// Content-Type: the JSON codec (application/json, application/connect+json)
// or the binary protobuf codec (application/proto, application/connect+proto,
// what connect-go clients such as go-e2b send). The handlers see one
// request representation whatever the codec: the message's proto3 JSON
// (proto_json.h). A binary request is parsed into the method's message
// type (src/api/e2b/proto) and printed as proto3 JSON; an answer is built
// as proto3 JSON and, for a binary call, written into the answer's message
// type (json_message.h) and serialized. So each RPC has one implementation, and the .proto
// files decide the binary wire alone. Pure functions: no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/e2b/proto_json.h"
#include "common/result.h"

namespace google::protobuf {
class MethodDescriptor;
}

namespace hutch::api::e2b {

enum class ConnectCodecKind { kJson, kProto };

class ConnectCodec {
 public:
  // JSON with no method known: what a stream that failed before its codec
  // was decided, or a test, uses.
  ConnectCodec() = default;

  // The method `service`/`method` ("process.Process", "Start") as the
  // .proto files declare it; nullptr when they do not.
  static const google::protobuf::MethodDescriptor* FindMethod(std::string_view service,
                                                              std::string_view method);
  // Whether `method` (not null) answers with a server stream.
  static bool ServerStreaming(const google::protobuf::MethodDescriptor* method);
  // The codec a request's media type (lower case, no parameters) names
  // for a unary (`streaming` false) or server-streaming call; nullopt
  // when it names none Connect allows there (the caller answers 415).
  static std::optional<ConnectCodecKind> KindOf(std::string_view media_type, bool streaming);

  // `method` may be null only for the JSON codec (a method hutch routes
  // but the .proto files lack: its handler answers it).
  ConnectCodec(ConnectCodecKind kind, const google::protobuf::MethodDescriptor* method)
      : kind_(kind), method_(method) {}

  ConnectCodecKind kind() const { return kind_; }
  // The Content-Type of an answer (a unary one, or a stream's).
  const char* ContentType(bool streaming) const;

  // A request message's payload as the handlers read it: a JSON object.
  // A payload that is not a message of the method's request type is
  // invalid_request (Connect's invalid_argument).
  Result<Json> DecodeRequest(std::string_view payload) const;
  // An answer message (one a handler built as proto3 JSON) in this codec.
  // internal when it does not fit the method's answer type: a handler bug.
  Result<std::string> EncodeResponse(const Json& message) const;

 private:
  ConnectCodecKind kind_ = ConnectCodecKind::kJson;
  const google::protobuf::MethodDescriptor* method_ = nullptr;
};

}  // namespace hutch::api::e2b
