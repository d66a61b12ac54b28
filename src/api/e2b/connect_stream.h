// The server side of one Connect server-streaming response: 200 with
// application/connect+json, each message in an envelope, and always the
// end-of-stream envelope last (success or error), which the SDK requires.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "api/e2b/connect_envelope.h"
#include "http/http_context.h"

namespace hutch::api::e2b {

class ConnectStream {
 public:
  explicit ConnectStream(HttpContext& ctx) : ctx_(ctx) {}
  // Sends one message (the response begins with the first one).
  asio::awaitable<Status> Send(const nlohmann::json& message);
  // Ends the stream: clean when `error` is null.
  asio::awaitable<void> End(const Error* error);
  bool broken() const { return broken_; }

 private:
  asio::awaitable<Status> Begin();
  HttpContext& ctx_;
  bool begun_ = false;
  bool broken_ = false;
};

// A unary answer: 200 with the message, or the Connect error's status with
// {"code","message"}.
asio::awaitable<void> SendUnary(HttpContext& ctx, const Result<nlohmann::json>& r);

}  // namespace hutch::api::e2b
