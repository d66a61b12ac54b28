// envd's filesystem.Filesystem over the agent's file operations
// (core/file_ops FsCall): stat, list with depth, mkdir, move, remove, and
// directory watching by polling (dir_watch.h), streamed (WatchDir) or
// pulled (CreateWatcher / GetWatcherEvents / RemoveWatcher).
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/e2b/connect_stream.h"
#include "api/e2b/e2b_api.h"
#include "common/clock.h"
#include "core/file_ops.h"

namespace hutch::api::e2b {

namespace {

constexpr size_t kMaxWatchers = 256;
constexpr std::chrono::milliseconds kWatchPoll{200};

// Go's os.FileMode.String() of the entry, as envd reports `permissions`.
std::string Permissions(const std::string& type, int mode) {
  std::string s = type == "dir" ? "d" : type == "symlink" ? "L" : "-";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (mode & (0400 >> i)) ? rwx[i] : '-';
  return s;
}

// The agent's entry as envd's EntryInfo (proto3 JSON: defaults omitted).
Json EntryInfo(const Json& e) {
  Json out = Json::object();
  const std::string type = e.value("type", "other");
  if (auto n = e.value("name", ""); !n.empty()) out["name"] = n;
  if (type == "file") out["type"] = "FILE_TYPE_FILE";
  else if (type == "dir") out["type"] = "FILE_TYPE_DIRECTORY";
  else if (type == "symlink") out["type"] = "FILE_TYPE_SYMLINK";
  if (auto p = e.value("path", ""); !p.empty()) out["path"] = p;
  if (int64_t size = e.value("size", int64_t{0}); size != 0) out["size"] = PjInt64String(size);
  const int mode = e.value("mode", 0);
  if (mode != 0) out["mode"] = mode;
  out["permissions"] = Permissions(type, mode);
  // FsCall already turned the agent's unix seconds into RFC 3339 (UTC),
  // which is also the proto3 JSON form of a Timestamp.
  if (auto m = e.find("mtime"); m != e.end()) {
    if (m->is_string()) out["modifiedTime"] = *m;
    else if (m->is_number()) out["modifiedTime"] = PjTimestamp(m->get<int64_t>());
  }
  if (e.contains("symlink_target") && e["symlink_target"].is_string())
    out["symlinkTarget"] = e["symlink_target"];
  return out;
}

Json WithEntry(const Result<Json>& r) {
  Json out = Json::object();
  if (r->contains("entry")) out["entry"] = EntryInfo(r.value()["entry"]);
  return out;
}

Result<std::string> RequiredPath(const Json& req, const char* key) {
  auto p = PjString(req, key);
  if (!p.ok()) return p.error();
  if (p->empty()) return MakeError(Code::kInvalidRequest, std::string("'") + key + "' is required");
  if (p->find('\0') != std::string::npos)
    return MakeError(Code::kInvalidRequest, "path contains NUL");
  return *p;
}

// A directory to watch: it must exist and be a directory.
asio::awaitable<Status> CheckWatchable(std::shared_ptr<Sandbox> sb, const std::string& path,
                                       const std::string& user) {
  Json req = {{"op", "stat"}, {"path", path}, {"user", user}};
  auto r = co_await FsCall(sb, req);
  if (!r.ok()) co_return r.error();
  if ((*r)["entry"].value("type", "") != "dir")
    co_return MakeError(Code::kNotADirectory, path + " is not a directory");
  co_return Status{};
}

Json EventsJson(const std::vector<WatchEvent>& ev) {
  Json a = Json::array();
  for (const auto& e : ev)
    a.push_back(Json{{"name", e.name}, {"type", WatchEventTypeName(e.type)}});
  return a;
}

}  // namespace

asio::awaitable<Result<Json>> E2bApi::FilesystemUnary(const std::string& method, EnvdCall& call) {
  const Json& req = call.request;
  auto sb = call.sb;
  if (method == "Stat" || method == "ListDir" || method == "MakeDir" || method == "Remove") {
    auto path = RequiredPath(req, "path");
    if (!path.ok()) co_return path.error();
    if (method == "Stat") {
      Json q = {{"op", "stat"}, {"path", *path}, {"user", call.user}};
      auto r = co_await FsCall(sb, q);
      if (!r.ok()) co_return r.error();
      co_return WithEntry(r);
    }
    if (method == "ListDir") {
      auto depth = PjUint32(req, "depth");
      if (!depth.ok()) co_return depth.error();
      Json q = {{"op", "list"},
                {"path", *path},
                {"depth", std::clamp<uint32_t>(*depth, 1, 32)},
                {"user", call.user}};
      auto r = co_await FsCall(sb, q);
      if (!r.ok()) co_return r.error();
      Json entries = Json::array();
      for (const auto& e : (*r)["entries"]) entries.push_back(EntryInfo(e));
      Json out = Json::object();
      if (!entries.empty()) out["entries"] = entries;
      co_return out;
    }
    if (method == "MakeDir") {
      // envd: an existing path is already_exists (the SDK returns false).
      Json st = {{"op", "stat"}, {"path", *path}, {"user", call.user}};
      auto s = co_await FsCall(sb, st);
      if (s.ok()) co_return MakeError(Code::kConflict, *path + " already exists");
      if (s.error().code != Code::kFileNotFound) co_return s.error();
      Json q = {{"op", "mkdir"}, {"path", *path}, {"user", call.user}};
      auto r = co_await FsCall(sb, q);
      if (!r.ok()) co_return r.error();
      co_return WithEntry(r);
    }
    Json q = {{"op", "remove"}, {"path", *path}, {"recursive", true}, {"user", call.user}};
    auto r = co_await FsCall(sb, q);
    // envd removes as Go's os.RemoveAll does: a path that is not there is
    // already removed, not an error (SDKs call remove to make sure).
    if (!r.ok() && r.error().code != Code::kFileNotFound) co_return r.error();
    co_return Json::object();
  }
  if (method == "Move") {
    auto from = RequiredPath(req, "source");
    auto to = RequiredPath(req, "destination");
    if (!from.ok()) co_return from.error();
    if (!to.ok()) co_return to.error();
    Json q = {{"op", "move"}, {"path", *from}, {"to", *to}, {"user", call.user}};
    auto r = co_await FsCall(sb, q);
    if (!r.ok()) co_return r.error();
    co_return WithEntry(r);
  }
  if (method == "CreateWatcher") {
    auto path = RequiredPath(req, "path");
    if (!path.ok()) co_return path.error();
    auto recursive = PjBool(req, "recursive");
    if (!recursive.ok()) co_return recursive.error();
    // Watchers of sandboxes that are gone go first.
    std::erase_if(watchers_, [this](const auto& kv) {
      auto rec = mgr_->Get(kv.second->sandbox_id());
      return !rec.ok() || rec->status == SandboxStatus::kStopped ||
             rec->status == SandboxStatus::kFailed;
    });
    if (watchers_.size() >= kMaxWatchers)
      co_return MakeError(Code::kCapacityExhausted,
                          "too many directory watchers (" + std::to_string(kMaxWatchers) + ")");
    if (auto st = co_await CheckWatchable(sb, *path, call.user); !st.ok()) co_return st.error();
    auto w = std::make_unique<DirWatcher>(sb->rec.id, *path, *recursive, call.user);
    auto primed = co_await w->Poll(sb);
    if (!primed.ok()) co_return primed.error();
    std::string id = "w_" + RandomHex(8);
    watchers_[id] = std::move(w);
    co_return Json{{"watcherId", id}};
  }
  if (method == "GetWatcherEvents" || method == "RemoveWatcher") {
    auto id = PjString(req, "watcherId");
    if (!id.ok()) co_return id.error();
    auto it = watchers_.find(*id);
    if (it == watchers_.end() || it->second->sandbox_id() != sb->rec.id)
      co_return MakeError(Code::kNotFound, "watcher '" + *id + "' not found");
    if (method == "RemoveWatcher") {
      watchers_.erase(it);
      co_return Json::object();
    }
    DirWatcher* w = it->second.get();
    auto ev = co_await w->Poll(sb);
    if (!ev.ok()) co_return ev.error();
    Json out = Json::object();
    if (!ev->empty()) out["events"] = EventsJson(*ev);
    co_return out;
  }
  co_return MakeError(Code::kNotSupported,
                      "filesystem.Filesystem/" + method + " is not implemented by hutch");
}

asio::awaitable<void> E2bApi::WatchDir(HttpContext& ctx, EnvdCall& call) {
  ConnectStream out(ctx, call.codec);
  auto path = RequiredPath(call.request, "path");
  if (!path.ok()) co_return co_await out.End(&path.error());
  auto recursive = PjBool(call.request, "recursive");
  if (!recursive.ok()) co_return co_await out.End(&recursive.error());
  if (auto inc = PjBool(call.request, "includeEntry"); inc.ok() && *inc) {
    Error e = MakeError(Code::kNotSupported,
                        "watch events with entries (includeEntry) are not supported by hutch");
    co_return co_await out.End(&e);
  }
  if (auto st = co_await CheckWatchable(call.sb, *path, call.user); !st.ok())
    co_return co_await out.End(&st.error());
  DirWatcher w(call.sb->rec.id, *path, *recursive, call.user);
  if (auto primed = co_await w.Poll(call.sb); !primed.ok())
    co_return co_await out.End(&primed.error());
  auto ex = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(ex);
  auto closed = std::make_shared<bool>(false);
  ctx.WatchClose([timer, closed] {
    *closed = true;
    timer->cancel();
  });
  struct Stop {
    HttpContext& ctx;
    ~Stop() { ctx.StopWatchingClose(); }
  } stop{ctx};
  Json start = {{"start", Json::object()}};
  if (!(co_await out.Send(start)).ok()) co_return;
  const auto begin = std::chrono::steady_clock::now();
  auto last_sent = begin;
  while (!*closed) {
    timer->expires_after(kWatchPoll);
    boost::system::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (*closed) co_return;
    const auto now = std::chrono::steady_clock::now();
    if (call.timeout && now - begin >= *call.timeout) co_return co_await out.End(nullptr);
    auto sb = mgr_->GetRunning(call.sb->rec.id);
    if (!sb.ok()) co_return co_await out.End(&sb.error());
    auto ev = co_await w.Poll(*sb);
    if (!ev.ok()) co_return co_await out.End(&ev.error());
    for (const auto& e : *ev) {
      Json msg = {{"filesystem", Json{{"name", e.name}, {"type", WatchEventTypeName(e.type)}}}};
      if (!(co_await out.Send(msg)).ok()) co_return;
      last_sent = now;
    }
    if (call.keepalive.count() > 0 && now - last_sent >= call.keepalive) {
      Json ka = {{"keepalive", Json::object()}};
      if (!(co_await out.Send(ka)).ok()) co_return;
      last_sent = now;
    }
  }
}

}  // namespace hutch::api::e2b
