#include "api/e2b/connect_codec.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <array>
#include <memory>

#include "api/e2b/json_message.h"
#include "api/e2b/proto/filesystem.pb.h"
#include "api/e2b/proto/process.pb.h"

namespace hutch::api::e2b {

namespace pb = google::protobuf;

namespace {

// The .proto files' services. Naming a message of each generated file
// links that file into the binary (a static library drops what nothing
// names) and with it the descriptors it registers.
const pb::ServiceDescriptor* FindService(std::string_view name) {
  static const std::array<const pb::FileDescriptor*, 2> files = {
      ::process::ProcessConfig::descriptor()->file(),
      ::filesystem::EntryInfo::descriptor()->file()};
  for (const pb::FileDescriptor* f : files)
    for (int i = 0; i < f->service_count(); ++i)
      if (f->service(i)->full_name() == name) return f->service(i);
  return nullptr;
}

std::unique_ptr<pb::Message> NewMessage(const pb::Descriptor* type) {
  const pb::Message* prototype = pb::MessageFactory::generated_factory()->GetPrototype(type);
  return std::unique_ptr<pb::Message>(prototype->New());
}

Result<Json> DecodeJson(std::string_view payload) {
  if (payload.empty()) return Json::object();
  Json j = Json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return MakeError(Code::kInvalidRequest, "malformed JSON message");
  if (!j.is_object()) return MakeError(Code::kInvalidRequest, "a message must be a JSON object");
  return j;
}

}  // namespace

const pb::MethodDescriptor* ConnectCodec::FindMethod(std::string_view service,
                                                     std::string_view method) {
  const pb::ServiceDescriptor* s = FindService(service);
  return s ? s->FindMethodByName(std::string(method)) : nullptr;
}

bool ConnectCodec::ServerStreaming(const pb::MethodDescriptor* method) {
  return method->server_streaming();
}

std::optional<ConnectCodecKind> ConnectCodec::KindOf(std::string_view media_type, bool streaming) {
  if (media_type == (streaming ? "application/connect+json" : "application/json"))
    return ConnectCodecKind::kJson;
  if (media_type == (streaming ? "application/connect+proto" : "application/proto"))
    return ConnectCodecKind::kProto;
  return std::nullopt;
}

const char* ConnectCodec::ContentType(bool streaming) const {
  if (kind_ == ConnectCodecKind::kProto)
    return streaming ? "application/connect+proto" : "application/proto";
  return streaming ? "application/connect+json" : "application/json";
}

Result<Json> ConnectCodec::DecodeRequest(std::string_view payload) const {
  if (kind_ == ConnectCodecKind::kJson) return DecodeJson(payload);
  const pb::Descriptor* type = method_->input_type();
  auto m = NewMessage(type);
  if (!m->ParseFromArray(payload.data(), static_cast<int>(payload.size())))
    return MakeError(Code::kInvalidRequest,
                     "malformed protobuf message: not a " + type->full_name());
  // Proto3 JSON as the SDKs' JSON codec writes it: lowerCamelCase names,
  // defaults omitted (optional fields that are set are kept), enums by name.
  std::string text;
  if (auto st = pb::util::MessageToJsonString(*m, &text, pb::util::JsonPrintOptions()); !st.ok())
    return MakeError(Code::kInvalidRequest, "protobuf message " + type->full_name() +
                                                " has no JSON form: " + st.ToString());
  return DecodeJson(text);
}

Result<std::string> ConnectCodec::EncodeResponse(const Json& message) const {
  if (kind_ == ConnectCodecKind::kJson)
    return message.dump(-1, ' ', false, Json::error_handler_t::replace);
  const pb::Descriptor* type = method_->output_type();
  auto m = NewMessage(type);
  // Straight from the JSON value by reflection (json_message.h), not
  // through its text: protobuf's JSON parser costs 4x the rest on a large
  // stdout event. Strict: a field the answer type lacks is a handler's
  // mistake, and dropping it would hide it from the binary clients only.
  if (auto st = JsonToMessage(message, m.get()); !st.ok())
    return MakeError(Code::kInternal,
                     "answer does not fit " + type->full_name() + ": " + st.error().message);
  std::string out;
  if (!m->SerializeToString(&out))
    return MakeError(Code::kInternal, "cannot serialize " + type->full_name());
  return out;
}

}  // namespace hutch::api::e2b
