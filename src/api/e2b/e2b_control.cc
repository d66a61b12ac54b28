// The E2B control plane under /e2b: create, get, list (v1 and v2 with
// state, metadata, template and startedAfter filters and X-Next-Token
// paging), kill, timeout, pause, connect (resumes a paused sandbox),
// metrics. Errors are E2B's
// {"code":<http status>,"message":...}; the SDK reads `code` from the body.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "api/common/json_fields.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_auth.h"
#include "api/e2b/e2b_network.h"
#include "api/e2b/e2b_vault.h"
#include "auth/sandbox_token.h"

namespace hutch::api::e2b {

namespace {

using V = http::verb;

const char* E2bState(SandboxStatus s) { return s == SandboxStatus::kPaused ? "paused" : "running"; }

// "a=1&b=2" as the SDK sends it in ?metadata= (keys and values
// percent-encoded once more inside the parameter).
Result<std::map<std::string, std::string>> ParseMetadataFilter(const std::string& s) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i <= s.size()) {
    size_t amp = s.find('&', i);
    if (amp == std::string::npos) amp = s.size();
    std::string kv = s.substr(i, amp - i);
    i = amp + 1;
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    std::string k1, v1, k, v;
    std::string rk = kv.substr(0, eq), rv = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (!UrlDecode(rk, true, &k1) || !UrlDecode(rv, true, &v1) || !UrlDecode(k1, false, &k) ||
        !UrlDecode(v1, false, &v))
      return MakeError(Code::kInvalidRequest, "malformed metadata filter '" + s + "'");
    out[k] = v;
  }
  return out;
}

// A page of the list in start-time order (`order=asc|desc`), which E2B
// applies to the whole result set before paging: every match is read and
// sorted (ties by id). The page token is "<created_at ns>:<id>" of the
// page's last sandbox, a position that holds when that sandbox is gone.
Result<ListPage> OrderedPage(SandboxManager* mgr, ListFilter f, bool newest_first) {
  const size_t limit = f.limit;
  const std::string token = f.cursor;
  f.limit = 1000;
  f.cursor.clear();
  std::vector<SandboxRecord> all;
  for (;;) {
    ListPage p = mgr->List(f);
    for (auto& r : p.items) all.push_back(std::move(r));
    if (p.next_cursor.empty()) break;
    f.cursor = p.next_cursor;
  }
  using Key = std::pair<int64_t, std::string>;
  auto key = [](const SandboxRecord& r) {
    return Key(std::chrono::duration_cast<std::chrono::nanoseconds>(r.created_at.time_since_epoch())
                   .count(),
               r.id);
  };
  auto before = [newest_first](const Key& a, const Key& b) {
    if (a.first != b.first) return newest_first ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
  };
  std::sort(all.begin(), all.end(),
            [&](const SandboxRecord& a, const SandboxRecord& b) { return before(key(a), key(b)); });
  size_t start = 0;
  if (!token.empty()) {
    const size_t colon = token.find(':');
    char* end = nullptr;
    const long long ns = colon == std::string::npos ? 0 : std::strtoll(token.c_str(), &end, 10);
    if (colon == std::string::npos || colon == 0 || end != token.c_str() + colon)
      return MakeError(Code::kInvalidRequest, "malformed nextToken '" + token + "'");
    const Key at(ns, token.substr(colon + 1));
    while (start < all.size() && !before(at, key(all[start]))) ++start;
  }
  ListPage page;
  for (size_t i = start; i < all.size() && page.items.size() < limit; ++i)
    page.items.push_back(all[i]);
  if (start + page.items.size() < all.size() && !page.items.empty()) {
    const Key last = key(page.items.back());
    page.next_cursor = std::to_string(last.first) + ":" + last.second;
  }
  return page;
}

}  // namespace

