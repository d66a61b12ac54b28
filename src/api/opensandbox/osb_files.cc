// execd's file API (/files..., /directories...) over core's file calls: the
// agent does every operation in the sandbox's root (FsCall ops stat, list,
// mkdir, remove, move, chmod; FileUpload / FileDownload streams), so the
// path rules are the ones /v1 and E2B have. What is execd's own is here:
// the multipart upload with a JSON `metadata` part, FileInfo's shape, glob
// search, in-place replace, and Permission {mode, owner, group}.
#include <fnmatch.h>

#include "api/common/file_send.h"
#include "api/common/json_fields.h"
#include "api/common/multipart.h"
#include "api/opensandbox/file_info.h"
#include "api/opensandbox/osb_api.h"
#include "core/file_ops.h"

namespace hutch::api::opensandbox {

namespace {

using V = http::verb;

// The largest file /files/replace edits and a line-based download reads
// (each is read whole).
constexpr int64_t kMaxReplaceBytes = 64 << 20;
// The depth a search walks.
constexpr int kSearchDepth = 32;
// A metadata part is a small JSON object.
constexpr size_t kMaxMetadataPart = 64 << 10;

// Every `path` query parameter (execd takes repeated ones).
Result<std::vector<std::string>> PathParams(const HttpContext& ctx) {
  std::vector<std::string> out;
  for (const auto& [k, v] : ctx.query_list())
    if (k == "path") {
      if (auto st = CheckPath(v, "path"); !st.ok()) return st.error();
      out.push_back(v);
    }
  if (out.empty()) return MakeError(Code::kInvalidRequest, "query parameter 'path' is required");
  return out;
}

Result<std::string> OnePath(const HttpContext& ctx) {
  auto p = PathParams(ctx);
  if (!p.ok()) return p.error();
  return p->front();
}

// `pattern` against a found file: a pattern with a '/' matches the path
// relative to the searched directory, one without matches the file name;
// "*" and "**" both match anything (fnmatch without FNM_PATHNAME).
bool GlobMatches(const std::string& pattern, const std::string& rel, const std::string& name) {
  const std::string& subject = pattern.find('/') != std::string::npos ? rel : name;
  return fnmatch(pattern.c_str(), subject.c_str(), FNM_PERIOD) == 0 ||
         fnmatch(pattern.c_str(), subject.c_str(), 0) == 0;
}

size_t ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  size_t n = 0;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size(), ++n) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  if (n == 0) return 0;
  out.append(s, pos, std::string::npos);
  s = std::move(out);
  return n;
}

// The fs request that sets execd's Permission {mode?, owner?, group?} (mode
// as octal digits) on `path`; null when it asks for nothing.
Result<Json> ChmodRequest(const std::string& path, const Json& perm, const IdNames& names) {
  if (!perm.is_object())
    return MakeError(Code::kInvalidRequest, "the permission of '" + path + "' must be an object");
  Json req = {{"op", "chmod"}, {"path", path}, {"user", kDefaultUser}};
  bool any = false;
  auto mode = OptInt(perm, "mode", 0, 7777);
  if (!mode.ok()) return mode.error();
  if (*mode) {
    auto m = ModeFromOctalDigits(**mode);
    if (!m.ok()) return m.error();
    req["mode"] = *m;
    any = true;
  }
  for (const char* who : {"owner", "group"}) {
    auto name = OptString(perm, who);
    if (!name.ok()) return name.error();
    if (!*name || (*name)->empty()) continue;
    auto id = std::string(who) == "owner" ? names.UserId(**name) : names.GroupId(**name);
    if (!id.ok()) return id.error();
    req[std::string(who) == "owner" ? "uid" : "gid"] = *id;
    any = true;
  }
  return any ? req : Json();
}

bool WantsOwner(const Json& perm) {
  return perm.is_object() && ((perm.contains("owner") && perm["owner"].is_string()) ||
                              (perm.contains("group") && perm["group"].is_string()));
}

}  // namespace

