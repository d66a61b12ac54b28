#include "api/e2b/dir_watch.h"

#include "core/file_ops.h"

namespace hutch::api::e2b {

const char* WatchEventTypeName(int t) {
  switch (t) {
    case kWatchCreate:
      return "EVENT_TYPE_CREATE";
    case kWatchWrite:
      return "EVENT_TYPE_WRITE";
    case kWatchRemove:
      return "EVENT_TYPE_REMOVE";
    case kWatchRename:
      return "EVENT_TYPE_RENAME";
    case kWatchChmod:
      return "EVENT_TYPE_CHMOD";
  }
  return "EVENT_TYPE_UNSPECIFIED";
}

WatchSnapshot SnapshotFromListing(const nlohmann::json& listing, const std::string& root) {
  WatchSnapshot out;
  auto it = listing.find("entries");
  if (it == listing.end() || !it->is_array()) return out;
  std::string prefix = root;
  if (prefix.empty() || prefix.back() != '/') prefix += '/';
  for (const auto& e : *it) {
    if (!e.is_object()) continue;
    std::string path = e.value("path", "");
    std::string rel = path.rfind(prefix, 0) == 0 ? path.substr(prefix.size()) : e.value("name", "");
    if (rel.empty()) continue;
    WatchEntry w;
    w.type = e.value("type", "other");
    w.size = e.value("size", int64_t{0});
    if (auto m = e.find("mtime"); m != e.end()) w.mtime = m->dump();
    w.mode = e.value("mode", 0);
    out[rel] = w;
  }
  return out;
}

std::vector<WatchEvent> DiffSnapshots(const WatchSnapshot& before, const WatchSnapshot& after) {
  std::vector<WatchEvent> out;
  for (const auto& [name, b] : before)
    if (!after.count(name)) out.push_back({name, kWatchRemove});
  for (const auto& [name, a] : after) {
    auto it = before.find(name);
    if (it == before.end() || it->second.type != a.type) {
      if (it != before.end()) out.push_back({name, kWatchRemove});
      out.push_back({name, kWatchCreate});
      if (a.type == "file" && a.size > 0) out.push_back({name, kWatchWrite});
      continue;
    }
    const WatchEntry& b = it->second;
    if (a.type == "file" && (a.size != b.size || a.mtime != b.mtime))
      out.push_back({name, kWatchWrite});
    if (a.mode != b.mode) out.push_back({name, kWatchChmod});
  }
  return out;
}

asio::awaitable<Result<std::vector<WatchEvent>>> DirWatcher::Poll(std::shared_ptr<Sandbox> sb) {
  // Recursion is bounded like the /v1 listing's depth.
  nlohmann::json req = {
      {"op", "list"}, {"path", path_}, {"depth", recursive_ ? 32 : 1}, {"user", user_}};
  auto r = co_await FsCall(sb, req);
  if (!r.ok()) co_return r.error();
  WatchSnapshot now = SnapshotFromListing(*r, path_);
  std::vector<WatchEvent> ev;
  if (primed_) ev = DiffSnapshots(last_, now);
  primed_ = true;
  last_ = std::move(now);
  co_return ev;
}

}  // namespace hutch::api::e2b