Result<SandboxRecord> Visible(SandboxManager* mgr, const std::string& id) {
  auto rec = mgr->Get(id);
  if (!rec.ok()) return rec.error();
  if (rec->status == SandboxStatus::kStopped || rec->status == SandboxStatus::kFailed)
    return MakeError(Code::kSandboxNotFound,
                     "sandbox " + id + " not found (it " +
                         (rec->status == SandboxStatus::kStopped ? "was killed" : "failed") + ")");
  return rec;
}

Result<std::optional<int64_t>> TimeoutField(const Json& body) {
  if (!body.contains("timeout") || body["timeout"].is_null()) return std::optional<int64_t>();
  return OptInt(body, "timeout", 1, INT32_MAX);
}

asio::awaitable<void> E2bApi::SendControlError(HttpContext& ctx, const Error& e) {
  ctx.NoteError(e);
  const int status = CodeHttpStatus(e.code);
  const Json body = {{"code", status}, {"message", e.message}};
  co_await ctx.SendJson(status, body);
}

Json E2bApi::SandboxJson(const SandboxRecord& r, bool detail) const {
  Json j = {{"templateID", r.template_name},
            {"alias", r.template_name},
            {"sandboxID", r.id},
            {"clientID", "hutch"},
            {"envdVersion", kEnvdVersion}};
  if (detail) {
    j["startedAt"] = FormatRfc3339(r.created_at);
    j["endAt"] = FormatRfc3339(r.expires_at);
    j["cpuCount"] = static_cast<int>(std::ceil(r.cpu));
    j["memoryMB"] = r.memory_mb;
    j["diskSizeMB"] = r.disk_mb;
    j["metadata"] = r.metadata;
    j["state"] = E2bState(r.status);
  } else {
    j["envdAccessToken"] =
        creds_->SandboxToken(auth::SandboxTokenKind::kE2bEnvd, r.owner_key, r.id);
    j["trafficAccessToken"] =
        creds_->SandboxToken(auth::SandboxTokenKind::kE2bTraffic, r.owner_key, r.id);
    // The SDKs reach envd and ports at {port}-{id}.{domain} when it is given.
    if (!domain_.empty()) j["domain"] = domain_;
  }
  return j;
}

