// The server side of one Connect server-streaming response: 200 with
// application/connect+json or application/connect+proto (the request's
// codec), each message in an envelope, and always the end-of-stream
// envelope last (success or error; JSON in either codec, as the protocol
// says), which the SDKs require.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "api/e2b/connect_codec.h"
#include "api/e2b/connect_envelope.h"
#include "http/http_context.h"

namespace hutch::api::e2b {

class ConnectStream {
 public:
  ConnectStream(HttpContext& ctx, ConnectCodec codec) : ctx_(ctx), codec_(codec) {}
  // Sends one message (the response begins with the first one). A message
  // the codec cannot encode ends the stream with that error.
  asio::awaitable<Status> Send(const nlohmann::json& message);
  // Ends the stream: clean when `error` is null. Only the first call counts.
  asio::awaitable<void> End(const Error* error);
  bool broken() const { return broken_; }

 private:
  asio::awaitable<Status> Begin();
  HttpContext& ctx_;
  ConnectCodec codec_;
  bool begun_ = false;
  bool broken_ = false;
  bool ended_ = false;
};

// A unary answer: 200 with the message in the call's codec, or the Connect
// error's status with {"code","message"} (JSON in either codec).
asio::awaitable<void> SendUnary(HttpContext& ctx, const Result<nlohmann::json>& r,
                                const ConnectCodec& codec);

}  // namespace hutch::api::e2b
