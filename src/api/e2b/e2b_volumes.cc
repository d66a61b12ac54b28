// E2B volumes onto hutch's named volumes (core/volume_manager.h): create
// (`POST /volumes {name}`), list, get and delete by id, where a hutch
// volume's id is its name. Sandboxes mount them at create (`volumeMounts`,
// e2b_control.cc). E2B's volume content API (files of a volume without a
// sandbox, on its own host with the volume's token) is not served: the
// token answered is empty, and /v1's volume file routes do that job.
#include "api/common/json_fields.h"
#include "api/e2b/e2b_api.h"

namespace hutch::api::e2b {

namespace {

Json VolumeJson(const VolumeRecord& v, bool with_token) {
  Json j = {{"volumeID", v.name}, {"name", v.name}};
  if (with_token) j["token"] = "";
  return j;
}

Error NoVolumes() {
  return MakeError(Code::kNotSupported, "volumes are not configured on this server");
}

}  // namespace

// The caller's volume `id`: another owner's reads as not found.
Result<VolumeRecord> E2bApi::OwnVolume(const HttpContext& ctx, const std::string& id) const {
  if (mgr_->volumes() == nullptr) return NoVolumes();
  auto v = mgr_->volumes()->Get(id);
  if (v.ok() && !ctx.principal().Owns(v->owner))
    return MakeError(Code::kNotFound, "volume " + id + " not found");
  return v;
}

asio::awaitable<void> E2bApi::CreateVolume(HttpContext& ctx) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  auto name = OptString(*body, "name");
  if (!name.ok()) co_return co_await SendControlError(ctx, name.error());
  if (!*name) {
    Error e = MakeError(Code::kInvalidRequest, "'name' is required");
    co_return co_await SendControlError(ctx, e);
  }
  if (mgr_->volumes() == nullptr) {
    Error e = NoVolumes();
    co_return co_await SendControlError(ctx, e);
  }
  const auth::Principal& who = ctx.principal();
  auto rec = co_await mgr_->volumes()->Create(**name, std::nullopt, who.owner,
                                              who.admin() ? nullptr : &mgr_->options().quotas);
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  co_await ctx.SendJson(201, VolumeJson(*rec, true));
}

asio::awaitable<void> E2bApi::ListVolumes(HttpContext& ctx) {
  Json out = Json::array();
  if (mgr_->volumes() != nullptr)
    for (const auto& v : mgr_->volumes()->List())
      if (ctx.principal().Owns(v.owner)) out.push_back(VolumeJson(v, false));
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> E2bApi::GetVolume(HttpContext& ctx, const std::string& id) {
  auto v = OwnVolume(ctx, id);
  if (!v.ok()) co_return co_await SendControlError(ctx, v.error());
  co_await ctx.SendJson(200, VolumeJson(*v, true));
}

asio::awaitable<void> E2bApi::DeleteVolume(HttpContext& ctx, const std::string& id) {
  auto v = OwnVolume(ctx, id);
  if (!v.ok()) co_return co_await SendControlError(ctx, v.error());
  if (auto users = mgr_->VolumeUsers(id); !users.empty()) {
    Error e = MakeError(Code::kConflict, "volume " + id + " is mounted by " + users.front() +
                                             (users.size() > 1 ? " and others" : "") +
                                             "; kill those sandboxes first");
    co_return co_await SendControlError(ctx, e);
  }
  if (auto st = mgr_->volumes()->Delete(id); !st.ok())
    co_return co_await SendControlError(ctx, st.error());
  co_await ctx.SendEmpty(204);
}

}  // namespace hutch::api::e2b
