// OpenSandbox's lifecycle API (specs/sandbox-lifecycle.yml) under
// /opensandbox/v1: create (an image mapped to a template; answered Running,
// since a hutch create returns once the sandbox runs), get, list with
// state/metadata filters and page numbers, delete, renew-expiration,
// pause/resume, metadata patch, endpoints (the server proxy of execd and
// egress), snapshots, and the SDK's telemetry (accepted, dropped).
#include <cmath>
#include <ctime>

#include "api/common/json_fields.h"
#include "api/opensandbox/network_policy.h"
#include "api/opensandbox/osb_api.h"
#include "api/opensandbox/resource_limits.h"
#include "auth/sandbox_token.h"
#include "core/process_ops.h"
#include "core/vault.h"

namespace hutch::api::opensandbox {

namespace {

using V = http::verb;

const std::vector<std::string> kDefaultEntrypoint = {"tail", "-f", "/dev/null"};

const char* OsbState(SandboxStatus s) {
  switch (s) {
    case SandboxStatus::kStarting:
      return "Pending";
    case SandboxStatus::kRunning:
      return "Running";
    case SandboxStatus::kPaused:
      return "Paused";
    case SandboxStatus::kStopped:
      return "Terminated";
    case SandboxStatus::kFailed:
      return "Failed";
  }
  return "Unknown";
}

// A sandbox the dialect can see: a stopped one is gone (404).
Result<SandboxRecord> Visible(SandboxManager* mgr, const std::string& id) {
  auto rec = mgr->Get(id);
  if (!rec.ok()) return rec.error();
  if (rec->status == SandboxStatus::kStopped)
    return MakeError(Code::kSandboxNotFound, "sandbox " + id + " not found (it was deleted)");
  return rec;
}

// ?metadata=k=v&k2=v2 (one parameter: the SDK joins the pairs with '&',
// and the query decoding already turned %26 and %3D back).
std::map<std::string, std::string> ParseMetadataFilter(const std::string& s) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t amp = s.find('&', i);
    if (amp == std::string::npos) amp = s.size();
    std::string kv = s.substr(i, amp - i);
    i = amp + 1;
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    out[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  return out;
}

Result<SandboxStatus> StateFromName(std::string n) {
  for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "running") return SandboxStatus::kRunning;
  if (n == "paused") return SandboxStatus::kPaused;
  if (n == "pending") return SandboxStatus::kStarting;
  if (n == "failed") return SandboxStatus::kFailed;
  if (n == "terminated" || n == "stopped") return SandboxStatus::kStopped;
  return MakeError(Code::kInvalidRequest,
                   "unknown state '" + n + "' (Pending, Running, Paused, Failed, Terminated)");
}

}  // namespace

std::string OpenSandboxApi::ErrorCode(Code c) {
  std::string n = CodeName(c);
  for (auto& ch : n) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return "HUTCH::" + n;
}

asio::awaitable<void> OpenSandboxApi::SendError(HttpContext& ctx, const Error& e) {
  ctx.NoteError(e);
  const int status = CodeHttpStatus(e.code);
  const Json body = {{"code", ErrorCode(e.code)}, {"message", e.message}};
  co_await ctx.SendJson(status, body);
}

Json OpenSandboxApi::SandboxJson(const SandboxRecord& r) const {
  // hutch keeps the template, not the image URI it was mapped from: the
  // image reads back as the template's name, the entrypoint as the default.
  Json status = {{"state", OsbState(r.status)}};
  if (!r.reason.empty()) status["reason"] = r.reason;
  Json j = {{"id", r.id},
            {"status", status},
            {"metadata", r.metadata},
            {"entrypoint", kDefaultEntrypoint},
            {"createdAt", FormatRfc3339(r.created_at)},
            {"expiresAt", FormatRfc3339(r.expires_at)}};
  if (!r.snapshot.empty()) j["snapshotId"] = r.snapshot;
  else if (IsImageTemplateName(r.template_name))
    j["image"] = Json{{"uri", r.template_name.substr(6)}};  // the image it was pulled from
  else j["image"] = Json{{"uri", r.template_name}};
  return j;
}

