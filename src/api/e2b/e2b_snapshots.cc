// E2B snapshots onto hutch snapshots (core/snapshot.h): take one of a
// sandbox (`POST /sandboxes/{id}/snapshots`), list them (`GET /snapshots`),
// delete one (E2B deletes a snapshot as the template it is:
// `DELETE /templates/{id}`), and create a sandbox from one (its id or name
// given as the create's templateID: e2b_control.cc). A name is the
// owner's: naming a new snapshot moves it from the older one. A hutch snapshot holds the
// sandbox's files, not its memory: sandboxes made from it start fresh
// processes, what E2B calls a filesystem snapshot.
#include <algorithm>

#include "api/common/json_fields.h"
#include "api/e2b/e2b_api.h"

namespace hutch::api::e2b {

namespace {

// E2B's SnapshotInfo: `names` holds the name its owner gave it, if any.
Json SnapshotInfo(const SnapshotRecord& s) {
  Json names = Json::array();
  if (!s.name.empty()) names.push_back(s.name);
  return {{"snapshotID", s.id}, {"names", names}, {"sandboxID", s.sandbox_id}};
}

}  // namespace

asio::awaitable<void> E2bApi::CreateSnapshot(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  // `memory: true` (the SDK's mode="full") asks for the running processes
  // too, which a hutch snapshot cannot hold; absent is the server's
  // default, which in hutch is the filesystem.
  auto memory = OptBool(*body, "memory");
  if (!memory.ok()) co_return co_await SendControlError(ctx, memory.error());
  if (memory->value_or(false)) {
    Error e = MakeError(Code::kNotSupported,
                        "memory snapshots (mode \"full\") are not supported by hutch: a snapshot "
                        "keeps the sandbox's files only (use mode \"filesystem\")");
    co_return co_await SendControlError(ctx, e);
  }
  // A name moves to the new snapshot from an older one of the same owner
  // (E2B assigns the new build to the existing name).
  auto name = OptString(*body, "name");
  if (!name.ok()) co_return co_await SendControlError(ctx, name.error());
  if (*name && (IsSnapshotId(**name) || (*name)->empty())) {
    Error e = MakeError(Code::kInvalidRequest, "a snapshot name may not be empty or start snap_");
    co_return co_await SendControlError(ctx, e);
  }
  if (auto rec = Visible(mgr_, id); !rec.ok())
    co_return co_await SendControlError(ctx, rec.error());
  auto snap = co_await mgr_->Snapshot(id, !ctx.principal().admin());
  if (!snap.ok()) co_return co_await SendControlError(ctx, snap.error());
  if (*name) {
    snap = mgr_->NameSnapshot(snap->id, **name);
    if (!snap.ok()) co_return co_await SendControlError(ctx, snap.error());
  }
  co_await ctx.SendJson(201, SnapshotInfo(*snap));
}

asio::awaitable<void> E2bApi::ListSnapshots(HttpContext& ctx) {
  size_t limit = 100;
  std::string sandbox, name, after;
  for (const auto& [k, v] : ctx.query_list()) {
    if (k == "sandboxID") sandbox = v;
    else if (k == "name") name = v;
    else if (k == "nextToken") after = v;
    else if (k == "limit") {
      auto n = QueryInt(v, "limit", 1, 1000);
      if (!n.ok()) co_return co_await SendControlError(ctx, n.error());
      limit = static_cast<size_t>(**n);
    }
  }
  std::vector<SnapshotRecord> all;
  for (auto& s : mgr_->ListSnapshots()) {
    if (!ctx.principal().Owns(s.owner)) continue;
    if (!sandbox.empty() && s.sandbox_id != sandbox) continue;
    // E2B filters by name or id.
    if (!name.empty() && s.id != name && s.name != name) continue;
    all.push_back(std::move(s));
  }
  // Newest first, as E2B lists; the page token is the last id answered.
  std::sort(all.begin(), all.end(), [](const SnapshotRecord& a, const SnapshotRecord& b) {
    return a.created_at != b.created_at ? a.created_at > b.created_at : a.id < b.id;
  });
  size_t start = 0;
  if (!after.empty()) {
    auto it = std::find_if(all.begin(), all.end(),
                           [&after](const SnapshotRecord& s) { return s.id == after; });
    if (it == all.end()) {
      Error e = MakeError(Code::kInvalidRequest, "nextToken '" + after + "' names no snapshot");
      co_return co_await SendControlError(ctx, e);
    }
    start = static_cast<size_t>(it - all.begin()) + 1;
  }
  Json out = Json::array();
  const size_t end = std::min(all.size(), start + limit);
  for (size_t i = start; i < end; ++i) out.push_back(SnapshotInfo(all[i]));
  if (end < all.size() && end > start) ctx.AddHeader("X-Next-Token", all[end - 1].id);
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> E2bApi::DeleteTemplate(HttpContext& ctx, const std::string& id) {
  // A snapshot by id, or by the name its owner gave it.
  std::string snap_id = id;
  if (!IsSnapshotId(id)) {
    auto named = mgr_->SnapshotNamed(ctx.principal().owner, id);
    // Not a snapshot: a template built through E2B (or /v1), with its tags.
    if (!named.ok()) co_return co_await templates_.DeleteTemplate(ctx, id);
    snap_id = named->id;
  }
  auto snap = mgr_->GetSnapshot(snap_id);
  if (snap.ok() && !ctx.principal().Owns(snap->owner))
    snap = MakeError(Code::kSnapshotNotFound, "snapshot " + id + " not found");
  if (!snap.ok()) co_return co_await SendControlError(ctx, snap.error());
  if (auto st = mgr_->DeleteSnapshot(snap_id); !st.ok())
    co_return co_await SendControlError(ctx, st.error());
  co_await ctx.SendEmpty(204);
}

}  // namespace hutch::api::e2b
