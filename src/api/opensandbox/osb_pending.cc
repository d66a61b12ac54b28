// execd route groups not yet translated (sessions, files, metrics): they
// answer not_supported by name, so an SDK call fails with a clear message
// instead of a 404. docs/compat-opensandbox.md lists them as pending.
#include "api/opensandbox/osb_api.h"

namespace hutch::api::opensandbox {

namespace {

asio::awaitable<void> Pending(HttpContext& ctx, const char* what) {
  Error e = MakeError(Code::kNotSupported, std::string("execd ") + what +
                                               " is not implemented by hutch yet (docs/compat-opensandbox.md)");
  co_await OpenSandboxApi::SendError(ctx, e);
}

}  // namespace

asio::awaitable<void> OpenSandboxApi::CreateSession(HttpContext& ctx, std::shared_ptr<Sandbox>) {
  co_await Pending(ctx, "sessions");
}
asio::awaitable<void> OpenSandboxApi::RunInSession(HttpContext& ctx, std::shared_ptr<Sandbox>, const std::string&) {
  co_await Pending(ctx, "sessions");
}
asio::awaitable<void> OpenSandboxApi::DeleteSession(HttpContext& ctx, std::shared_ptr<Sandbox>, const std::string&) {
  co_await Pending(ctx, "sessions");
}
asio::awaitable<void> OpenSandboxApi::Files(HttpContext& ctx, std::shared_ptr<Sandbox>,
                                            const std::vector<std::string>&) {
  co_await Pending(ctx, "files");
}
asio::awaitable<void> OpenSandboxApi::Metrics(HttpContext& ctx, std::shared_ptr<Sandbox>, bool) {
  co_await Pending(ctx, "metrics");
}

}  // namespace hutch::api::opensandbox
