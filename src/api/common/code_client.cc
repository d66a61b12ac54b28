#include "api/common/code_client.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <cstdint>
#include <limits>

#include "api/common/sandbox_dial.h"

namespace hutch::api {

namespace {

constexpr std::chrono::milliseconds kConnectTimeout{5000};
// An answer's header: the server sends it at once, even for a run that
// waits in its context's queue.
constexpr std::chrono::seconds kHeaderTimeout{60};
constexpr size_t kErrorBodyLimit = 64 << 10;

// The server's refusal (plain text) as hutch's error.
Error RefusalOf(int status, std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) text = "code interpreter answered " + std::to_string(status);
  if (status == 400) return MakeError(Code::kInvalidRequest, text);
  if (status == 404) return MakeError(Code::kNotFound, text);
  return MakeError(Code::kUnavailable, "code interpreter: " + text);
}

}  // namespace

CodeRun::CodeRun(beast::tcp_stream s, std::shared_ptr<Sandbox> sb)
    : s_(std::move(s)), sb_(std::move(sb)) {
  // No bound on a run's total output (lines are bounded one by one). Not
  // boost::none: Boost 1.74's parser then refuses any Content-Length body.
  parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
}

void CodeRun::SetDeadline(std::chrono::steady_clock::time_point deadline) {
  s_.expires_at(deadline);
}

void CodeRun::Cancel() {
  boost::system::error_code ec;
  s_.socket().cancel(ec);
  s_.socket().close(ec);
}

asio::awaitable<Status> CodeRun::ReadHeader() {
  boost::system::error_code ec;
  s_.expires_after(kHeaderTimeout);
  co_await http::async_read_header(s_, buf_, parser_,
                                   asio::redirect_error(asio::use_awaitable, ec));
  s_.expires_never();
  if (ec)
    co_return MakeError(Code::kUnavailable,
                        "code interpreter closed without answering (" + ec.message() + ")");
  const int status = parser_.get().result_int();
  if (status == 200) co_return Status{};
  // A refusal: its (small) text body is the message.
  auto text = co_await ReadAll(kErrorBodyLimit);
  co_return RefusalOf(status, text.ok() ? std::move(text).value() : std::string());
}

asio::awaitable<Result<std::string>> CodeRun::ReadAll(size_t limit) {
  std::string out = std::move(pending_);
  pending_.clear();
  char tmp[16 << 10];
  boost::system::error_code ec;
  while (!parser_.is_done()) {
    parser_.get().body().data = tmp;
    parser_.get().body().size = sizeof tmp;
    s_.expires_after(kHeaderTimeout);
    co_await http::async_read(s_, buf_, parser_, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    out.append(tmp, sizeof tmp - parser_.get().body().size);
    if (out.size() > limit)
      co_return MakeError(Code::kPayloadTooLarge, "code interpreter answer too large");
    if (ec) break;
  }
  s_.expires_never();
  if (ec && ec != http::error::end_of_stream)
    co_return MakeError(Code::kUnavailable, "code interpreter: " + ec.message());
  co_return out;
}

asio::awaitable<Result<std::optional<nlohmann::json>>> CodeRun::Next() {
  char tmp[64 << 10];
  while (true) {
    // A complete line waiting: parsed and handed out.
    if (auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        co_return MakeError(Code::kInternal, "code interpreter sent a line that is not JSON");
      if (j.value("type", "") == "end_of_execution") ended_ = true;
      co_return std::optional<nlohmann::json>(std::move(j));
    }
    if (ended_ || parser_.is_done()) co_return std::optional<nlohmann::json>();
    if (pending_.size() > CodeClient::kMaxLine)
      co_return MakeError(Code::kPayloadTooLarge,
                          "a line of the code interpreter's output is over " +
                              std::to_string(CodeClient::kMaxLine >> 20) + " MiB");
    parser_.get().body().data = tmp;
    parser_.get().body().size = sizeof tmp;
    boost::system::error_code ec;
    // read_some: whatever has come, at once (async_read would wait until
    // the 64 KiB buffer is full, holding lines back).
    co_await http::async_read_some(s_, buf_, parser_,
                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    pending_.append(tmp, sizeof tmp - parser_.get().body().size);
    if (ec == beast::error::timeout)
      co_return MakeError(Code::kAgentTimeout, "the execution ran past its timeout (interrupted)");
    if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor)
      co_return MakeError(Code::kUnavailable, "execution cancelled");
    // The stream broke off (or closed before its end): the complete lines
    // that came are still handed out, then the end. Reading on would
    // only give the same error again.
    if (ec) ended_ = true;
  }
}

asio::awaitable<Result<std::unique_ptr<CodeRun>>> CodeClient::Send(const std::string& id,
                                                                   http::verb method,
                                                                   const std::string& target,
                                                                   const std::string& body) {
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return sb.error();
  std::shared_ptr<Instance> inst = (*sb)->instance;
  if (!inst) co_return MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is not running");
  auto up = co_await DialSandboxPort(*inst, id, kPort, kConnectTimeout);
  if (!up.ok()) {
    if (up.error().code == Code::kPortUnreachable)
      co_return MakeError(Code::kPortUnreachable,
                          "sandbox " + id +
                              " runs no code interpreter (nothing on port 49999): create it from "
                              "the code-interpreter template");
    co_return up.error();
  }
  http::request<http::string_body> rq{method, target, 11};
  rq.set(http::field::host, "localhost:49999");
  rq.set(http::field::connection, "close");
  if (!body.empty()) rq.set(http::field::content_type, "application/json");
  rq.body() = body;
  rq.prepare_payload();
  boost::system::error_code ec;
  up->expires_after(kHeaderTimeout);
  co_await http::async_write(*up, rq, asio::redirect_error(asio::use_awaitable, ec));
  up->expires_never();
  if (ec)
    co_return MakeError(Code::kUnavailable, "code interpreter of sandbox " + id +
                                                ": write failed (" + ec.message() + ")");
  auto run = std::make_unique<CodeRun>(std::move(up).value(), std::move(sb).value());
  if (auto st = co_await run->ReadHeader(); !st.ok()) co_return st.error();
  co_return Result<std::unique_ptr<CodeRun>>(std::move(run));
}

bool CodeClient::ValidContextId(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) return false;
  return true;
}

asio::awaitable<Result<nlohmann::json>> CodeClient::Call(const std::string& id, http::verb method,
                                                         const std::string& target,
                                                         const nlohmann::json* body) {
  // A named local, not a conditional temporary inside co_await: GCC 12
  // destroys such temporaries twice in coroutines.
  const std::string payload = body ? body->dump() : std::string();
  auto run = co_await Send(id, method, target, payload);
  if (!run.ok()) co_return run.error();
  auto text = co_await (*run)->ReadAll(kErrorBodyLimit * 16);
  if (!text.ok()) co_return text.error();
  Result<nlohmann::json> out(nlohmann::json::parse(*text, nullptr, false));
  if (out->is_discarded())
    co_return MakeError(Code::kInternal, "code interpreter answered something that is not JSON");
  co_return out;
}

asio::awaitable<Result<std::unique_ptr<CodeRun>>> CodeClient::Execute(
    const std::string& id, const nlohmann::json& request) {
  const std::string payload = request.dump();
  co_return co_await Send(id, http::verb::post, "/execute", payload);
}

}  // namespace hutch::api
