#include "core/create_steps.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

namespace hutch {

namespace {
bool Holds(const Sandbox& sb) { return sb.instance || sb.rec.net_slot >= 0; }
}  // namespace

SandboxResources::~SandboxResources() {
  if (!sb_ || !Holds(*sb_) || !s_->ex) return;
  // A create whose coroutine is destroyed mid-way cannot await here.
  auto inst = std::move(sb_->instance);
  const int slot = std::exchange(sb_->rec.net_slot, -1);
  asio::co_spawn(
      s_->ex,
      [s = s_, inst = std::move(inst), slot]() -> asio::awaitable<void> {
        co_await s->Teardown(inst, slot);
      },
      asio::detached);
}

asio::awaitable<void> SandboxResources::Release() {
  auto sb = std::move(sb_);
  if (!sb) co_return;
  // Whoever still holds the sandbox (an exec of its start command) sees
  // it gone, not running.
  if (sb->rec.status == SandboxStatus::kStarting || sb->rec.status == SandboxStatus::kRunning)
    sb->rec.status = SandboxStatus::kStopped;
  if (!Holds(*sb)) co_return;
  auto inst = std::move(sb->instance);
  const int slot = std::exchange(sb->rec.net_slot, -1);
  co_await s_->Teardown(std::move(inst), slot);
}

}  // namespace hutch