asio::awaitable<void> OpenSandboxApi::Create(HttpContext& ctx, const std::string& key_hash) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendError(ctx, body.error());
  const Json& j = *body;
  if (!j.is_object()) {
    Error e = MakeError(Code::kInvalidRequest, "the request body must be a JSON object");
    co_return co_await SendError(ctx, e);
  }
  CreateOptions o;
  o.owner_key = key_hash;
  o.scope = ctx.principal().Scope();
  // image XOR snapshotId, as the SDK enforces too.
  const bool has_image = j.contains("image") && !j["image"].is_null();
  auto snap = OptString(j, "snapshotId");
  if (!snap.ok()) co_return co_await SendError(ctx, snap.error());
  if (has_image == (*snap && !(*snap)->empty())) {
    Error e =
        MakeError(Code::kInvalidRequest, "exactly one of 'image' and 'snapshotId' is required");
    co_return co_await SendError(ctx, e);
  }
  if (has_image) {
    const Json& img = j["image"];
    if (!img.is_object() || !img.contains("uri") || !img["uri"].is_string()) {
      Error e = MakeError(Code::kInvalidRequest, "'image.uri' must be a string");
      co_return co_await SendError(ctx, e);
    }
    // The operator's table first (an override: python:3.12 on hutch's own
    // python template); any other URI is the OCI image it names, pulled on
    // first use.
    const std::string uri = img["uri"].get<std::string>();
    auto tpl = images_.Resolve(uri);
    if (tpl.ok()) o.template_name = *tpl;
    else if (mgr_->image_puller()) o.template_name = kImageTemplatePrefix + uri;
    else co_return co_await SendError(ctx, tpl.error());
  } else {
    o.snapshot = **snap;
  }
  // credentialProxy.enabled: the sandbox will get a vault through the
  // /credential-vault routes, so its runtimes trust the egress proxy's CA
  // from the start (the proxy itself is armed by the vault's first
  // binding).
  bool credential_proxy = false;
  if (auto it = j.find("credentialProxy"); it != j.end() && !it->is_null()) {
    if (!it->is_object() || (it->contains("enabled") && !(*it)["enabled"].is_boolean())) {
      Error e = MakeError(Code::kInvalidRequest, "'credentialProxy' must be {\"enabled\": bool}");
      co_return co_await SendError(ctx, e);
    }
    credential_proxy = it->value("enabled", false);
    if (credential_proxy && !mgr_->vaults()) {
      Error e = MakeError(Code::kNotSupported,
                          "'credentialProxy': credential vaults are not configured on this server");
      co_return co_await SendError(ctx, e);
    }
  }
  // Fields hutch cannot honour are refused by name, not dropped.
  for (const char* f : {"volumes"}) {
    auto it = j.find(f);
    if (it == j.end() || it->is_null() || (it->is_array() && it->empty()) ||
        (it->is_object() && !it->value("enabled", false)))
      continue;
    Error e = MakeError(
        Code::kNotSupported,
        std::string("'") + f +
            "' is not supported by hutch's OpenSandbox layer (docs/compat-opensandbox.md)");
    co_return co_await SendError(ctx, e);
  }
  if (auto it = j.find("platform"); it != j.end() && it->is_object()) {
    if (it->value("os", "linux") != "linux" || it->value("arch", "amd64") != "amd64") {
      Error e = MakeError(Code::kNotSupported, "hutch runs linux/amd64 sandboxes only");
      co_return co_await SendError(ctx, e);
    }
  }
  if (auto it = j.find("resourceLimits"); it != j.end() && !it->is_null()) {
    auto lim = ParseResourceLimits(*it);
    if (!lim.ok()) co_return co_await SendError(ctx, lim.error());
    o.cpu = lim->cpu;
    o.memory_mb = lim->memory_mb;
    o.disk_mb = lim->disk_mb;
  }
  {
    const Json none;
    auto it = j.find("networkPolicy");
    auto net = CreateNetworkPolicy(it == j.end() ? none : *it, mgr_->network() != nullptr);
    if (!net.ok()) co_return co_await SendError(ctx, net.error());
    o.network = std::move(net).value();
  }
  // timeout: seconds; absent or null means "no expiry" in OpenSandbox,
  // which is hutch's longest TTL here.
  if (j.contains("timeout") && !j["timeout"].is_null()) {
    auto t = OptInt(j, "timeout", 1, INT32_MAX);
    if (!t.ok()) co_return co_await SendError(ctx, t.error());
    o.ttl_seconds = **t;
  } else {
    o.ttl_seconds = mgr_->options().max_ttl_seconds;
  }
  auto meta = OptStringMap(j, "metadata");
  auto env = OptEnvMap(j, "env");
  auto entry = OptStringArray(j, "entrypoint");
  for (const Error* e : {meta.ok() ? nullptr : &meta.error(), env.ok() ? nullptr : &env.error(),
                         entry.ok() ? nullptr : &entry.error()})
    if (e) co_return co_await SendError(ctx, *e);
  if (*meta) o.metadata = **meta;
  if (*env) o.env = **env;
  if (credential_proxy) vault::AddTrustStoreEnv(o.env);
  const bool pulled = IsImageTemplateName(o.template_name);
  auto rec = co_await mgr_->Create(std::move(o));
  if (!rec.ok()) {
    Error e = rec.error();
    if (pulled && (e.code == kImageNotFound || e.code == kImagePullFailed))
      e.message +=
          " (or map the image to a hutch template: hutchd --opensandbox-images, "
          "docs/compat-opensandbox.md)";
    co_return co_await SendError(ctx, e);
  }
  // A sandbox needs no process to stay up; an entrypoint other than the
  // SDK's "keep alive" default runs as a background process.
  if (*entry && !(*entry)->empty() && **entry != kDefaultEntrypoint) {
    Status started;
    if (auto sb = mgr_->GetRunning(rec->id); !sb.ok()) {
      started = sb.error();
    } else {
      ExecRequest r;
      r.argv = **entry;
      r.user = kDefaultUser;
      r.timeout_seconds = 0;
      r.stdin_data = std::string();
      std::optional<std::string> tag = "opensandbox-entrypoint";
      auto p = co_await StartProcess(*sb, r, tag);
      if (!p.ok()) started = p.error();
    }
    if (!started.ok()) {
      const std::string why = "entrypoint failed";
      (void)co_await mgr_->Delete(rec->id, why);
      Error e = started.error();
      e.message = "entrypoint: " + e.message;
      co_return co_await SendError(ctx, e);
    }
  }
  Json out = SandboxJson(*rec);
  if (*entry && !(*entry)->empty()) out["entrypoint"] = **entry;
  co_await ctx.SendJson(202, out);
}

