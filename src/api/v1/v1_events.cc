// GET /v1/sandboxes/{id}/events: a sandbox's event log (core/event_log.h),
// a page at a time, or with ?follow=true as an SSE stream that goes on with
// new events as they are recorded (docs/api.md "Events").
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>

#include "api/common/exec_body.h"
#include "api/common/json_fields.h"
#include "api/v1/v1_api.h"

namespace hutch::api {

namespace {

// How often a follower looks for new events: one in-memory comparison per
// tick; the store is read only when the log grew.
constexpr auto kFollowTick = std::chrono::milliseconds(250);
constexpr int64_t kMaxLimit = 1000;

// The query of a read: ?after, ?limit, ?level, ?follow; anything else is
// refused (a misspelt filter would silently return everything).
struct EventsQuery {
  EventFilter filter;
  bool follow = false;
};

Result<EventsQuery> ParseEventsQuery(const HttpContext& ctx) {
  EventsQuery q;
  for (const auto& [k, v] : ctx.query())
    if (k != "after" && k != "limit" && k != "level" && k != "follow")
      return MakeError(Code::kInvalidRequest,
                       "unknown query parameter '" + k + "' (after, limit, level, follow)");
  auto after = QueryInt(ctx.Query("after"), "after", 0, INT64_MAX);
  if (!after.ok()) return after.error();
  auto limit = QueryInt(ctx.Query("limit"), "limit", 1, kMaxLimit);
  if (!limit.ok()) return limit.error();
  if (*after) {
    q.filter.after_seq = **after;
  } else if (auto last = ctx.Header("Last-Event-ID"); !last.empty()) {
    // A reconnecting EventSource goes on after what it saw.
    auto seq = QueryInt(last, "Last-Event-ID", 0, INT64_MAX);
    if (!seq.ok()) return seq.error();
    q.filter.after_seq = **seq;
  }
  q.filter.limit = static_cast<size_t>(limit->value_or(100));
  if (auto l = ctx.Query("level")) {
    if (!ParseLevel(*l, &q.filter.min_level))
      return MakeError(Code::kInvalidRequest,
                       "unknown level '" + *l + "' (debug, info, warn or error)");
  }
  if (auto f = ctx.Query("follow"); f && *f != "false") {
    if (*f != "true") return MakeError(Code::kInvalidRequest, "'follow' must be true or false");
    q.follow = true;
  }
  return q;
}

// "id: <seq>\nevent: event\ndata: <json>\n\n": the id lets an EventSource
// resume with Last-Event-ID.
std::string SseSandboxEvent(const SandboxEvent& e) {
  return "id: " + std::to_string(e.seq) + "\n" + SseJsonEvent("event", e.ToJson());
}

struct FollowState {
  explicit FollowState(asio::any_io_executor ex) : wake(ex) {}
  asio::steady_timer wake;
  bool gone = false;
};

}  // namespace

asio::awaitable<void> V1Api::SandboxEvents(HttpContext& ctx, const std::string& id) {
  if (auto rec = mgr_->Get(id); !rec.ok()) co_return co_await ctx.SendError(rec.error());
  auto q = ParseEventsQuery(ctx);
  if (!q.ok()) co_return co_await ctx.SendError(q.error());
  if (q->follow) co_return co_await FollowEvents(ctx, id, q->filter);
  EventFilter f = q->filter;
  const size_t limit = f.limit;
  f.limit = limit + 1;  // one more tells whether there is a next page
  auto events = mgr_->events().Read(id, f);
  if (!events.ok()) co_return co_await ctx.SendError(events.error());
  nlohmann::json items = nlohmann::json::array();
  for (size_t i = 0; i < events->size() && i < limit; ++i) items.push_back((*events)[i].ToJson());
  nlohmann::json out = {{"items", std::move(items)}, {"next_after", nullptr}};
  if (events->size() > limit) out["next_after"] = (*events)[limit - 1].seq;
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> V1Api::FollowEvents(HttpContext& ctx, const std::string& id,
                                          EventFilter filter) {
  auto state = std::make_shared<FollowState>(co_await asio::this_coro::executor);
  std::weak_ptr<FollowState> weak = state;
  ctx.WatchClose([weak] {
    if (auto s = weak.lock()) {
      s->gone = true;
      s->wake.cancel();
    }
  });
  GaugeHold open_stream{metrics_.open_streams};
  if (auto st = co_await ctx.BeginSse(); !st.ok()) {
    ctx.StopWatchingClose();
    co_return;
  }
  const EventLog& log = mgr_->events();
  filter.limit = static_cast<size_t>(kMaxLimit);
  int64_t seen = -1;  // the log's last seq when it was last read
  bool ended = false;
  Status st;
  auto quiet_since = std::chrono::steady_clock::now();
  while (st.ok() && !state->gone) {
    const int64_t head = log.last_seq(id);
    std::string out;
    if (head != seen) {
      // Everything new, in pages; the seq filter skips what was sent.
      for (;;) {
        auto page = log.Read(id, filter);
        if (!page.ok() || page->empty()) break;
        for (const auto& e : *page) out += SseSandboxEvent(e);
        filter.after_seq = page->back().seq;
        if (page->size() < filter.limit) break;
      }
      seen = head;
    }
    // A stopped sandbox's log is complete (or its record is gone).
    auto rec = mgr_->Get(id);
    ended = !rec.ok() || rec->status == SandboxStatus::kStopped;
    if (ended)
      out += SseJsonEvent("end", nlohmann::json{{"status", rec.ok() ? "stopped" : "gone"}});
    const auto t = std::chrono::steady_clock::now();
    if (!out.empty()) {
      st = co_await ctx.WriteChunk(out);
      quiet_since = t;
    } else if (t - quiet_since >= cfg_.sse_ping_interval) {
      st = co_await ctx.WriteChunk(": ping\n\n");
      quiet_since = t;
    }
    // The client may have left while this coroutine was writing (the
    // close callback's cancel then found no wait to cancel): look before
    // sleeping, or a gone client's stream would outlive it by a tick.
    if (ended || state->gone) break;
    boost::system::error_code ec;
    state->wake.expires_after(kFollowTick);
    co_await state->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  ctx.StopWatchingClose();
  if (ended && st.ok()) (void)co_await ctx.EndStream();
}

}  // namespace hutch::api
