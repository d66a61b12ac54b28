#include "core/event_log.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hutch {

namespace {

constexpr const char* kLevelNames[] = {"debug", "info", "warn", "error"};

}  // namespace

const char* LevelName(EventLevel l) { return kLevelNames[static_cast<int>(l)]; }

bool ParseLevel(const std::string& s, EventLevel* out) {
  for (int i = 0; i < 4; ++i) {
    if (s == kLevelNames[i]) {
      *out = static_cast<EventLevel>(i);
      return true;
    }
  }
  return false;
}

nlohmann::json SandboxEvent::ToJson() const {
  return {{"seq", seq},   {"time", FormatRfc3339(time)}, {"level", LevelName(level)},
          {"type", type}, {"message", message},          {"fields", fields}};
}

Status EventLog::Load() {
  last_.clear();
  if (!store_) return Status{};
  auto heads = store_->LoadEventHeads();
  if (!heads.ok()) return heads.error().Context("load event logs");
  for (const auto& [id, seq] : *heads) last_[id] = seq;
  return Status{};
}

void EventLog::Record(const std::string& sandbox_id, EventLevel level, std::string type,
                      std::string message, nlohmann::json fields) {
  if (!store_) return;
  int64_t& last = last_[sandbox_id];
  store::EventRow row;
  row.sandbox_id = sandbox_id;
  row.seq = last + 1;
  row.time_ms = ToUnixMs(std::chrono::system_clock::now());
  row.level = static_cast<int>(level);
  row.type = std::move(type);
  row.message = std::move(message);
  // Commands and reasons come from users: never let bad UTF-8 throw here.
  row.fields = fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  last = row.seq;
  if (pending_.empty()) oldest_pending_ = std::chrono::steady_clock::now();
  pending_.push_back(std::move(row));
  FlushIfDue();
}

void EventLog::FlushIfDue() const {
  if (!pending_.empty() && std::chrono::steady_clock::now() - oldest_pending_ >= kFlushAfter)
    Flush();
}

void EventLog::Flush() const {
  if (pending_.empty() || !store_) return;
  std::vector<store::EventRow> batch;
  batch.swap(pending_);
  if (auto st = store_->AppendEvents(batch, cap_); !st.ok())
    spdlog::error("events_lost count={} first_sandbox={} err=\"{}\"", batch.size(),
                  batch.front().sandbox_id, st.error().message);
}

Result<std::vector<SandboxEvent>> EventLog::Read(const std::string& sandbox_id,
                                                 const EventFilter& f) const {
  std::vector<SandboxEvent> out;
  if (!store_) return out;
  Flush();
  store::EventQuery q;
  q.after_seq = f.after_seq;
  q.since_ms = f.since ? ToUnixMs(*f.since) : 0;
  q.min_level = static_cast<int>(f.min_level);
  q.limit = static_cast<int64_t>(std::min<size_t>(f.limit, 100000));
  auto rows = store_->LoadEvents(sandbox_id, q);
  if (!rows.ok()) return rows.error().Context("read events of " + sandbox_id);
  for (auto& r : *rows) {
    SandboxEvent e;
    e.seq = r.seq;
    e.time = FromUnixMs(r.time_ms);
    e.level = static_cast<EventLevel>(std::clamp(r.level, 0, 3));
    e.type = std::move(r.type);
    e.message = std::move(r.message);
    e.fields = nlohmann::json::parse(r.fields, nullptr, false);
    if (!e.fields.is_object()) e.fields = nlohmann::json::object();
    out.push_back(std::move(e));
  }
  return out;
}

int64_t EventLog::last_seq(const std::string& sandbox_id) const {
  auto it = last_.find(sandbox_id);
  return it == last_.end() ? 0 : it->second;
}

void EventLog::Forget(const std::string& sandbox_id) {
  last_.erase(sandbox_id);
  std::erase_if(pending_, [&](const store::EventRow& r) { return r.sandbox_id == sandbox_id; });
  if (!store_) return;
  if (auto st = store_->DeleteEvents(sandbox_id); !st.ok())
    spdlog::error("sandbox={} events_forget_failed err=\"{}\"", sandbox_id, st.error().message);
}

}  // namespace hutch