asio::awaitable<void> OpenSandboxApi::Files(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                            const std::vector<std::string>& s) {
  const V m = ctx.method();
  const std::string user = kDefaultUser;
  // (Errors are named locals before a co_await: GCC 12's coroutine bug.)
  auto fail = [&ctx](const Error& e) -> asio::awaitable<void> { co_await SendError(ctx, e); };

  // GET /files/download?path=: the file, with Range; with `offset`
  // (1-based line) and/or `limit` (lines) only those lines.
  if (s.size() == 2 && s[0] == "files" && s[1] == "download" && m == V::get) {
    auto path = OnePath(ctx);
    if (!path.ok()) co_return co_await fail(path.error());
    auto offset = QueryInt(ctx.Query("offset"), "offset", 1, INT64_MAX);
    auto limit = QueryInt(ctx.Query("limit"), "limit", 0, INT64_MAX);
    if (!offset.ok()) co_return co_await fail(offset.error());
    if (!limit.ok()) co_return co_await fail(limit.error());
    if (*offset || *limit) {
      if (!ctx.Header("Range").empty()) {
        Error e = MakeError(Code::kInvalidRequest,
                            "a line-based read (offset/limit) cannot have a Range too");
        co_return co_await fail(e);
      }
      auto text = co_await ReadWholeFile(sb, *path, user, kMaxReplaceBytes);
      if (!text.ok()) co_return co_await fail(text.error());
      co_return co_await ctx.SendText(200, "application/octet-stream",
                                      SliceLines(*text, offset->value_or(1), *limit));
    }
    auto st = co_await SendSandboxFile(ctx, sb, *path, user);
    if (!st.ok()) co_await fail(st.error());
    co_return;
  }
  if (s.size() == 2 && s[0] == "files" && s[1] == "upload" && m == V::post)
    co_return co_await Upload(ctx, sb);

  // GET /files/info?path=a&path=b -> {a: FileInfo, b: FileInfo}
  if (s.size() == 2 && s[0] == "files" && s[1] == "info" && m == V::get) {
    auto paths = PathParams(ctx);
    if (!paths.ok()) co_return co_await fail(paths.error());
    const IdNames names = co_await LoadIdNames(sb);
    Json out = Json::object();
    for (const auto& p : *paths) {
      Json req = {{"op", "stat"}, {"path", p}, {"user", user}};
      auto r = co_await FsCall(sb, req);
      if (!r.ok()) co_return co_await fail(r.error());
      out[p] = FileInfoJson((*r)["entry"], names);
    }
    co_return co_await ctx.SendJson(200, out);
  }

  // GET /directories/list?path=&depth= and GET /files/search?path=&pattern=
  const bool list = s.size() == 2 && s[0] == "directories" && s[1] == "list" && m == V::get;
  const bool search = s.size() == 2 && s[0] == "files" && s[1] == "search" && m == V::get;
  if (list || search) {
    auto path = OnePath(ctx);
    if (!path.ok()) co_return co_await fail(path.error());
    auto depth = QueryInt(ctx.Query("depth"), "depth", 1, kSearchDepth);
    if (!depth.ok()) co_return co_await fail(depth.error());
    const std::string pattern =
        ctx.Query("pattern").value_or("").empty() ? "**" : *ctx.Query("pattern");
    Json req = {{"op", "list"},
                {"path", *path},
                {"depth", search ? kSearchDepth : depth->value_or(1)},
                {"user", user}};
    auto r = co_await FsCall(sb, req);
    if (!r.ok()) co_return co_await fail(r.error());
    const IdNames names = co_await LoadIdNames(sb);
    // The listed directory as the agent normalized it: the prefix to strip.
    std::string root = *path;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    Json out = Json::array();
    for (const auto& e : (*r)["entries"]) {
      if (search) {
        if (e.value("type", "") == "dir") continue;
        const std::string p = e.value("path", "");
        const std::string rel = p.rfind(root + "/", 0) == 0 ? p.substr(root.size() + 1) : p;
        if (!GlobMatches(pattern, rel, e.value("name", ""))) continue;
      }
      out.push_back(FileInfoJson(e, names));
    }
    co_return co_await ctx.SendJson(200, out);
  }

  // DELETE /files?path=... (files) and DELETE /directories?path=... (trees)
  if (s.size() == 1 && m == V::delete_) {
    auto paths = PathParams(ctx);
    if (!paths.ok()) co_return co_await fail(paths.error());
    for (const auto& p : *paths) {
      Json req = {
          {"op", "remove"}, {"path", p}, {"recursive", s[0] == "directories"}, {"user", user}};
      auto r = co_await FsCall(sb, req);
      if (!r.ok()) co_return co_await fail(r.error());
    }
    co_return co_await ctx.SendEmpty(200);
  }

  // POST /directories {path: Permission} and POST /files/permissions
  // {path: Permission}
  const bool mkdir = s.size() == 1 && s[0] == "directories" && m == V::post;
  const bool chmod = s.size() == 2 && s[0] == "files" && s[1] == "permissions" && m == V::post;
  if (mkdir || chmod) {
    auto body = co_await ctx.ReadJson(json_limit_);
    if (!body.ok()) co_return co_await fail(body.error());
    if (!body->is_object() || body->empty()) {
      Error err_ =
          MakeError(Code::kInvalidRequest, "the body must be an object {path: permission}");
      co_return co_await fail(err_);
    }
    IdNames names;
    for (const auto& [p, perm] : body->items())
      if (WantsOwner(perm)) {
        names = co_await LoadIdNames(sb);
        break;
      }
    for (const auto& [p, perm] : body->items()) {
      if (auto st = CheckPath(p, "path"); !st.ok()) co_return co_await fail(st.error());
      auto creq = ChmodRequest(p, perm, names);
      if (!creq.ok()) co_return co_await fail(creq.error());
      if (mkdir) {
        Json req = {{"op", "mkdir"}, {"path", p}, {"user", user}};
        auto r = co_await FsCall(sb, req);
        if (!r.ok()) co_return co_await fail(r.error());
      }
      if (creq->is_null()) continue;
      auto r = co_await FsCall(sb, *creq);
      if (!r.ok()) co_return co_await fail(r.error());
    }
    co_return co_await ctx.SendEmpty(200);
  }

  // POST /files/mv [{src, dest}]
  if (s.size() == 2 && s[0] == "files" && s[1] == "mv" && m == V::post) {
    // An array body (ReadJson takes objects only).
    auto text = co_await ctx.ReadBody(json_limit_);
    if (!text.ok()) co_return co_await fail(text.error());
    Result<Json> body = Json::parse(*text, nullptr, false);
    if (!body->is_array()) {
      Error err_ = MakeError(Code::kInvalidRequest, "the body must be [{src, dest}]");
      co_return co_await fail(err_);
    }
    for (const auto& item : *body) {
      if (!item.is_object()) {
        Error err_ = MakeError(Code::kInvalidRequest, "each move is {src, dest}");
        co_return co_await fail(err_);
      }
      auto src = OptString(item, "src");
      auto dest = OptString(item, "dest");
      if (!src.ok()) co_return co_await fail(src.error());
      if (!dest.ok()) co_return co_await fail(dest.error());
      if (auto st = CheckPath(src->value_or(""), "src"); !st.ok())
        co_return co_await fail(st.error());
      if (auto st = CheckPath(dest->value_or(""), "dest"); !st.ok())
        co_return co_await fail(st.error());
      Json req = {{"op", "move"}, {"path", **src}, {"to", **dest}, {"user", user}};
      auto r = co_await FsCall(sb, req);
      if (!r.ok()) co_return co_await fail(r.error());
    }
    co_return co_await ctx.SendEmpty(200);
  }

  // POST /files/replace {path: {old, new}} (?verbose=true: the counts)
  if (s.size() == 2 && s[0] == "files" && s[1] == "replace" && m == V::post) {
    auto body = co_await ctx.ReadJson(json_limit_);
    if (!body.ok()) co_return co_await fail(body.error());
    if (!body->is_object() || body->empty()) {
      Error err_ =
          MakeError(Code::kInvalidRequest, "the body must be an object {path: {old, new}}");
      co_return co_await fail(err_);
    }
    Json counts = Json::object();
    for (const auto& [p, item] : body->items()) {
      if (auto st = CheckPath(p, "path"); !st.ok()) co_return co_await fail(st.error());
      auto from = item.is_object() ? OptString(item, "old")
                                   : Result<std::optional<std::string>>(std::nullopt);
      auto to = item.is_object() ? OptString(item, "new")
                                 : Result<std::optional<std::string>>(std::nullopt);
      if (!from.ok()) co_return co_await fail(from.error());
      if (!to.ok()) co_return co_await fail(to.error());
      if (!*from || (*from)->empty()) {
        Error err_ =
            MakeError(Code::kInvalidRequest, "'old' of '" + p + "' must be a non-empty string");
        co_return co_await fail(err_);
      }
      Json stat_req = {{"op", "stat"}, {"path", p}, {"user", user}};
      auto st = co_await FsCall(sb, stat_req);
      if (!st.ok()) co_return co_await fail(st.error());
      const Json entry = (*st)["entry"];
      auto text = co_await ReadWholeFile(sb, p, user, kMaxReplaceBytes);
      if (!text.ok()) co_return co_await fail(text.error());
      const size_t n = ReplaceAll(*text, **from, to->value_or(""));
      counts[p] = Json{{"replacedCount", n}};
      if (n == 0) continue;
      // A new file renamed over the old: mode and owner carry over.
      const int mode = entry.value("mode", 0644);
      auto w = co_await WriteWholeFile(sb, p, user, mode, *text);
      if (!w.ok()) co_return co_await fail(w.error());
      Json own = {{"op", "chmod"},
                  {"path", p},
                  {"user", user},
                  {"uid", entry.value("uid", int64_t{0})},
                  {"gid", entry.value("gid", int64_t{0})},
                  {"mode", entry.value("mode", 0644)}};
      auto o = co_await FsCall(sb, own);
      if (!o.ok()) co_return co_await fail(o.error());
    }
    if (ctx.Query("verbose").value_or("") == "true") co_return co_await ctx.SendJson(200, counts);
    co_return co_await ctx.SendEmpty(200);
  }

  {
    Error err_ = MakeError(Code::kNotFound,
                           "no execd route " + std::string(http::to_string(m)) + " " + ctx.path());
    co_await fail(err_);
  }
}

