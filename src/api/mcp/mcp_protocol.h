// The Model Context Protocol's JSON-RPC layer as hutch speaks it on /mcp:
// the protocol revisions it accepts, message shapes, and error objects.
// The transport (Streamable HTTP) is in mcp_routes.cc; tools in
// mcp_tools.h. Facts from the MCP specification (docs/mcp.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hutch::api::mcp {

using nlohmann::json;

// Newest first: initialize answers with the client's revision when it is
// one of these, else with the newest.
const std::vector<std::string>& ProtocolVersions();
bool SupportedVersion(const std::string& v);
// What a request without MCP-Protocol-Version means (the revision before
// the header existed, as the specification says to assume).
inline constexpr const char* kDefaultHeaderVersion = "2025-03-26";

// JSON-RPC 2.0 error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

// One incoming message, classified.
struct Message {
  enum Kind { kRequest, kNotification, kResponse, kInvalid } kind = kInvalid;
  json id;             // requests and responses
  std::string method;  // requests and notifications
  json params;         // an object, or null
  std::string why;     // kInvalid: what is wrong
};

Message Classify(const json& j);

json ResultMessage(const json& id, json result);
json ErrorMessage(const json& id, int code, const std::string& message);

}  // namespace hutch::api::mcp
