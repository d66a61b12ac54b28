#include "api/v1/sandbox_watch.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <memory>

#include "api/common/exec_body.h"

namespace hutch::api {

namespace {

constexpr auto kTick = std::chrono::milliseconds(500);

// Every sandbox the filter selects, by id, as the JSON a list answers.
std::map<std::string, nlohmann::json> Snapshot(SandboxManager& mgr, ListFilter f) {
  std::map<std::string, nlohmann::json> out;
  f.limit = 1000;
  f.cursor.clear();
  for (;;) {
    ListPage page = mgr.List(f);
    for (const auto& r : page.items) out.emplace(r.id, r.ToJson());
    if (page.next_cursor.empty()) break;
    f.cursor = page.next_cursor;
  }
  return out;
}

struct WatchState {
  explicit WatchState(asio::any_io_executor ex) : wake(ex) {}
  asio::steady_timer wake;
  bool gone = false;
};

}  // namespace

asio::awaitable<void> WatchSandboxes(HttpContext& ctx, SandboxManager& mgr, ListFilter filter,
                                     std::chrono::seconds ping_interval, Gauge& open_streams) {
  auto state = std::make_shared<WatchState>(co_await asio::this_coro::executor);
  std::weak_ptr<WatchState> weak = state;
  ctx.WatchClose([weak] {
    if (auto s = weak.lock()) {
      s->gone = true;
      s->wake.cancel();
    }
  });
  GaugeHold open_stream{open_streams};
  if (auto st = co_await ctx.BeginSse(); !st.ok()) {
    ctx.StopWatchingClose();
    co_return;
  }
  std::map<std::string, nlohmann::json> sent = Snapshot(mgr, filter);
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [id, j] : sent) items.push_back(j);
  const nlohmann::json first = {{"items", std::move(items)}};
  Status st = co_await ctx.WriteChunk(SseJsonEvent("list", first));
  auto quiet_since = std::chrono::steady_clock::now();
  while (st.ok() && !state->gone) {
    boost::system::error_code ec;
    state->wake.expires_after(kTick);
    co_await state->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (state->gone) break;
    std::map<std::string, nlohmann::json> now = Snapshot(mgr, filter);
    std::string out;
    for (const auto& [id, j] : now) {
      auto it = sent.find(id);
      if (it == sent.end() || it->second != j) out += SseJsonEvent("upsert", j);
    }
    for (const auto& [id, j] : sent)
      if (!now.count(id)) out += SseJsonEvent("remove", nlohmann::json{{"id", id}});
    sent = std::move(now);
    const auto t = std::chrono::steady_clock::now();
    if (!out.empty()) {
      st = co_await ctx.WriteChunk(out);
      quiet_since = t;
    } else if (t - quiet_since >= ping_interval) {
      st = co_await ctx.WriteChunk(": ping\n\n");
      quiet_since = t;
    }
  }
  ctx.StopWatchingClose();
}

}  // namespace hutch::api