asio::awaitable<void> E2bApi::Create(HttpContext& ctx, const std::string& key_hash) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  const Json& j = *body;
  // Fields the SDK sends that hutch cannot honour are refused by name
  // rather than silently dropped; absent/null/false ones are fine.
  for (const char* f : {"mcp", "autoResume"}) {
    auto it = j.find(f);
    if (it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) continue;
    // autoResume is {"enabled": bool}: only enabled asks for something.
    if (it->is_object() && !it->value("enabled", false)) continue;
    {
      Error err =
          MakeError(Code::kNotSupported,
                    std::string("'") + f + "' is not supported by hutch yet (docs/compat-e2b.md)");
      co_return co_await SendControlError(ctx, err);
    }
  }
  // autoPause: paused instead of killed at the timeout (hutch's pause keeps
  // memory, so autoPauseMemory either way is met).
  auto auto_pause = OptBool(j, "autoPause");
  if (!auto_pause.ok()) co_return co_await SendControlError(ctx, auto_pause.error());
  auto tpl = OptString(j, "templateID");
  auto timeout = TimeoutField(j);
  auto meta = OptStringMap(j, "metadata");
  auto env = OptEnvMap(j, "envVars");
  for (const Error* e :
       {tpl.ok() ? nullptr : &tpl.error(), timeout.ok() ? nullptr : &timeout.error(),
        meta.ok() ? nullptr : &meta.error(), env.ok() ? nullptr : &env.error()})
    if (e) co_return co_await SendControlError(ctx, *e);
  auto internet = InternetAccessField(j);
  if (!internet.ok()) co_return co_await SendControlError(ctx, internet.error());
  const auto nw = j.find("network");
  auto network = E2bEgressPolicy(nw == j.end() ? nullptr : &*nw, *internet,
                                 mgr_->network() != nullptr, {"allowPublicTraffic", "rules"});
  if (!network.ok()) co_return co_await SendControlError(ctx, network.error());
  auto rules = E2bRulesVault(nw == j.end() ? nullptr : &*nw);
  if (!rules.ok()) co_return co_await SendControlError(ctx, rules.error());
  if (*rules && !mgr_->vaults()) {
    Error e = MakeError(Code::kNotSupported,
                        "'network.rules': credential vaults are not configured on this server");
    co_return co_await SendControlError(ctx, e);
  }
  CreateOptions o;
  o.network = std::move(network).value();
  // A snapshot's id stands where a template's name goes, as E2B's
  // Sandbox.create(snapshot_id) sends it (e2b_snapshots.cc).
  o.template_name = tpl->value_or("base");
  if (IsSnapshotId(o.template_name)) {
    o.snapshot = std::move(o.template_name);
    o.template_name.clear();
  } else if (auto named = mgr_->SnapshotNamed(ctx.principal().owner, o.template_name); named.ok()) {
    // A name the caller gave a snapshot wins over a template's name.
    o.snapshot = named->id;
    o.template_name.clear();
  }
  o.ttl_seconds = timeout->value_or(300);
  o.pause_on_expiry = auto_pause->value_or(false);
  // volumeMounts: [{name, path}] of the caller's volumes (e2b_volumes.cc).
  if (auto it = j.find("volumeMounts"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      Error e = MakeError(Code::kInvalidRequest, "'volumeMounts' must be an array");
      co_return co_await SendControlError(ctx, e);
    }
    for (const auto& m : *it) {
      const bool ok = m.is_object() && m.contains("name") && m["name"].is_string() &&
                      m.contains("path") && m["path"].is_string();
      if (!ok) {
        Error e = MakeError(Code::kInvalidRequest, "each of 'volumeMounts' is {name, path}");
        co_return co_await SendControlError(ctx, e);
      }
      VolumeMountRequest mount;
      mount.name = m["name"].get<std::string>();
      mount.path = m["path"].get<std::string>();
      o.volumes.push_back(std::move(mount));
    }
  }
  if (*meta) o.metadata = **meta;
  if (*env) o.env = **env;
  o.owner_key = key_hash;
  o.scope = ctx.principal().Scope();
  if (*rules) vault::AddTrustStoreEnv(o.env);
  auto rec = co_await mgr_->Create(std::move(o));
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  if (*rules) {
    if (auto st = co_await PutRulesVault(rec->id, std::move(**rules)); !st.ok()) {
      // A sandbox without the rules it asked for is not what was created.
      auto gone = co_await mgr_->Delete(rec->id, "vault not stored");
      (void)gone;
      co_return co_await SendControlError(ctx, st.error());
    }
  }
  co_await ctx.SendJson(201, SandboxJson(*rec, false));
}

