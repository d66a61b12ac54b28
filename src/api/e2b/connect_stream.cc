#include "api/e2b/connect_stream.h"

namespace hutch::api::e2b {

asio::awaitable<Status> ConnectStream::Begin() {
  if (begun_) co_return Status{};
  begun_ = true;
  std::vector<std::pair<std::string, std::string>> headers = {{"Cache-Control", "no-cache"},
                                                              {"X-Accel-Buffering", "no"}};
  const std::string type = "application/connect+json";
  auto st = co_await ctx_.BeginStream(200, type, -1, headers);
  if (!st.ok()) broken_ = true;
  co_return st;
}

asio::awaitable<Status> ConnectStream::Send(const nlohmann::json& message) {
  if (broken_) co_return MakeError(Code::kUnavailable, "stream closed");
  if (auto st = co_await Begin(); !st.ok()) co_return st;
  std::string env = DataEnvelope(message);
  auto st = co_await ctx_.WriteChunk(env);
  if (!st.ok()) broken_ = true;
  co_return st;
}

asio::awaitable<void> ConnectStream::End(const Error* error) {
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

asio::awaitable<void> SendUnary(HttpContext& ctx, const Result<nlohmann::json>& r) {
  if (r.ok()) co_return co_await ctx.SendJson(200, r.value());
  ctx.NoteError(r.error());
  const char* code = ConnectCodeName(r.error().code);
  nlohmann::json body = ConnectErrorJson(r.error());
  co_await ctx.SendJson(ConnectHttpStatus(code), body);
}

}  // namespace hutch::api::e2b
