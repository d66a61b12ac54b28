// execd's /metrics and /metrics/watch from the sandbox's cgroup counters
// (Instance::Stats, what /v1's metrics route reads): CPU use is the cgroup's
// CPU time over a short window divided by the wall time and the sandbox's
// CPU limit; memory is the cgroup's current usage against its limit.
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

#include "api/opensandbox/command_stream.h"
#include "api/opensandbox/osb_api.h"

namespace hutch::api::opensandbox {

namespace {

// The window a single GET measures CPU use over.
constexpr std::chrono::milliseconds kSampleWindow{200};
// execd's watch interval.
constexpr std::chrono::seconds kWatchInterval{1};

struct Sample {
  uint64_t cpu_ns = 0;
  uint64_t mem_bytes = 0;
  std::chrono::steady_clock::time_point at;
};

Result<Sample> Take(const std::shared_ptr<Sandbox>& sb) {
  if (!sb->instance)
    return MakeError(Code::kSandboxNotRunning, "sandbox " + sb->rec.id + " is not running");
  auto st = sb->instance->Stats();
  if (!st.ok()) return st.error();
  return Sample{st->cpu_usage_ns, st->memory_current, std::chrono::steady_clock::now()};
}

Json MetricsJson(const SandboxRecord& rec, const Sample& a, const Sample& b) {
  const double wall_ns = static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(b.at - a.at).count());
  const double used_ns = b.cpu_ns > a.cpu_ns ? static_cast<double>(b.cpu_ns - a.cpu_ns) : 0.0;
  const double cpus = rec.cpu > 0 ? rec.cpu : 1.0;
  double pct = wall_ns > 0 ? 100.0 * used_ns / wall_ns / cpus : 0.0;
  pct = std::min(pct, 100.0);
  return {{"cpu_count", cpus},
          {"cpu_used_pct", pct},
          {"mem_total_mib", static_cast<double>(rec.memory_mb)},
          {"mem_used_mib", static_cast<double>(b.mem_bytes) / (1024.0 * 1024.0)},
          {"timestamp", NowMs()}};
}

}  // namespace

asio::awaitable<void> OpenSandboxApi::Metrics(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                              bool watch) {
  auto first = Take(sb);
  if (!first.ok()) co_return co_await SendError(ctx, first.error());
  Sample prev = *first;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  if (!watch) {
    timer.expires_after(kSampleWindow);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    auto now = Take(sb);
    if (!now.ok()) co_return co_await SendError(ctx, now.error());
    const Json out = MetricsJson(sb->rec, prev, *now);
    co_return co_await ctx.SendJson(200, out);
  }
  // The watch: one Metrics event a second until the client leaves or the
  // sandbox stops.
  bool gone = false;
  ctx.WatchClose([&gone, &timer] {
    gone = true;
    timer.cancel();
  });
  struct StopWatch {
    HttpContext& ctx;
    ~StopWatch() { ctx.StopWatchingClose(); }
  } stop{ctx};
  CommandStream out(ctx);
  if (!(co_await out.Begin()).ok()) co_return;
  while (!gone) {
    timer.expires_after(kWatchInterval);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (gone) break;
    auto now = Take(sb);
    if (!now.ok()) {
      const Json fail = FailureEvent(now.error().message);
      (void)co_await out.Send(fail);
      break;
    }
    const Json ev = MetricsJson(sb->rec, prev, *now);
    prev = *now;
    if (!(co_await out.Send(ev)).ok()) co_return;
  }
  if (gone) {
    ctx.CloseAfterResponse();
    co_return;
  }
  co_await out.End();
}

}  // namespace hutch::api::opensandbox
