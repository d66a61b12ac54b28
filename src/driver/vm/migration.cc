#include "driver/vm/migration.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/unique_fd.h"
#include "driver/vm/qmp_client.h"

namespace hutch::vm {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

asio::awaitable<Status> SaveState(const std::string& qmp_path, const std::string& file,
                                  bool ignore_shared, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto qmp = QmpSession::Open(qmp_path);
  if (!qmp.ok()) co_return qmp.error().Context("save vm state");
  if (auto r = qmp->Run("stop"); !r.ok()) co_return r.error().Context("save vm state");
  const nlohmann::json caps = {
      {"capabilities",
       nlohmann::json::array({{{"capability", "x-ignore-shared"}, {"state", ignore_shared}}})}};
  if (auto r = qmp->Run("migrate-set-capabilities", caps); !r.ok())
    co_return r.error().Context("save vm state");
  UniqueFd out(open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out) co_return ErrnoError("create " + file);
  const nlohmann::json fdname = {{"fdname", "hutch-migrate"}};
  if (auto r = qmp->Run("getfd", fdname, out.get()); !r.ok())
    co_return r.error().Context("save vm state");
  out.reset();  // QEMU has its own copy now
  const nlohmann::json uri = {{"uri", "fd:hutch-migrate"}};
  if (auto r = qmp->Run("migrate", uri); !r.ok()) co_return r.error().Context("save vm state");
  while (Clock::now() < deadline) {
    auto q = qmp->Run("query-migrate");
    if (!q.ok()) co_return q.error().Context("save vm state");
    const std::string status = q->value("status", "");
    if (status == "completed") co_return Status{};
    if (status == "failed" || status == "cancelled")
      co_return MakeError(Code::kInternal,
                          "save vm state: migration " + status + ": " + q->value("error-desc", ""));
    co_await Pause(std::chrono::milliseconds(10));
  }
  (void)qmp->Run("migrate_cancel");
  co_return MakeError(Code::kUnavailable, "save vm state: migration did not finish in time");
}

asio::awaitable<Status> FinishIncoming(const std::string& qmp_path, int stream_fd,
                                       bool ignore_shared, const std::function<bool()>& exited,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  // QEMU serves QMP while it loads; its socket appears as it starts.
  Result<QmpSession> qmp = MakeError(Code::kUnavailable, "no qmp yet");
  while (Clock::now() < deadline) {
    if (exited()) co_return MakeError(Code::kUnavailable, "qemu exited while loading the state");
    if (access(qmp_path.c_str(), F_OK) == 0) {
      qmp = QmpSession::Open(qmp_path);
      if (qmp.ok()) break;
    }
    co_await Pause(std::chrono::milliseconds(5));
  }
  if (!qmp.ok()) co_return qmp.error().Context("restore vm");
  const nlohmann::json caps = {
      {"capabilities",
       nlohmann::json::array({{{"capability", "x-ignore-shared"}, {"state", ignore_shared}}})}};
  if (auto r = qmp->Run("migrate-set-capabilities", caps); !r.ok())
    co_return r.error().Context("restore vm");
  const nlohmann::json uri = {{"uri", "fd:" + std::to_string(stream_fd)}};
  if (auto r = qmp->Run("migrate-incoming", uri); !r.ok())
    co_return r.error().Context("restore vm");
  while (Clock::now() < deadline) {
    if (exited()) co_return MakeError(Code::kUnavailable, "qemu exited while loading the state");
    auto q = qmp->Run("query-status");
    if (!q.ok()) co_return q.error().Context("restore vm");
    const std::string status = q->value("status", "");
    if (status != "inmigrate") {
      // The source was stopped when it was saved, so the copy comes up
      // stopped ("paused"); anything else is a failed load.
      if (status != "paused" && status != "running")
        co_return MakeError(Code::kInternal, "restore vm: state " + status + " after loading");
      if (auto r = qmp->Run("cont"); !r.ok()) co_return r.error().Context("restore vm");
      co_return Status{};
    }
    co_await Pause(std::chrono::milliseconds(5));
  }
  co_return MakeError(Code::kUnavailable, "restore vm: the state did not load in time");
}

asio::awaitable<void> Pause(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(d);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace hutch::vm
