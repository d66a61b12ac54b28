// /v1/volumes: named persistent volumes and their files.
//
// A volume's files are handled by hutchd itself on the host mount, not by
// an agent: every path goes through the rooted file operations
// (common/rooted_fs.h: openat2 with RESOLVE_IN_ROOT, so `..` and symlinks a
// sandbox planted stay inside the volume), under the file-system identity
// of a sandbox's root (FsIdentity with kKeepCaps: new files belong to it,
// so sandboxes can change them, and like that root hutchd may read any file
// on the volume). The
// volume is its own ext4 filesystem: nothing on it can be a hard link to a
// host file.
#include <fcntl.h>
#include <unistd.h>

#include "api/common/json_fields.h"
#include "api/v1/v1_api.h"
#include "common/ext4_image.h"
#include "common/rooted_fs.h"
#include "core/file_ops.h"
#include "http/byte_range.h"

namespace hutch::api {

namespace {

// The request's path, made absolute inside the volume.
Result<std::string> VolumePath(const std::optional<std::string>& p, const char* key) {
  if (!p) return MakeError(Code::kInvalidRequest, std::string("'") + key + "' is required");
  if (auto st = CheckPath(*p, key); !st.ok()) return st.error();
  return NormalizePath(*p, "/");
}

// An O_PATH fd of the volume's top directory on the host.
Result<UniqueFd> OpenVolumeRoot(VolumeManager* vm, const std::string& name) {
  auto dir = vm->DataDir(name);
  if (!dir.ok()) return dir.error();
  UniqueFd fd(open(dir->c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return ErrnoError("open " + *dir);
  return fd;
}

}  // namespace

nlohmann::json V1Api::VolumeJson(const VolumeRecord& r) {
  nlohmann::json j = r.ToJson();
  j["in_use_by"] = mgr_->VolumeUsers(r.name);
  if (auto dir = mgr_->volumes()->DataDir(r.name); dir.ok()) {
    if (auto u = FsUsageOf(*dir); u.ok()) j["used_bytes"] = u->used_bytes;
  }
  return j;
}

asio::awaitable<void> V1Api::RouteVolumes(HttpContext& ctx, const std::vector<std::string>& seg) {
  using V = http::verb;
  const V m = ctx.method();
  const size_t n = seg.size();
  VolumeManager* vm = mgr_->volumes();
  if (!vm)
    co_return co_await ctx.SendError(MakeError(Code::kNotSupported, "this server has no volumes"));
  if (n == 2) {
    if (m == V::post) co_return co_await CreateVolume(ctx);
    if (m == V::get) {
      nlohmann::json out = {{"volumes", nlohmann::json::array()}};
      for (const auto& r : vm->List())
        if (ctx.principal().Owns(r.owner)) out["volumes"].push_back(VolumeJson(r));
      co_return co_await ctx.SendJson(200, out);
    }
    co_return co_await ctx.SendError(MethodNotAllowed(m));
  }
  const std::string& name = seg[2];
  auto rec = vm->Get(name);
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  if (n == 3) {
    if (m == V::get) co_return co_await ctx.SendJson(200, VolumeJson(*rec));
    if (m == V::delete_) {
      auto users = mgr_->VolumeUsers(name);
      if (!users.empty()) {
        std::string list;
        for (const auto& u : users) list += (list.empty() ? "" : ", ") + u;
        co_return co_await ctx.SendError(MakeError(
            Code::kConflict, "volume " + name + " is mounted by " + list + "; delete those first"));
      }
      if (auto st = vm->Delete(name); !st.ok()) co_return co_await ctx.SendError(st.error());
      co_return co_await ctx.SendEmpty(204);
    }
    co_return co_await ctx.SendError(MethodNotAllowed(m));
  }
  if (seg[3] != "fs" || n > 5)
    co_return co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
  const std::string op = n == 5 ? seg[4] : "";
  if (op.empty()) {
    if (m == V::get) co_return co_await VolumeFileGet(ctx, name);
    if (m == V::put) co_return co_await VolumeFilePut(ctx, name);
  } else if (op == "list" || op == "stat") {
    if (m == V::get) co_return co_await VolumeFileOp(ctx, name, op);
  } else if (op == "mkdir" || op == "move") {
    if (m == V::post) co_return co_await VolumeFileOp(ctx, name, op);
  } else {
    co_return co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
  }
  if (op.empty() && m == V::delete_) co_return co_await VolumeFileOp(ctx, name, "remove");
  co_await ctx.SendError(MethodNotAllowed(m));
}

asio::awaitable<void> V1Api::CreateVolume(HttpContext& ctx) {
  auto body = co_await ctx.ReadJson(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  if (auto st = RejectUnknownFields(*body, {"name", "size_mb"}); !st.ok())
    co_return co_await ctx.SendError(st.error());
  HUTCH_FIELD(name, OptString(*body, "name"));
  HUTCH_FIELD(size, OptInt(*body, "size_mb", 1, int64_t{1} << 30));
  if (!*name)
    co_return co_await ctx.SendError(MakeError(Code::kInvalidRequest, "'name' is required"));
  const auth::Principal& who = ctx.principal();
  auto rec = co_await mgr_->volumes()->Create(**name, *size, who.owner,
                                              who.admin() ? nullptr : &mgr_->options().quotas);
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  co_await ctx.SendJson(201, VolumeJson(*rec));
}

asio::awaitable<void> V1Api::VolumeFileOp(HttpContext& ctx, const std::string& name,
                                          const std::string& op) {
  nlohmann::json body = nlohmann::json::object();
  if (op == "mkdir" || op == "move") {
    auto b = co_await ctx.ReadJson(cfg_.json_body_limit);
    if (!b.ok()) co_return co_await ctx.SendError(b.error());
    body = *b;
    auto st = op == "mkdir" ? RejectUnknownFields(body, {"path"})
                            : RejectUnknownFields(body, {"from", "to"});
    if (!st.ok()) co_return co_await ctx.SendError(st.error());
  }
  auto str = [&](const char* key) -> std::optional<std::string> {
    auto it = body.find(key);
    if (it == body.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  HUTCH_FIELD(path, VolumePath(op == "move"    ? str("from")
                               : op == "mkdir" ? str("path")
                                               : ctx.Query("path"),
                               op == "move" ? "from" : "path"));
  HUTCH_FIELD(depth, QueryInt(ctx.Query("depth"), "depth", 1, 32));
  std::string recursive = ctx.Query("recursive").value_or("false");
  if (recursive != "true" && recursive != "false")
    co_return co_await ctx.SendError(
        MakeError(Code::kInvalidRequest, "'recursive' must be true or false"));
  std::string to;
  if (op == "move") {
    auto t = VolumePath(str("to"), "to");
    if (!t.ok()) co_return co_await ctx.SendError(t.error());
    to = *t;
  }
  auto root = OpenVolumeRoot(mgr_->volumes(), name);
  if (!root.ok()) co_return co_await ctx.SendError(root.error());
  const int r = root->get();
  const uint32_t uid = mgr_->volumes()->options().uid_base;
  // Synchronous: no co_await while the identity is held.
  Result<nlohmann::json> out = [&]() -> Result<nlohmann::json> {
    FsIdentity identity(uid, uid, FsIdentity::kKeepCaps);
    if (op == "stat") return StatEntry(r, *path);
    if (op == "list") {
      auto e = ListEntries(r, *path, static_cast<int>(depth->value_or(1)));
      if (!e.ok()) return e.error();
      return nlohmann::json{{"entries", *e}};
    }
    if (op == "mkdir") return MakeDirs(r, *path);
    if (op == "move") return Move(r, *path, to);
    if (auto st = Remove(r, *path, recursive == "true"); !st.ok()) return st.error();
    return nlohmann::json::object();
  }();
  if (!out.ok()) co_return co_await ctx.SendError(out.error());
  if (op == "list") {
    for (auto& e : (*out)["entries"]) e = EntryToApi(e);
    co_return co_await ctx.SendJson(200, *out);
  }
  if (op == "remove") co_return co_await ctx.SendEmpty(204);
  co_await ctx.SendJson(op == "mkdir" ? 201 : 200, EntryToApi(*out));
}

asio::awaitable<void> V1Api::VolumeFileGet(HttpContext& ctx, const std::string& name) {
  HUTCH_FIELD(path, VolumePath(ctx.Query("path"), "path"));
  auto root = OpenVolumeRoot(mgr_->volumes(), name);
  if (!root.ok()) co_return co_await ctx.SendError(root.error());
  const uint32_t uid = mgr_->volumes()->options().uid_base;
  Result<ReadSource> src = [&] {
    FsIdentity identity(uid, uid, FsIdentity::kKeepCaps);
    return OpenForRead(root->get(), *path, 0, -1);
  }();
  if (!src.ok()) co_return co_await ctx.SendError(src.error());
  const int64_t size = static_cast<int64_t>(src->size);
  auto w = FitRange(ParseRange(ctx.Header("Range")), size);
  if (!w.ok()) {
    ctx.AddHeader("Content-Range", "bytes */" + std::to_string(size));
    co_return co_await ctx.SendError(w.error());
  }
  const int64_t offset = w->offset, length = w->length < 0 ? size - offset : w->length;
  std::vector<std::pair<std::string, std::string>> headers = {{"Accept-Ranges", "bytes"}};
  if (w->partial)
    headers.push_back({"Content-Range", "bytes " + std::to_string(offset) + "-" +
                                            std::to_string(offset + length - 1) + "/" +
                                            std::to_string(size)});
  if (auto st = co_await ctx.BeginStream(w->partial ? 206 : 200, "application/octet-stream", length,
                                         headers);
      !st.ok())
    co_return;
  std::string buf(256 * 1024, '\0');
  int64_t sent = 0;
  while (sent < length) {
    size_t want =
        static_cast<size_t>(std::min<int64_t>(length - sent, static_cast<int64_t>(buf.size())));
    ssize_t got = pread(src->fd.get(), buf.data(), want, offset + sent);
    if (got <= 0) break;  // shrank under us: the short body closes the connection
    if (auto st = co_await ctx.WriteChunk(std::string_view(buf.data(), static_cast<size_t>(got)));
        !st.ok())
      co_return;
    sent += got;
  }
  if (sent != length) co_return;
  (void)co_await ctx.EndStream();
}

asio::awaitable<void> V1Api::VolumeFilePut(HttpContext& ctx, const std::string& name) {
  HUTCH_FIELD(path, VolumePath(ctx.Query("path"), "path"));
  int mode = 0644;
  if (auto m = ctx.Query("mode")) {
    char* end = nullptr;
    long v = std::strtol(m->c_str(), &end, 8);
    if (m->empty() || *end != '\0' || v < 0 || v > 07777)
      co_return co_await ctx.SendError(
          MakeError(Code::kInvalidRequest, "'mode' must be octal, e.g. 0644"));
    mode = static_cast<int>(v);
  }
  auto root = OpenVolumeRoot(mgr_->volumes(), name);
  if (!root.ok()) co_return co_await ctx.SendError(root.error());
  const uint32_t uid = mgr_->volumes()->options().uid_base;
  Result<TempFile> tmp = [&] {
    FsIdentity identity(uid, uid, FsIdentity::kKeepCaps);
    return TempFile::Create(root->get(), *path, static_cast<mode_t>(mode));
  }();
  if (!tmp.ok()) co_return co_await ctx.SendError(tmp.error());
  TempFile& t = *tmp;
  // The volume's size cap is its filesystem's size: a full volume answers
  // no_space and the temp file is removed.
  auto st = co_await ctx.StreamBody([&t](std::string_view data) -> asio::awaitable<Status> {
    co_return t.Append(data.data(), data.size());
  });
  if (!st.ok()) co_return co_await ctx.SendError(st.error());
  Result<nlohmann::json> entry = [&] {
    FsIdentity identity(uid, uid, FsIdentity::kKeepCaps);
    return t.Commit();
  }();
  if (!entry.ok()) co_return co_await ctx.SendError(entry.error());
  nlohmann::json out = {{"path", *path}, {"size", entry->value("size", int64_t{0})}};
  co_await ctx.SendJson(201, out);
}

}  // namespace hutch::api