// POST /files/upload: multipart/form-data with pairs of parts, `metadata`
// (JSON {path, mode?, owner?, group?}) then `file` (the bytes), streamed
// into the sandbox as they arrive.
asio::awaitable<void> OpenSandboxApi::Upload(HttpContext& ctx, std::shared_ptr<Sandbox> sb) {
  const std::string ct = ctx.Header("Content-Type");
  const std::string boundary = MultipartBoundary(ct);
  if (ct.rfind("multipart/form-data", 0) != 0 || boundary.empty()) {
    Error e = MakeError(Code::kInvalidRequest,
                        "Content-Type must be multipart/form-data with a boundary");
    co_return co_await SendError(ctx, e);
  }
  MultipartReader reader(boundary);
  enum { kNone, kMeta, kFile, kSkip } part = kNone;
  std::string meta_text;
  Json meta;  // of the file part to come
  std::unique_ptr<FileUpload> current;
  std::string current_path;
  std::optional<IdNames> names;
  int files = 0;
  auto handle = [&](std::vector<MultipartReader::Event> events) -> asio::awaitable<Status> {
    for (auto& ev : events) {
      if (ev.kind == MultipartReader::Event::kPartBegin) {
        if (ev.name == "metadata") {
          part = kMeta;
          meta_text.clear();
        } else if (ev.name == "file") {
          part = kFile;
          if (!meta.is_object())
            co_return MakeError(Code::kInvalidRequest,
                                "a 'file' part must follow its 'metadata' part");
          auto path = OptString(meta, "path");
          if (!path.ok()) co_return path.error();
          current_path = path->value_or("");
          if (auto st = CheckPath(current_path, "metadata.path"); !st.ok()) co_return st.error();
          int mode = 0644;
          auto digits = OptInt(meta, "mode", 0, 7777);
          if (!digits.ok()) co_return digits.error();
          if (*digits && **digits > 0) {
            auto m = ModeFromOctalDigits(**digits);
            if (!m.ok()) co_return m.error();
            mode = *m;
          }
          const std::string root_user = kDefaultUser;
          auto up = co_await FileUpload::Start(sb, current_path, root_user, mode);
          if (!up.ok()) co_return up.error();
          current = std::move(*up);
        } else {
          part = kSkip;  // other form fields
        }
      } else if (ev.kind == MultipartReader::Event::kData) {
        if (part == kMeta) {
          meta_text += ev.data;
          if (meta_text.size() > kMaxMetadataPart)
            co_return MakeError(Code::kInvalidRequest, "metadata part too large");
        } else if (part == kFile) {
          if (auto st = co_await current->Write(ev.data); !st.ok()) co_return st;
        }
      } else {
        if (part == kMeta) {
          meta = Json::parse(meta_text, nullptr, false);
          if (!meta.is_object())
            co_return MakeError(Code::kInvalidRequest, "the metadata part must be a JSON object");
        } else if (part == kFile) {
          auto entry = co_await current->Finish();
          current.reset();
          if (!entry.ok()) co_return entry.error();
          ++files;
          if (WantsOwner(meta)) {
            if (!names) names = co_await LoadIdNames(sb);
            Json perm = {{"owner", meta.value("owner", "")}, {"group", meta.value("group", "")}};
            auto creq = ChmodRequest(current_path, perm, *names);
            if (!creq.ok()) co_return creq.error();
            if (!creq->is_null()) {
              auto r = co_await FsCall(sb, *creq);
              if (!r.ok()) co_return r.error();
            }
          }
          meta = Json();
        }
        part = kNone;
      }
    }
    co_return Status{};
  };
  auto st = co_await ctx.StreamBody([&](std::string_view data) -> asio::awaitable<Status> {
    auto events = reader.Feed(data);
    if (!events.ok()) co_return events.error();
    co_return co_await handle(std::move(*events));
  });
  if (!st.ok()) co_return co_await SendError(ctx, st.error());
  if (!reader.done()) {
    Error e = MakeError(Code::kInvalidRequest, "multipart body ended before its closing boundary");
    co_return co_await SendError(ctx, e);
  }
  if (files == 0) {
    Error e = MakeError(Code::kInvalidRequest, "no 'file' part in the multipart body");
    co_return co_await SendError(ctx, e);
  }
  co_await ctx.SendEmpty(200);
}

}  // namespace hutch::api::opensandbox
