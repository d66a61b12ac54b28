// E2B's sandbox logs, served from the sandbox's event log
// (core/event_log.h): `GET /sandboxes/{id}/logs` (the first API:
// `start` in unix ms, `limit`; plain `logs` lines and structured
// `logEntries`) and `GET /v2/sandboxes/{id}/logs` (`cursor` in unix ms,
// `limit`, `direction`, `level`, `search`; structured `logs`). An entry's
// `fields` is a map of strings in E2B's schema, so hutch's fields are
// given as their JSON text (strings as they are). A killed sandbox's logs
// stay readable as long as hutch remembers it (its tombstone), as E2B
// keeps a killed sandbox's logs.
#include <algorithm>

#include "api/common/json_fields.h"
#include "api/e2b/e2b_api.h"

namespace hutch::api::e2b {

namespace {

// E2B's default and hutch's cap (a log holds at most that many events).
constexpr int64_t kLogsLimit = EventLog::kDefaultCap;

Json FieldStrings(const Json& fields) {
  Json out = Json::object();
  for (const auto& [k, v] : fields.items())
    out[k] = v.is_string() ? v.get<std::string>()
                           : v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return out;
}

Json Entry(const SandboxEvent& e) {
  Json fields = FieldStrings(e.fields);
  // E2B's entries carry what kind of line it is in fields; hutch's type too.
  fields["type"] = e.type;
  return {{"timestamp", FormatRfc3339(e.time)},
          {"level", LevelName(e.level)},
          {"message", e.message},
          {"fields", std::move(fields)}};
}

Result<std::optional<int64_t>> QueryMs(const HttpContext& ctx, const char* key) {
  return QueryInt(ctx.Query(key), key, 0, INT64_MAX);
}

// The answer of either version for the request's query (a plain function:
// GCC 12 rejects braced JSON literals of this shape inside coroutines).
Result<Json> LogsAnswer(const EventLog& log, const std::string& id, const HttpContext& ctx,
                        bool v2) {
  auto start = QueryMs(ctx, v2 ? "cursor" : "start");
  if (!start.ok()) return start.error();
  auto limit = QueryInt(ctx.Query("limit"), "limit", 0, kLogsLimit);
  if (!limit.ok()) return limit.error();
  bool backward = false;
  EventFilter f;
  f.limit = static_cast<size_t>(kLogsLimit);  // the whole log: it is bounded
  if (v2) {
    if (auto d = ctx.Query("direction"); d && *d != "forward") {
      if (*d != "backward")
        return MakeError(Code::kInvalidRequest, "'direction' must be forward or backward");
      backward = true;
    }
    if (auto l = ctx.Query("level"); l && !ParseLevel(*l, &f.min_level))
      return MakeError(Code::kInvalidRequest,
                       "unknown level '" + *l + "' (debug, info, warn, error)");
  }
  // Forward: from the cursor on; backward: from the cursor back.
  if (*start && !backward) f.since = FromUnixMs(**start);
  auto events = log.Read(id, f);
  if (!events.ok()) return events.error();
  std::vector<SandboxEvent>& list = *events;
  if (backward) {
    if (*start) {
      const SysTime until = FromUnixMs(**start);
      std::erase_if(list, [&](const SandboxEvent& e) { return e.time > until; });
    }
    std::reverse(list.begin(), list.end());
  }
  if (auto s = ctx.Query("search"); v2 && s && !s->empty())
    std::erase_if(list,
                  [&](const SandboxEvent& e) { return e.message.find(*s) == std::string::npos; });
  const size_t n = std::min(list.size(), static_cast<size_t>(limit->value_or(kLogsLimit)));
  Json entries = Json::array();
  Json lines = Json::array();
  for (size_t i = 0; i < n; ++i) {
    const SandboxEvent& e = list[i];
    entries.push_back(Entry(e));
    lines.push_back({{"timestamp", FormatRfc3339(e.time)},
                     {"line", std::string(LevelName(e.level)) + " " + e.type + ": " + e.message}});
  }
  if (v2) return Json{{"logs", std::move(entries)}};
  return Json{{"logs", std::move(lines)}, {"logEntries", std::move(entries)}};
}

}  // namespace

asio::awaitable<void> E2bApi::Logs(HttpContext& ctx, const std::string& id, bool v2) {
  if (auto rec = mgr_->Get(id); !rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  auto answer = LogsAnswer(mgr_->events(), id, ctx, v2);
  if (!answer.ok()) co_return co_await SendControlError(ctx, answer.error());
  co_await ctx.SendJson(200, *answer);
}

}  // namespace hutch::api::e2b