asio::awaitable<void> OpenSandboxApi::List(HttpContext& ctx) {
  ListFilter f;
  f.limit = 1000;
  f.owner = ctx.principal().Scope();
  int64_t page = 1, page_size = 20;
  std::vector<SandboxStatus> states;
  for (const auto& [k, v] : ctx.query_list()) {
    if (k == "state") {
      size_t i = 0;
      while (i <= v.size()) {
        size_t c = v.find(',', i);
        if (c == std::string::npos) c = v.size();
        if (c > i) {
          auto st = StateFromName(v.substr(i, c - i));
          if (!st.ok()) co_return co_await SendError(ctx, st.error());
          states.push_back(*st);
        }
        i = c + 1;
      }
    } else if (k == "metadata") {
      for (auto& [mk, mv] : ParseMetadataFilter(v)) f.metadata[mk] = mv;
    } else if (k == "page" || k == "pageSize") {
      auto n = QueryInt(v, k == "page" ? "page" : "pageSize", 1, k == "page" ? INT32_MAX : 1000);
      if (!n.ok()) co_return co_await SendError(ctx, n.error());
      (k == "page" ? page : page_size) = **n;
    }
  }
  f.any_status = states.empty()
                     ? std::vector<SandboxStatus>{SandboxStatus::kStarting, SandboxStatus::kRunning,
                                                  SandboxStatus::kPaused, SandboxStatus::kFailed}
                     : states;
  // Core pages by cursor, OpenSandbox by page number: collect, then cut.
  std::vector<SandboxRecord> all;
  for (ListPage p = mgr_->List(f);; p = mgr_->List(f)) {
    for (auto& r : p.items) all.push_back(std::move(r));
    if (p.next_cursor.empty()) break;
    f.cursor = p.next_cursor;
  }
  const int64_t total = static_cast<int64_t>(all.size());
  const int64_t pages = (total + page_size - 1) / page_size;
  Json items = Json::array();
  for (int64_t i = (page - 1) * page_size; i < std::min(total, page * page_size); ++i)
    items.push_back(SandboxJson(all[static_cast<size_t>(i)]));
  Json out = {{"items", items},
              {"pagination",
               {{"page", page},
                {"pageSize", page_size},
                {"totalItems", total},
                {"totalPages", pages},
                {"hasNextPage", page < pages}}}};
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> OpenSandboxApi::Get(HttpContext& ctx, const std::string& id) {
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendError(ctx, rec.error());
  co_await ctx.SendJson(200, SandboxJson(*rec));
}

asio::awaitable<void> OpenSandboxApi::Kill(HttpContext& ctx, const std::string& id) {
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendError(ctx, rec.error());
  auto st = co_await mgr_->Delete(id);
  if (!st.ok()) co_return co_await SendError(ctx, st.error());
  co_await ctx.SendEmpty(204);
}

asio::awaitable<void> OpenSandboxApi::Renew(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendError(ctx, body.error());
  auto at = OptString(*body, "expiresAt");
  if (!at.ok()) co_return co_await SendError(ctx, at.error());
  if (!*at) {
    Error e = MakeError(Code::kInvalidRequest, "'expiresAt' is required");
    co_return co_await SendError(ctx, e);
  }
  auto t = ParseRfc3339(**at);
  if (!t.ok()) co_return co_await SendError(ctx, t.error());
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*t - std::chrono::system_clock::now())
          .count();
  if (left <= 0) {
    Error e = MakeError(Code::kInvalidRequest, "'expiresAt' must be in the future");
    co_return co_await SendError(ctx, e);
  }
  if (auto rec = Visible(mgr_, id); !rec.ok()) co_return co_await SendError(ctx, rec.error());
  auto rec = mgr_->SetTtl(id, (left + 999) / 1000);
  if (!rec.ok()) co_return co_await SendError(ctx, rec.error());
  Json out = {{"expiresAt", FormatRfc3339(rec->expires_at)}};
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> OpenSandboxApi::PauseResume(HttpContext& ctx, const std::string& id,
                                                  bool pause) {
  (void)co_await ctx.ReadBody(json_limit_);
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendError(ctx, rec.error());
  if (pause && rec->status == SandboxStatus::kPaused) {
    Error e = MakeError(Code::kConflict, "sandbox " + id + " is already paused");
    co_return co_await SendError(ctx, e);
  }
  if (!pause && rec->status == SandboxStatus::kRunning) {
    Error e = MakeError(Code::kConflict, "sandbox " + id + " is not paused");
    co_return co_await SendError(ctx, e);
  }
  auto r = pause ? mgr_->Pause(id) : mgr_->Resume(id);
  if (!r.ok()) co_return co_await SendError(ctx, r.error());
  co_await ctx.SendEmpty(202);
}

asio::awaitable<void> OpenSandboxApi::PatchMetadata(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendError(ctx, body.error());
  if (!body->is_object()) {
    Error e = MakeError(Code::kInvalidRequest,
                        "a metadata patch is a JSON object of string or null values");
    co_return co_await SendError(ctx, e);
  }
  std::map<std::string, std::optional<std::string>> patch;
  for (const auto& [k, v] : body->items()) {
    if (v.is_null()) {
      patch[k] = std::nullopt;
    } else if (v.is_string()) {
      patch[k] = v.get<std::string>();
    } else {
      Error e = MakeError(Code::kInvalidRequest, "metadata '" + k + "' must be a string or null");
      co_return co_await SendError(ctx, e);
    }
  }
  auto rec = mgr_->PatchMetadata(id, patch);
  if (!rec.ok()) co_return co_await SendError(ctx, rec.error());
  co_await ctx.SendJson(200, SandboxJson(*rec));
}

asio::awaitable<void> OpenSandboxApi::Endpoint(HttpContext& ctx, const std::string& id,
                                               const std::string& port) {
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendError(ctx, rec.error());
  if (ctx.Query("expires")) {
    Error e = MakeError(Code::kNotSupported,
                        "signed endpoints are not supported by hutch (docs/compat-opensandbox.md)");
    co_return co_await SendError(ctx, e);
  }
  if (port != std::to_string(kExecdPort) && port != std::to_string(kEgressPort)) {
    Error e = MakeError(
        Code::kNotSupported,
        "port " + port +
            ": hutch's OpenSandbox proxy serves only execd (44772) and egress (18080); other ports "
            "are reached through /v1/sandboxes/{id}/ports/{port}/ (docs/compat-opensandbox.md)");
    co_return co_await SendError(ctx, e);
  }
  // Always the server proxy (use_server_proxy or not): hutchd answers both
  // ports itself, nothing listens on them in the sandbox. No scheme, as
  // the SDK wants.
  std::string host = ctx.Header("Host");
  if (host.empty()) host = "localhost";
  Json out = {{"endpoint", host + "/" + kPrefix + "/sandboxes/" + id + "/proxy/" + port},
              {"headers",
               {{kAccessTokenHeader, creds_->SandboxToken(auth::SandboxTokenKind::kOpenSandboxExecd,
                                                          rec->owner_key, id)}}}};
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> OpenSandboxApi::RouteSnapshots(HttpContext& ctx,
                                                     const std::vector<std::string>& s,
                                                     const std::string& key_hash) {
  (void)key_hash;
  const V m = ctx.method();
  auto snap_json = [](const SnapshotRecord& r) {
    return Json{{"id", r.id},
                {"sandboxId", r.sandbox_id},
                {"status", {{"state", "Ready"}}},
                {"createdAt", FormatRfc3339(r.created_at)}};
  };
  if (s[0] == "sandboxes") {  // POST /sandboxes/{id}/snapshots
    if (m != V::post) {
      Error e = MakeError(Code::kMethodNotAllowed, "snapshots of a sandbox are created with POST");
      co_return co_await SendError(ctx, e);
    }
    (void)co_await ctx.ReadBody(json_limit_);
    if (auto rec = Visible(mgr_, s[1]); !rec.ok()) co_return co_await SendError(ctx, rec.error());
    auto snap = co_await mgr_->Snapshot(s[1], !ctx.principal().admin());
    if (!snap.ok()) co_return co_await SendError(ctx, snap.error());
    co_return co_await ctx.SendJson(202, snap_json(*snap));
  }
  if (s.size() == 1 && m == V::get) {
    const auto sandbox = ctx.Query("sandboxId");
    Json items = Json::array();
    for (const auto& r : mgr_->ListSnapshots())
      if ((!sandbox || r.sandbox_id == *sandbox) && ctx.principal().Owns(r.owner))
        items.push_back(snap_json(r));
    const int64_t total = static_cast<int64_t>(items.size());
    Json out = {{"items", items},
                {"pagination",
                 {{"page", 1},
                  {"pageSize", std::max<int64_t>(total, 1)},
                  {"totalItems", total},
                  {"totalPages", 1},
                  {"hasNextPage", false}}}};
    co_return co_await ctx.SendJson(200, out);
  }
  if (s.size() == 2) {
    if (m == V::get) {
      auto r = mgr_->GetSnapshot(s[1]);
      if (!r.ok()) co_return co_await SendError(ctx, r.error());
      co_return co_await ctx.SendJson(200, snap_json(*r));
    }
    if (m == V::delete_) {
      auto st = mgr_->DeleteSnapshot(s[1]);
      if (!st.ok()) co_return co_await SendError(ctx, st.error());
      co_return co_await ctx.SendEmpty(204);
    }
  }
  Error e = MakeError(Code::kNotFound, "no OpenSandbox route " + ctx.path());
  co_await SendError(ctx, e);
}

}  // namespace hutch::api::opensandbox
