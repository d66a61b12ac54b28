#include "core/reaper.h"

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <vector>

#include "core/process_exit_watch.h"
#include "core/sandbox_lifecycle.h"
#include "core/snapshot_book.h"
#include "core/warm_pool.h"

namespace hutch {

void Reaper::Start(asio::any_io_executor ex) {
  s_.ex = ex;
  asio::co_spawn(
      ex, [this]() -> asio::awaitable<void> { co_await Loop(); }, asio::detached);
}

asio::awaitable<void> Reaper::Loop() {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (!s_.shutting_down) {
    t.expires_after(std::chrono::milliseconds(250));
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_await Tick();
  }
}

asio::awaitable<void> Reaper::Tick() {
  auto now = std::chrono::system_clock::now();
  std::vector<std::string> expired, forget, to_pause;
  for (const auto& [id, sb] : s_.sandboxes) {
    if (sb->rec.expires_at > now) continue;
    if (sb->rec.status == SandboxStatus::kStopped) forget.push_back(id);
    else if (sb->rec.pause_on_expiry && sb->rec.status == SandboxStatus::kRunning)
      to_pause.push_back(id);
    else if (sb->rec.status != SandboxStatus::kStarting) expired.push_back(id);
  }
  for (const auto& id : forget) s_.Forget(id);
  s_.idempotency.Prune(now);
  PauseIdle();
  PollProcessExits(s_);
  for (const auto& id : to_pause)
    if (!PauseAtExpiry(id)) expired.push_back(id);  // not left running past its TTL
  for (const auto& id : expired) {
    spdlog::info("sandbox={} ttl_expired", id);
    auto st = co_await life_.Delete(id, "expired");
    (void)st;
  }
  if (warm_) warm_->Tick();
  s_.events.FlushIfDue();
}

bool Reaper::PauseAtExpiry(const std::string& id) {
  auto paused = life_.Pause(id, /*idle=*/false);
  // Kept paused for the largest TTL this server gives, then deleted as
  // any expired paused sandbox is (a frozen sandbox holds its memory).
  if (paused.ok()) paused = life_.SetTtl(id, s_.opts.max_ttl_seconds);
  if (!paused.ok()) {
    spdlog::error("sandbox={} pause_on_expiry_failed err=\"{}\"", id, paused.error().message);
    return false;
  }
  spdlog::info("sandbox={} ttl_expired paused_on_expiry", id);
  return true;
}

void Reaper::PauseIdle() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> idle;
  for (const auto& [id, sb] : s_.sandboxes) {
    if (sb->rec.auto_pause_seconds <= 0 || sb->rec.status != SandboxStatus::kRunning ||
        !sb->instance)
      continue;
    // An open stream (a running exec, a transfer, an attached terminal)
    // is use, however long ago its request came in.
    auto agent = sb->instance->agent();
    if (agent && agent->open_streams() > 0) {
      sb->last_active = now;
      continue;
    }
    if (now - sb->last_active >= std::chrono::seconds(sb->rec.auto_pause_seconds))
      idle.push_back(id);
  }
  for (const auto& id : idle) {
    if (auto r = life_.Pause(id, true); !r.ok()) {
      spdlog::error("sandbox={} idle_pause_failed err=\"{}\"", id, r.error().message);
      continue;
    }
    spdlog::info("sandbox={} idle_paused", id);
  }
}

Status Reaper::DeleteTemplate(const std::string& name) {
  if (name == "base")
    return MakeError(Code::kConflict, "'base' is hutchd's own template and cannot be removed");
  if (s_.builder && s_.builder->building(name))
    return MakeError(Code::kConflict, "template '" + name + "' is being built");
  if (auto st = s_.templates->Remove(name); !st.ok()) return st;
  s_.templates->Collect(snaps_.UsedLowerDirs());
  return Status{};
}

}  // namespace hutch
