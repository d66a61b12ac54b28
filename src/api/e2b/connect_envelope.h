// The Connect RPC protocol's framing, as E2B's envd speaks it with the JSON
// codec: every message of a streaming call travels in an envelope (1 flag
// byte, 4-byte big-endian length, payload); the server's stream ends with
// an envelope flagged end-of-stream carrying {} or {"error":{...}}. Unary
// calls carry bare JSON and answer errors with an HTTP status and
// {"code":"<name>","message":...}. Pure functions: no I/O.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hutch::api::e2b {

inline constexpr uint8_t kEnvelopeCompressed = 0x01;
inline constexpr uint8_t kEnvelopeEndStream = 0x02;

struct Envelope {
  uint8_t flags = 0;
  std::string payload;
};

// One envelope around `payload`.
std::string EncodeEnvelope(uint8_t flags, std::string_view payload);
// A data message: envelope of the JSON text.
std::string DataEnvelope(const nlohmann::json& message);
// The end-of-stream envelope: {} when `error` is null, else
// {"error":{"code":..,"message":..}}.
std::string EndStreamEnvelope(const Error* error);

// Reads envelopes out of bytes received so far. Next() returns an envelope
// once it is complete; nullopt while more bytes are needed. A length above
// `max_payload` is an error (the caller answers resource_exhausted).
class EnvelopeReader {
 public:
  explicit EnvelopeReader(size_t max_payload) : max_(max_payload) {}
  void Feed(std::string_view bytes) { buf_.append(bytes); }
  Result<std::optional<Envelope>> Next();
  // Bytes received that do not yet form an envelope.
  size_t pending() const { return buf_.size() - pos_; }

 private:
  size_t max_;
  std::string buf_;
  size_t pos_ = 0;
};

// Connect's error code names ("not_found", ...) for hutch's codes, and the
// HTTP status a unary error answer carries for each name.
const char* ConnectCodeName(Code c);
int ConnectHttpStatus(std::string_view connect_code);
// The JSON of a Connect error: {"code":"not_found","message":"..."}.
nlohmann::json ConnectErrorJson(const Error& e);

}  // namespace hutch::api::e2b
