// /v1/sandboxes/{id}/fs...: binary-safe streamed upload and download,
// list, stat, delete, mkdir, move. The agent does every operation inside
// the sandbox's root.
#include "api/common/file_send.h"
#include "api/common/json_fields.h"
#include "api/v1/v1_api.h"
#include "core/file_ops.h"

namespace hutch::api {

namespace {

Result<std::string> PathParam(const HttpContext& ctx) {
  auto p = ctx.Query("path");
  if (!p) return MakeError(Code::kInvalidRequest, "query parameter 'path' is required");
  if (auto st = CheckPath(*p, "path"); !st.ok()) return st.error();
  return *p;
}

}  // namespace

asio::awaitable<void> V1Api::FileGet(HttpContext& ctx, const std::string& id) {
  HUTCH_FIELD(path, PathParam(ctx));
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  auto st = co_await SendSandboxFile(ctx, *sb, *path, ctx.Query("user").value_or(""));
  if (!st.ok()) co_await ctx.SendError(st.error());
}

asio::awaitable<void> V1Api::FilePut(HttpContext& ctx, const std::string& id) {
  HUTCH_FIELD(path, PathParam(ctx));
  int mode = 0644;
  if (auto m = ctx.Query("mode")) {
    char* end = nullptr;
    long v = std::strtol(m->c_str(), &end, 8);
    if (m->empty() || *end != '\0' || v < 0 || v > 07777)
      co_return co_await ctx.SendError(
          MakeError(Code::kInvalidRequest, "'mode' must be octal, e.g. 0644"));
    mode = static_cast<int>(v);
  }
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  auto up = co_await FileUpload::Start(*sb, *path, ctx.Query("user").value_or(""), mode);
  if (!up.ok()) co_return co_await ctx.SendError(up.error());
  auto& u = **up;
  auto st = co_await ctx.StreamBody(
      [&u](std::string_view data) -> asio::awaitable<Status> { co_return co_await u.Write(data); });
  if (!st.ok()) co_return co_await ctx.SendError(st.error());
  auto entry = co_await u.Finish();
  if (!entry.ok()) co_return co_await ctx.SendError(entry.error());
  nlohmann::json out = {{"path", entry->value("path", *path)},
                        {"size", entry->value("size", int64_t{0})}};
  co_await ctx.SendJson(201, out);
}

asio::awaitable<void> V1Api::FileDelete(HttpContext& ctx, const std::string& id) {
  HUTCH_FIELD(path, PathParam(ctx));
  auto rec = ctx.Query("recursive").value_or("false");
  if (rec != "true" && rec != "false")
    co_return co_await ctx.SendError(
        MakeError(Code::kInvalidRequest, "'recursive' must be true or false"));
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  nlohmann::json req = {{"op", "remove"}, {"path", *path}, {"recursive", rec == "true"}};
  if (auto u = ctx.Query("user")) req["user"] = *u;
  auto r = co_await FsCall(*sb, req);
  if (!r.ok()) co_return co_await ctx.SendError(r.error());
  co_await ctx.SendEmpty(204);
}

asio::awaitable<void> V1Api::FileList(HttpContext& ctx, const std::string& id, bool stat_only) {
  HUTCH_FIELD(path, PathParam(ctx));
  HUTCH_FIELD(depth, QueryInt(ctx.Query("depth"), "depth", 1, 32));
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  nlohmann::json req = {{"op", stat_only ? "stat" : "list"}, {"path", *path}};
  if (!stat_only) req["depth"] = depth->value_or(1);
  if (auto u = ctx.Query("user")) req["user"] = *u;
  auto r = co_await FsCall(*sb, req);
  if (!r.ok()) co_return co_await ctx.SendError(r.error());
  if (stat_only) co_return co_await ctx.SendJson(200, (*r)["entry"]);
  nlohmann::json out = {{"entries", (*r)["entries"]}};
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> V1Api::FileMkdir(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  if (auto st = RejectUnknownFields(*body, {"path", "user"}); !st.ok())
    co_return co_await ctx.SendError(st.error());
  HUTCH_FIELD(path, OptString(*body, "path"));
  HUTCH_FIELD(user, OptString(*body, "user"));
  if (auto st = CheckPath(path->value_or(""), "path"); !st.ok())
    co_return co_await ctx.SendError(st.error());
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  nlohmann::json req = {{"op", "mkdir"}, {"path", **path}};
  if (*user) req["user"] = **user;
  else if (auto u = ctx.Query("user")) req["user"] = *u;
  auto r = co_await FsCall(*sb, req);
  if (!r.ok()) co_return co_await ctx.SendError(r.error());
  co_await ctx.SendJson(201, (*r)["entry"]);
}

asio::awaitable<void> V1Api::FileMove(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  if (auto st = RejectUnknownFields(*body, {"from", "to", "user"}); !st.ok())
    co_return co_await ctx.SendError(st.error());
  HUTCH_FIELD(from, OptString(*body, "from"));
  HUTCH_FIELD(to, OptString(*body, "to"));
  HUTCH_FIELD(user, OptString(*body, "user"));
  if (auto st = CheckPath(from->value_or(""), "from"); !st.ok())
    co_return co_await ctx.SendError(st.error());
  if (auto st = CheckPath(to->value_or(""), "to"); !st.ok())
    co_return co_await ctx.SendError(st.error());
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  nlohmann::json req = {{"op", "move"}, {"path", **from}, {"to", **to}};
  if (*user) req["user"] = **user;
  else if (auto u = ctx.Query("user")) req["user"] = *u;
  auto r = co_await FsCall(*sb, req);
  if (!r.ok()) co_return co_await ctx.SendError(r.error());
  co_await ctx.SendJson(200, (*r)["entry"]);
}

}  // namespace hutch::api