asio::awaitable<void> E2bApi::List(HttpContext& ctx, bool v2) {
  ListFilter f;
  f.limit = 100;  // E2B's default page
  f.owner = ctx.principal().Scope();
  f.any_status = {SandboxStatus::kRunning};
  if (v2) f.any_status.push_back(SandboxStatus::kPaused);
  std::vector<std::string> states;
  std::optional<bool> newest_first;  // `order`; without it, id order
  for (const auto& [k, v] : ctx.query_list()) {
    if (k == "state" && v2) {
      size_t i = 0;
      while (i <= v.size()) {
        size_t c = v.find(',', i);
        if (c == std::string::npos) c = v.size();
        if (c > i) states.push_back(v.substr(i, c - i));
        i = c + 1;
      }
    } else if (k == "metadata") {
      auto m = ParseMetadataFilter(v);
      if (!m.ok()) co_return co_await SendControlError(ctx, m.error());
      for (auto& [mk, mv] : *m) f.metadata[mk] = mv;
    } else if (k == "limit" && v2) {
      auto n = QueryInt(v, "limit", 1, 1000);
      if (!n.ok()) co_return co_await SendControlError(ctx, n.error());
      f.limit = static_cast<size_t>(**n);
    } else if (k == "nextToken" && v2) {
      f.cursor = v;
    } else if (k == "template" && v2) {
      f.template_name = v;
    } else if (k == "startedAfter" && v2) {
      auto t = ParseRfc3339(v);
      if (!t.ok()) co_return co_await SendControlError(ctx, t.error());
      f.created_after = *t;
    } else if (k == "order" && v2) {
      if (v != "asc" && v != "desc") {
        Error err = MakeError(Code::kInvalidRequest, "order must be asc or desc, not '" + v + "'");
        co_return co_await SendControlError(ctx, err);
      }
      newest_first = v == "desc";
    }
  }
  if (!states.empty()) {
    f.any_status.clear();
    for (const auto& st : states) {
      if (st == "running") f.any_status.push_back(SandboxStatus::kRunning);
      else if (st == "paused") f.any_status.push_back(SandboxStatus::kPaused);
      else {
        Error err = MakeError(Code::kInvalidRequest, "unknown state '" + st + "'");
        co_return co_await SendControlError(ctx, err);
      }
    }
  }
  if (!v2) f.limit = 1000;
  Json out = Json::array();
  if (newest_first) {
    auto ordered = OrderedPage(mgr_, f, *newest_first);
    if (!ordered.ok()) co_return co_await SendControlError(ctx, ordered.error());
    for (const auto& r : ordered->items) out.push_back(SandboxJson(r, true));
    if (!ordered->next_cursor.empty()) ctx.AddHeader("X-Next-Token", ordered->next_cursor);
    co_return co_await ctx.SendJson(200, out);
  }
  ListPage page = mgr_->List(f);
  for (const auto& r : page.items) out.push_back(SandboxJson(r, true));
  // v1 has no paging: every matching sandbox, page after page.
  while (!v2 && !page.next_cursor.empty()) {
    f.cursor = page.next_cursor;
    page = mgr_->List(f);
    for (const auto& r : page.items) out.push_back(SandboxJson(r, true));
  }
  if (v2 && !page.next_cursor.empty()) ctx.AddHeader("X-Next-Token", page.next_cursor);
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> E2bApi::Get(HttpContext& ctx, const std::string& id) {
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  Json j = SandboxJson(*rec, true);
  j["envdAccessToken"] =
      creds_->SandboxToken(auth::SandboxTokenKind::kE2bEnvd, rec->owner_key, rec->id);
  j["trafficAccessToken"] =
      creds_->SandboxToken(auth::SandboxTokenKind::kE2bTraffic, rec->owner_key, rec->id);
  if (!domain_.empty()) j["domain"] = domain_;
  co_await ctx.SendJson(200, j);
}

asio::awaitable<void> E2bApi::Kill(HttpContext& ctx, const std::string& id) {
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  auto st = co_await mgr_->Delete(id);
  if (!st.ok()) co_return co_await SendControlError(ctx, st.error());
  co_await ctx.SendEmpty(204);
}

asio::awaitable<void> E2bApi::SetTimeout(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  auto t = TimeoutField(*body);
  if (!t.ok()) co_return co_await SendControlError(ctx, t.error());
  if (!*t) {
    Error err = MakeError(Code::kInvalidRequest, "'timeout' is required");
    co_return co_await SendControlError(ctx, err);
  }
  if (auto rec = Visible(mgr_, id); !rec.ok())
    co_return co_await SendControlError(ctx, rec.error());
  auto rec = mgr_->SetTtl(id, **t);
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  co_await ctx.SendEmpty(204);
}

asio::awaitable<void> E2bApi::Refresh(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  // E2B's keep-alive: `duration` seconds from now (at most an hour, as
  // E2B bounds it); like a connect's timeout it only ever extends.
  auto duration = OptInt(*body, "duration", 0, 3600);
  if (!duration.ok()) co_return co_await SendControlError(ctx, duration.error());
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  if (*duration &&
      std::chrono::system_clock::now() + std::chrono::seconds(**duration) > rec->expires_at) {
    auto r = mgr_->SetTtl(id, **duration);
    if (!r.ok()) co_return co_await SendControlError(ctx, r.error());
  }
  co_await ctx.SendEmpty(204);
}

asio::awaitable<void> E2bApi::Pause(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadBody(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  if (rec->status == SandboxStatus::kPaused) {
    Error err = MakeError(Code::kConflict, "sandbox " + id + " is already paused");
    co_return co_await SendControlError(ctx, err);
  }
  auto p = mgr_->Pause(id);
  if (!p.ok()) co_return co_await SendControlError(ctx, p.error());
  co_await ctx.SendEmpty(204);
}

asio::awaitable<void> E2bApi::Connect(HttpContext& ctx, const std::string& id, bool legacy_resume) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  auto t = TimeoutField(*body);
  if (!t.ok()) co_return co_await SendControlError(ctx, t.error());
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  const bool paused = rec->status == SandboxStatus::kPaused;
  if (legacy_resume && !paused) {
    Error err = MakeError(Code::kConflict, "sandbox " + id + " is already running");
    co_return co_await SendControlError(ctx, err);
  }
  if (paused) {
    auto r = mgr_->Resume(id);
    if (!r.ok()) co_return co_await SendControlError(ctx, r.error());
    // A resumed sandbox lives `timeout` from now (E2B's default, 300 s,
    // when absent), whatever its TTL was while paused (one paused at its
    // timeout is kept for the server's largest TTL).
    r = mgr_->SetTtl(id, t->value_or(300));
    if (!r.ok()) co_return co_await SendControlError(ctx, r.error());
    rec = *r;
  }
  // On a running sandbox a timeout only ever extends its life.
  if (*t && !paused) {
    auto want = std::chrono::system_clock::now() + std::chrono::seconds(**t);
    if (want > rec->expires_at) {
      auto r = mgr_->SetTtl(id, **t);
      if (!r.ok()) co_return co_await SendControlError(ctx, r.error());
      rec = *r;
    }
  }
  co_await ctx.SendJson(paused ? 201 : 200, SandboxJson(*rec, false));
}

asio::awaitable<void> E2bApi::Metrics(HttpContext& ctx, const std::string& id) {
  auto rec = Visible(mgr_, id);
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await SendControlError(ctx, sb.error());
  auto stats = (*sb)->instance->Stats();
  if (!stats.ok()) co_return co_await SendControlError(ctx, stats.error());
  const auto now = std::chrono::system_clock::now();
  const double up = std::max(1e-3, std::chrono::duration<double>(now - rec->created_at).count());
  const int cpus = std::max(1, static_cast<int>(std::ceil(rec->cpu)));
  // One sample: hutch keeps no history. CPU is the average since start.
  const double cpu_pct = static_cast<double>(stats->cpu_usage_ns) / 1e9 / up / cpus * 100.0;
  Json sample = {{"timestamp", FormatRfc3339(now)},
                 {"timestampUnix",
                  std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count()},
                 {"cpuCount", cpus},
                 {"cpuUsedPct", cpu_pct},
                 {"memUsed", stats->memory_current},
                 {"memTotal", rec->memory_mb * 1024 * 1024},
                 // Required by the SDKs since E2B added it; hutch does not
                 // count the page cache apart (memUsed, the cgroup's
                 // memory.current, includes it).
                 {"memCache", 0},
                 {"diskUsed", stats->disk_used_bytes},
                 {"diskTotal", stats->disk_limit_bytes}};
  Json out = Json::array({sample});
  co_await ctx.SendJson(200, out);
}

}  // namespace hutch::api::e2b
