#include "api/mcp/mcp_protocol.h"

#include <algorithm>

namespace hutch::api::mcp {

const std::vector<std::string>& ProtocolVersions() {
  static const std::vector<std::string> v = {"2025-11-25", "2025-06-18", "2025-03-26",
                                             "2024-11-05"};
  return v;
}

bool SupportedVersion(const std::string& v) {
  const auto& all = ProtocolVersions();
  return std::find(all.begin(), all.end(), v) != all.end();
}

Message Classify(const json& j) {
  Message m;
  if (!j.is_object()) {
    m.why = "a JSON-RPC message must be an object";
    return m;
  }
  if (j.value("jsonrpc", "") != "2.0") {
    m.why = "\"jsonrpc\" must be \"2.0\"";
    return m;
  }
  const bool has_id = j.contains("id");
  if (has_id) {
    const json& id = j["id"];
    if (!id.is_string() && !id.is_number_integer()) {
      m.why = "\"id\" must be a string or an integer";
      return m;
    }
    m.id = id;
  }
  if (j.contains("method")) {
    if (!j["method"].is_string()) {
      m.why = "\"method\" must be a string";
      return m;
    }
    m.method = j["method"];
    if (j.contains("params") && !j["params"].is_null()) {
      if (!j["params"].is_object()) {
        m.why = "\"params\" must be an object";
        return m;
      }
      m.params = j["params"];
    }
    m.kind = has_id ? Message::kRequest : Message::kNotification;
    return m;
  }
  if (has_id && (j.contains("result") || j.contains("error"))) {
    m.kind = Message::kResponse;
    return m;
  }
  m.why = "neither a request, a notification nor a response";
  return m;
}

json ResultMessage(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json ErrorMessage(const json& id, int code, const std::string& message) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

}  // namespace hutch::api::mcp
