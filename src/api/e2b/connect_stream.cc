#include "api/e2b/connect_stream.h"

namespace hutch::api::e2b {

asio::awaitable<Status> ConnectStream::Begin() {
  if (begun_) co_return Status{};
  begun_ = true;
  std::vector<std::pair<std::string, std::string>> headers = {{"Cache-Control", "no-cache"},
                                                              {"X-Accel-Buffering", "no"}};
  const std::string type = codec_.ContentType(/*streaming=*/true);
  auto st = co_await ctx_.BeginStream(200, type, -1, headers);
  if (!st.ok()) broken_ = true;
  co_return st;
}

asio::awaitable<Status> ConnectStream::Send(const nlohmann::json& message) {
  if (broken_ || ended_) co_return MakeError(Code::kUnavailable, "stream closed");
  auto payload = codec_.EncodeResponse(message);
  if (!payload.ok()) {
    co_await End(&payload.error());
    co_return payload.error();
  }
  if (auto st = co_await Begin(); !st.ok()) co_return st;
  std::string env = EncodeEnvelope(0, *payload);
  auto st = co_await ctx_.WriteChunk(env);
  if (!st.ok()) broken_ = true;
  co_return st;
}

asio::awaitable<void> ConnectStream::End(const Error* error) {
  if (ended_) co_return;
  ended_ = true;
  if (error) ctx_.NoteError(*error);
  if (broken_) co_return;
  if (auto st = co_await Begin(); !st.ok()) co_return;
  std::string env = EndStreamEnvelope(error);
  if (auto st = co_await ctx_.WriteChunk(env); !st.ok()) {
    broken_ = true;
    co_return;
  }
  (void)co_await ctx_.EndStream();
}

asio::awaitable<void> SendUnary(HttpContext& ctx, const Result<nlohmann::json>& r,
                                const ConnectCodec& codec) {
  Result<std::string> body = r.ok() ? codec.EncodeResponse(r.value()) : r.error();
  if (body.ok()) {
    const std::string type = codec.ContentType(/*streaming=*/false);
    co_return co_await ctx.SendText(200, type, std::move(*body));
  }
  ctx.NoteError(body.error());
  const char* code = ConnectCodeName(body.error().code);
  nlohmann::json err = ConnectErrorJson(body.error());
  co_await ctx.SendJson(ConnectHttpStatus(code), err);
}

}  // namespace hutch::api::e2b
