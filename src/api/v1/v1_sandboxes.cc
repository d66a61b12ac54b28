// /v1/sandboxes: create, list, get, delete, ttl, metrics.
#include "api/common/json_fields.h"
#include "api/v1/sandbox_watch.h"
#include "api/v1/v1_api.h"

namespace hutch::api {

asio::awaitable<void> V1Api::CreateSandbox(HttpContext& ctx) {
  // (Not ReadJson: a create may carry a vault, and a parse error would
  // quote the body.)
  auto body = co_await ReadSecretJson(ctx);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  const auto& j = *body;
  if (auto st = RejectUnknownFields(
          j, {"template", "image", "ttl_seconds", "env", "metadata", "cpu", "memory_mb", "disk_mb",
              "network", "snapshot", "volumes", "auto_pause_seconds", "driver", "vault"});
      !st.ok())
    co_return co_await ctx.SendError(st.error());
  HUTCH_FIELD(tpl, OptString(j, "template"));
  HUTCH_FIELD(image, OptString(j, "image"));
  HUTCH_FIELD(ttl, OptInt(j, "ttl_seconds", 1, INT32_MAX));
  HUTCH_FIELD(env, OptEnvMap(j, "env"));
  HUTCH_FIELD(meta, OptStringMap(j, "metadata"));
  HUTCH_FIELD(cpu, OptNumber(j, "cpu", 0.01, 64));
  HUTCH_FIELD(mem, OptInt(j, "memory_mb", 16, 1 << 20));
  HUTCH_FIELD(disk, OptInt(j, "disk_mb", 16, 1 << 24));
  HUTCH_FIELD(snapshot, OptString(j, "snapshot"));
  HUTCH_FIELD(auto_pause, OptInt(j, "auto_pause_seconds", 0, 7 * 24 * 3600));
  HUTCH_FIELD(driver, OptString(j, "driver"));
  if (*snapshot && *tpl)
    co_return co_await ctx.SendError(
        MakeError(Code::kInvalidRequest,
                  "give 'template' or 'snapshot', not both (a snapshot knows its template)"));
  if (*image && (*tpl || *snapshot))
    co_return co_await ctx.SendError(
        MakeError(Code::kInvalidRequest, "give one of 'image', 'template' and 'snapshot'"));
  // An OCI image reference: its template ("image:<ref>") is pulled on
  // first use (core/image_puller.h).
  if (*image) *tpl = kImageTemplatePrefix + **image;
  net::NetworkPolicy network;
  if (auto it = j.find("network"); it != j.end() && !it->is_null()) {
    auto p = net::ParseNetworkPolicy(*it);
    if (!p.ok()) co_return co_await ctx.SendError(p.error());
    network = std::move(p).value();
  }
  CreateOptions o;
  if (*driver) o.driver = **driver;
  if (auto it = j.find("volumes"); it != j.end() && !it->is_null()) {
    if (!it->is_array())
      co_return co_await ctx.SendError(
          MakeError(Code::kInvalidRequest, "'volumes' must be an array"));
    for (const auto& v : *it) {
      if (!v.is_object())
        co_return co_await ctx.SendError(MakeError(
            Code::kInvalidRequest, "each of 'volumes' must be an object {name, path, read_only?}"));
      if (auto st = RejectUnknownFields(v, {"name", "path", "read_only"}); !st.ok())
        co_return co_await ctx.SendError(st.error());
      HUTCH_FIELD(vname, OptString(v, "name"));
      HUTCH_FIELD(vpath, OptString(v, "path"));
      HUTCH_FIELD(ro, OptBool(v, "read_only"));
      if (!*vname || !*vpath)
        co_return co_await ctx.SendError(
            MakeError(Code::kInvalidRequest, "each volume needs 'name' and 'path'"));
      o.volumes.push_back({**vname, **vpath, ro->value_or(false)});
    }
  }
  o.network = std::move(network);
  auto vault_spec = CreateVault(j, &o);
  if (!vault_spec.ok()) co_return co_await ctx.SendError(vault_spec.error());
  if (*tpl) o.template_name = **tpl;
  if (*auto_pause) o.auto_pause_seconds = **auto_pause;
  if (*ttl) o.ttl_seconds = **ttl;
  if (*env)
    for (const auto& [k, v] : **env) o.env[k] = v;
  if (*meta) o.metadata = **meta;
  if (*cpu) o.cpu = **cpu;
  if (*mem) o.memory_mb = **mem;
  if (*disk) o.disk_mb = **disk;
  if (*snapshot) o.snapshot = **snapshot;
  o.owner_key = ctx.principal().owner;
  o.scope = ctx.principal().Scope();
  std::string idem = ctx.Header("Idempotency-Key");
  bool replayed = false;
  const auto t0 = std::chrono::steady_clock::now();
  Result<SandboxRecord> rec = MakeError(Code::kInternal, "unreachable");
  if (!idem.empty()) {
    bool printable = idem.size() <= 255;
    for (unsigned char ch : idem) printable &= ch >= 0x20 && ch < 0x7f;
    if (!printable)
      co_return co_await ctx.SendError(MakeError(
          Code::kInvalidRequest, "Idempotency-Key must be 1-255 printable ASCII characters"));
    // nlohmann::json keeps object keys sorted: dump() is a canonical form,
    // so the same fields in another order count as the same body.
    rec = co_await mgr_->CreateIdempotent(std::move(o), idem, j.dump(), &replayed);
  } else {
    rec = co_await mgr_->Create(std::move(o));
  }
  if (!rec.ok()) {
    ++metrics_.sandbox_create_failures;
    co_return co_await ctx.SendError(rec.error());
  }
  if (*vault_spec && !replayed) {
    if (auto st = mgr_->vaults()->Replace(rec->id, std::move(**vault_spec)); !st.ok()) {
      // A sandbox without the vault it asked for is not what was created.
      auto gone = co_await mgr_->Delete(rec->id, "vault not stored");
      (void)gone;
      co_return co_await ctx.SendError(st.error());
    }
    // Armed before the answer: the sandbox's first request is served.
    if (auto settled = co_await Settled(rec->id); !settled.ok())
      co_return co_await ctx.SendError(settled.error());
  }
  if (!replayed) {
    ++metrics_.sandboxes_created;
    metrics_.sandbox_create_seconds.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  co_await ctx.SendJson(replayed ? 200 : 201, SandboxOut(*rec));
}

Result<std::optional<vault::Vault>> V1Api::CreateVault(const nlohmann::json& j, CreateOptions* o) {
  auto it = j.find("vault");
  if (it == j.end() || it->is_null()) return std::optional<vault::Vault>();
  if (!mgr_->vaults())
    return MakeError(Code::kNotSupported, "credential vaults are not configured on this server");
  auto v = vault::ParseVault(*it, mgr_->vaults()->sources());
  if (!v.ok()) return v.error().Context("vault");
  vault::AddTrustStoreEnv(o->env);
  return std::optional<vault::Vault>(std::move(v).value());
}

asio::awaitable<void> V1Api::ListSandboxes(HttpContext& ctx) {
  ListFilter f;
  if (auto s = ctx.Query("status")) {
    SandboxStatus st;
    if (!ParseStatus(*s, &st))
      co_return co_await ctx.SendError(
          MakeError(Code::kInvalidRequest, "unknown status '" + *s + "'"));
    f.status = st;
  }
  HUTCH_FIELD(limit, QueryInt(ctx.Query("limit"), "limit", 1, 1000));
  if (*limit) f.limit = static_cast<size_t>(**limit);
  if (auto c = ctx.Query("cursor")) f.cursor = *c;
  for (const auto& [k, v] : ctx.query()) {
    if (k.rfind("metadata.", 0) == 0) f.metadata[k.substr(9)] = v;
    else if (k != "status" && k != "limit" && k != "cursor" && k != "watch")
      co_return co_await ctx.SendError(
          MakeError(Code::kInvalidRequest, "unknown query parameter '" + k + "'"));
  }
  f.owner = ctx.principal().Scope();
  if (auto w = ctx.Query("watch"); w && *w != "false") {
    if (*w != "true")
      co_return co_await ctx.SendError(
          MakeError(Code::kInvalidRequest, "'watch' must be true or false"));
    co_return co_await WatchSandboxes(ctx, *mgr_, f, cfg_.sse_ping_interval, metrics_.open_streams);
  }
  auto page = mgr_->List(f);
  nlohmann::json items = nlohmann::json::array();
  for (const auto& r : page.items) items.push_back(SandboxOut(r));
  nlohmann::json out = {{"items", items}, {"next_cursor", nullptr}};
  if (!page.next_cursor.empty()) out["next_cursor"] = page.next_cursor;
  co_await ctx.SendJson(200, out);
}

nlohmann::json V1Api::SandboxOut(const SandboxRecord& r) const {
  nlohmann::json j = r.ToJson();
  if (!cfg_.node.empty()) j["node"] = cfg_.node;
  return j;
}

asio::awaitable<void> V1Api::GetSandbox(HttpContext& ctx, const std::string& id) {
  auto rec = mgr_->Get(id);
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  co_await ctx.SendJson(200, SandboxOut(*rec));
}

asio::awaitable<void> V1Api::DeleteSandbox(HttpContext& ctx, const std::string& id) {
  auto st = co_await mgr_->Delete(id);
  if (!st.ok()) co_return co_await ctx.SendError(st.error());
  co_await ctx.SendEmpty(204);
}

asio::awaitable<void> V1Api::SetTtl(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  if (auto st = RejectUnknownFields(*body, {"ttl_seconds"}); !st.ok())
    co_return co_await ctx.SendError(st.error());
  HUTCH_FIELD(ttl, OptInt(*body, "ttl_seconds", 1, INT32_MAX));
  if (!*ttl)
    co_return co_await ctx.SendError(MakeError(Code::kInvalidRequest, "'ttl_seconds' is required"));
  auto rec = mgr_->SetTtl(id, **ttl);
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  co_await ctx.SendJson(200, SandboxOut(*rec));
}

asio::awaitable<void> V1Api::PauseResume(HttpContext& ctx, const std::string& id, bool pause) {
  // No body is needed; one that is sent must be JSON (an empty object).
  auto body = co_await ctx.ReadBody(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  auto rec = pause ? mgr_->Pause(id) : mgr_->Resume(id);
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  co_await ctx.SendJson(200, SandboxOut(*rec));
}

asio::awaitable<void> V1Api::SandboxMetrics(HttpContext& ctx, const std::string& id) {
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  auto stats = (*sb)->instance->Stats();
  if (!stats.ok()) co_return co_await ctx.SendError(stats.error());
  auto uptime = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now() - (*sb)->rec.created_at);
  nlohmann::json out = {{"cpu_seconds", static_cast<double>(stats->cpu_usage_ns) / 1e9},
                        {"memory_bytes", stats->memory_current},
                        {"memory_peak_bytes", stats->memory_peak},
                        {"pids", stats->pids_current},
                        {"oom_kills", stats->oom_kills},
                        {"disk_used_bytes", stats->disk_used_bytes},
                        {"disk_limit_bytes", stats->disk_limit_bytes},
                        {"net_rx_bytes", stats->net_rx_bytes},
                        {"net_tx_bytes", stats->net_tx_bytes},
                        {"uptime_ms", uptime.count()}};
  co_await ctx.SendJson(200, out);
}

}  // namespace hutch::api
