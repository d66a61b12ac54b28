#include "api/e2b/e2b_templates.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include "api/common/json_fields.h"
#include "api/e2b/e2b_api.h"
#include "common/clock.h"
#include "core/oci_layout.h"
#include "core/template_builder.h"

namespace hutch::api::e2b {

namespace {

using nlohmann::json;
using V = http::verb;

// Uploads are held in memory until their build reads them: one may be
// this big, all of them together this big (the oldest go first).
constexpr size_t kUploadMax = 256 << 20;
constexpr size_t kUploadsTotal = 512 << 20;
// An upload URL works once, within this time.
constexpr auto kTokenLife = std::chrono::hours(1);
// Builds remembered (their status and log), the newest kept.
constexpr size_t kBuildsKept = 200;
// Log entries one build keeps; later lines are counted, not kept.
constexpr size_t kEntriesMax = 20000;
// How long a ready command may take to pass in a new sandbox: E2B's
// waitFor* helpers wait up to their own timeouts (20 s by default).
constexpr int64_t kReadyTimeoutSeconds = 120;
// The image E2B's fromBaseImage() names: hutch's own base stands for it.
constexpr const char* kE2bBaseImage = "e2bdev/base";

std::string Uuid() {
  const std::string h = RandomHex(16);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

std::string UuidOfHash(const std::string& hash) {
  const std::string h = hash.size() >= 32 ? hash.substr(0, 32) : std::string(32, '0');
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

// "name:tag" -> {name, tag} ("" when none).
std::pair<std::string, std::string> SplitTag(const std::string& s) {
  const size_t c = s.find(':');
  if (c == std::string::npos) return {s, ""};
  return {s.substr(0, c), s.substr(c + 1)};
}

// The template a tag names: the name itself for "default" (or none).
std::string TaggedName(const std::string& name, const std::string& tag) {
  return tag.empty() || tag == "default" ? name : name + ":" + tag;
}

bool ValidTag(const std::string& t) {
  return !t.empty() && t.find(':') == std::string::npos && ValidTemplateName(t);
}

json Entry(const std::string& level, const std::string& message, const std::string& step = "") {
  json e = {{"timestamp", FormatRfc3339(std::chrono::system_clock::now())},
            {"level", level},
            {"message", message}};
  if (!step.empty()) e["step"] = step;
  return e;
}

// Which of E2B's step names a builder step is: "base" (the image or the
// parent), "1".."n" (the steps array, 1-based), "finalize".
std::string E2bStepName(const std::string& builder_step) {
  if (builder_step.rfind("step ", 0) == 0) return builder_step.substr(5);
  if (builder_step == "capture") return "finalize";
  return "base";
}

Result<std::vector<std::string>> StringArgs(const json& step) {
  std::vector<std::string> out;
  if (!step.contains("args") || step["args"].is_null()) return out;
  if (!step["args"].is_array())
    return MakeError(Code::kInvalidRequest, "a step's 'args' must be an array of strings");
  for (const auto& a : step["args"]) {
    if (!a.is_string())
      return MakeError(Code::kInvalidRequest, "a step's 'args' must be an array of strings");
    out.push_back(a.get<std::string>());
  }
  return out;
}

Error Send(const std::string& what) { return MakeError(Code::kInvalidRequest, what); }

}  // namespace

void E2bTemplates::Register(Router& r) {
  r.Add(V::post, "/e2b/v3/templates",
        [this](HttpContext& c, const RouteMatch&) { return RequestBuild(c); });
  r.Add(V::get, "/e2b/templates/{id}/files/{hash}", [this](HttpContext& c, const RouteMatch& m) {
    return FileUploadLink(c, m["id"], m["hash"]);
  });
  Route upload;
  upload.method = V::put;
  upload.pattern = "/e2b/template-uploads/{token}";
  upload.handler = [this](HttpContext& c, const RouteMatch& m) { return Upload(c, m["token"]); };
  upload.open = true;
  r.Add(std::move(upload));
  r.Add(V::post, "/e2b/v2/templates/{id}/builds/{build}",
        [this](HttpContext& c, const RouteMatch& m) { return StartBuild(c, m["id"], m["build"]); });
  r.Add(
      V::get, "/e2b/templates/{id}/builds/{build}/status",
      [this](HttpContext& c, const RouteMatch& m) { return BuildStatus(c, m["id"], m["build"]); });
  r.Add(V::get, "/e2b/templates/aliases/{alias}",
        [this](HttpContext& c, const RouteMatch& m) { return AliasExists(c, m["alias"]); });
  r.Add(V::post, "/e2b/templates/tags",
        [this](HttpContext& c, const RouteMatch&) { return AssignTags(c); });
  r.Add(V::delete_, "/e2b/templates/tags",
        [this](HttpContext& c, const RouteMatch&) { return RemoveTags(c); });
  r.Add(V::get, "/e2b/templates/{id}/tags",
        [this](HttpContext& c, const RouteMatch& m) { return ListTags(c, m["id"]); });
}

Status E2bTemplates::MayWrite(const auth::Principal& who, const std::string& name) const {
  if (name == "base")
    return MakeError(Code::kConflict, "'base' is assembled by hutchd; choose another name");
  if (who.admin()) return {};
  auto taken = mgr_->templates()->Resolve(name);
  if (taken.ok() && taken->owner != who.owner)
    return MakeError(Code::kConflict, "template name '" + name + "' is taken; choose another");
  return {};
}

Result<TemplateRecord> E2bTemplates::Visible(const auth::Principal& who,
                                             const std::string& name) const {
  TemplateRegistry* reg = mgr_->templates();
  std::string own = name;
  if (!reg->Exists(own)) {
    auto aliases = reg->Aliases();
    if (auto a = aliases.find(name); a != aliases.end()) own = a->second;
  }
  auto rec = reg->Get(own);
  if (rec.ok() && !rec->owner.empty() && !who.Owns(rec->owner))
    return MakeError(Code::kTemplateNotFound, "template '" + name + "' not found");
  return rec;
}

std::string E2bTemplates::BuildIdOf(const std::string& hash) const {
  auto it = build_of_hash_.find(hash);
  return it != build_of_hash_.end() ? it->second : UuidOfHash(hash);
}

Status E2bTemplates::Tag(const TemplateRecord& rec, const std::string& name) {
  if (name == rec.name) return {};
  TemplateRecord t = rec;
  t.name = name;
  t.info.name = name;
  return mgr_->templates()->Register(t);
}

Result<std::shared_ptr<E2bTemplates::Build>> E2bTemplates::FindBuild(const auth::Principal& who,
                                                                     const std::string& tid,
                                                                     const std::string& bid) const {
  auto it = builds_.find(bid);
  if (it == builds_.end() || it->second->template_id != tid || !who.Owns(it->second->owner))
    return MakeError(Code::kNotFound, "build " + bid + " of template " + tid + " not found");
  return it->second;
}

void E2bTemplates::Prune() {
  while (builds_.size() > kBuildsKept) {
    auto oldest = builds_.end();
    for (auto it = builds_.begin(); it != builds_.end(); ++it)
      if (it->second->status != "building" &&
          (oldest == builds_.end() || it->second->created < oldest->second->created))
        oldest = it;
    if (oldest == builds_.end()) break;
    builds_.erase(oldest);
  }
  const SysTime now = std::chrono::system_clock::now();
  std::erase_if(tokens_, [now](const auto& t) { return t.second.expires < now; });
}

asio::awaitable<void> E2bTemplates::RequestBuild(HttpContext& ctx) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await E2bApi::SendControlError(ctx, body.error());
  const json& j = *body;
  auto name = OptString(j, "name");
  auto alias = OptString(j, "alias");
  if (!name.ok()) co_return co_await E2bApi::SendControlError(ctx, name.error());
  if (!alias.ok()) co_return co_await E2bApi::SendControlError(ctx, alias.error());
  const std::string full = name->value_or(alias->value_or(""));
  auto [tid, tag] = SplitTag(full);
  std::vector<std::string> tags;
  if (!tag.empty()) tags.push_back(tag);
  if (auto it = j.find("tags"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      const Error e = Send("'tags' must be an array of strings");
      co_return co_await E2bApi::SendControlError(ctx, e);
    }
    for (const auto& t : *it) {
      if (!t.is_string()) {
        const Error e = Send("'tags' must be an array of strings");
        co_return co_await E2bApi::SendControlError(ctx, e);
      }
      tags.push_back(t.get<std::string>());
    }
  }
  if (tags.empty()) tags.push_back("default");
  if (!ValidTemplateName(tid) || tid.rfind("image:", 0) == 0) {
    const Error e = Send("template name '" + full +
                         "' must match [a-z0-9][a-z0-9._-]{0,62} (with an optional :tag)");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  for (const auto& t : tags) {
    if (!ValidTag(t) || !ValidTemplateName(TaggedName(tid, t))) {
      const Error e = Send("tag '" + t + "' must match [a-z0-9][a-z0-9._-]*");
      co_return co_await E2bApi::SendControlError(ctx, e);
    }
  }
  for (const auto& t : tags) {
    if (auto st = MayWrite(ctx.principal(), TaggedName(tid, t)); !st.ok())
      co_return co_await E2bApi::SendControlError(ctx, st.error());
  }
  auto b = std::make_shared<Build>();
  b->id = Uuid();
  b->template_id = tid;
  b->tags = tags;
  b->owner = ctx.principal().owner;
  b->admin = ctx.principal().admin();
  b->created = std::chrono::system_clock::now();
  builds_[b->id] = b;
  Prune();
  const json out = {{"templateID", tid},
                    {"buildID", b->id},
                    {"names", json::array({tid})},
                    {"aliases", json::array({tid})},
                    {"tags", tags},
                    {"public", false}};
  co_await ctx.SendJson(202, out);
}

asio::awaitable<void> E2bTemplates::FileUploadLink(HttpContext& ctx, const std::string& tid,
                                                   const std::string& hash) {
  if (hash.empty() || hash.size() > 128 ||
      hash.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    const Error e = Send("files hash '" + hash + "' is not a hex digest");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  (void)tid;  // uploads are the caller's, whichever template asks
  const std::string key = ctx.principal().owner + "/" + hash;
  if (uploads_.count(key)) {
    const json out = {{"present", true}};
    co_return co_await ctx.SendJson(201, out);
  }
  Prune();
  const std::string token = RandomHex(24);
  tokens_[token] = Token{key, std::chrono::system_clock::now() + kTokenLife};
  // This server's own address as the client reached it.
  const std::string proto = ctx.Header("X-Forwarded-Proto") == "https" ? "https" : "http";
  const json out = {{"present", false},
                    {"url", proto + "://" + ctx.Header("Host") + "/e2b/template-uploads/" + token}};
  co_await ctx.SendJson(201, out);
}

asio::awaitable<void> E2bTemplates::Upload(HttpContext& ctx, const std::string& token) {
  auto it = tokens_.find(token);
  if (it == tokens_.end() || it->second.expires < std::chrono::system_clock::now()) {
    const Error e = MakeError(Code::kUnauthorized, "this upload URL is unknown, used or expired");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  const std::string key = it->second.key;
  tokens_.erase(it);
  ctx.MarkAuthenticated();
  auto body = co_await ctx.ReadBody(kUploadMax);
  if (!body.ok()) co_return co_await E2bApi::SendControlError(ctx, body.error());
  if (auto old = uploads_.find(key); old != uploads_.end()) {
    upload_bytes_ -= old->second.bytes.size();
    uploads_.erase(old);
    std::erase(upload_order_, key);
  }
  upload_bytes_ += body->size();
  uploads_[key] = Uploaded{key.substr(0, key.find('/')), std::move(*body)};
  upload_order_.push_back(key);
  while (upload_bytes_ > kUploadsTotal && upload_order_.size() > 1) {
    const std::string oldest = upload_order_.front();
    upload_order_.pop_front();
    if (auto o = uploads_.find(oldest); o != uploads_.end()) {
      upload_bytes_ -= o->second.bytes.size();
      uploads_.erase(o);
    }
  }
  co_await ctx.SendEmpty(200);
}

Result<TemplateSpec> E2bTemplates::SpecOf(const json& j, const std::string& tid,
                                          const auth::Principal& who) const {
  if (!j.is_object()) return Send("the build body must be an object");
  TemplateSpec spec;
  spec.name = tid;
  auto from_template = OptString(j, "fromTemplate");
  auto from_image = OptString(j, "fromImage");
  auto start = OptString(j, "startCmd");
  auto ready = OptString(j, "readyCmd");
  for (auto* r : {&from_template, &from_image, &start, &ready})
    if (!r->ok()) return r->error();
  if (j.contains("fromImageRegistry") && !j["fromImageRegistry"].is_null())
    return MakeError(Code::kNotSupported,
                     "'fromImageRegistry' (registry credentials in the build) is not supported: "
                     "the operator configures registry credentials (--image-auth-file)");
  const bool has_tpl = from_template->has_value() && !(*from_template)->empty();
  const bool has_img = from_image->has_value() && !(*from_image)->empty();
  if (has_tpl == has_img) return Send("exactly one of 'fromImage' or 'fromTemplate' is required");
  if (has_tpl) {
    spec.from = **from_template;
    if (!ValidTemplateName(spec.from))
      return Send("'fromTemplate' '" + spec.from + "' is not a template name");
  } else {
    // The alias table first (the operator's override), then E2B's base
    // image as hutch's base, then the image itself.
    const std::string img = **from_image;
    auto aliases = mgr_->templates()->Aliases();
    if (auto a = aliases.find(img); a != aliases.end()) spec.from = a->second;
    else if (img == kE2bBaseImage || img.rfind(std::string(kE2bBaseImage) + ":", 0) == 0)
      spec.from = "base";
    else spec.from = "image:" + img;
  }
  if (spec.from == tid) return Send("a template cannot be built from itself");
  spec.start = start->value_or("");
  spec.ready = ready->value_or("");
  spec.ready_timeout_seconds = kReadyTimeoutSeconds;
  spec.owner = who.admin() ? "" : who.owner;
  const json steps = j.value("steps", json::array());
  if (!steps.is_array()) return Send("'steps' must be an array");
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    const std::string where = "steps[" + std::to_string(i) + "]";
    if (!s.is_object() || !s.contains("type") || !s["type"].is_string())
      return Send(where + " needs a 'type'");
    const std::string type = s["type"].get<std::string>();
    auto args = StringArgs(s);
    if (!args.ok()) return args.error();
    const std::vector<std::string>& a = *args;
    TemplateStep st;
    if (type == "RUN") {
      if (a.empty() || a[0].empty()) return Send(where + ": RUN needs a command");
      st.kind = TemplateStep::Kind::kRun;
      st.command = a[0];
      if (a.size() > 1) st.user = a[1];
    } else if (type == "WORKDIR" || type == "USER") {
      if (a.empty() || a[0].empty()) return Send(where + ": " + type + " needs an argument");
      st.kind = type == "USER" ? TemplateStep::Kind::kUser : TemplateStep::Kind::kWorkdir;
      (type == "USER" ? st.user : st.path) = a[0];
    } else if (type == "ENV") {
      if (a.size() % 2 != 0) return Send(where + ": ENV takes name, value pairs");
      st.kind = TemplateStep::Kind::kEnv;
      for (size_t k = 0; k + 1 < a.size(); k += 2) {
        if (a[k].empty() || a[k].find('=') != std::string::npos)
          return Send(where + ": env name '" + a[k] + "' is not valid");
        st.env[a[k]] = a[k + 1];
      }
    } else if (type == "COPY") {
      if (a.size() < 2) return Send(where + ": COPY needs a source and a destination");
      const std::string hash = s.value("filesHash", "");
      auto up = uploads_.find(who.owner + "/" + hash);
      if (hash.empty() || up == uploads_.end())
        return Send(where + ": the files of COPY " + a[0] + " (hash " + hash +
                    ") were not uploaded");
      st.kind = TemplateStep::Kind::kCopy;
      st.archive = true;
      st.data = up->second.bytes;
      st.archive_path = a[0];
      st.path = a[1];
      if (a.size() > 2) st.owner = a[2];
      if (a.size() > 3 && !a[3].empty()) {
        char* end = nullptr;
        const unsigned long m = strtoul(a[3].c_str(), &end, 8);
        if (*end || m > 07777) return Send(where + ": COPY mode '" + a[3] + "' is not octal");
        st.mode = static_cast<int32_t>(m);
      }
    } else {
      return MakeError(Code::kNotSupported, where + ": step type '" + type + "' is not supported");
    }
    spec.steps.push_back(std::move(st));
  }
  return spec;
}

asio::awaitable<void> E2bTemplates::StartBuild(HttpContext& ctx, const std::string& tid,
                                               const std::string& bid) {
  auto found = FindBuild(ctx.principal(), tid, bid);
  if (!found.ok()) co_return co_await E2bApi::SendControlError(ctx, found.error());
  std::shared_ptr<Build> b = *found;
  if (b->status != "waiting") {
    const Error e = MakeError(Code::kConflict, "build " + bid + " was started already");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  TemplateBuilder* builder = mgr_->template_builder();
  if (!builder) {
    const Error e = MakeError(Code::kNotSupported, "this hutchd does not build templates");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await E2bApi::SendControlError(ctx, body.error());
  auto spec = SpecOf(*body, tid, ctx.principal());
  if (!spec.ok()) co_return co_await E2bApi::SendControlError(ctx, spec.error());
  if (!ctx.principal().admin() && !spec->FromDebian()) {
    auto parent = mgr_->templates()->Resolve(spec->from);
    if (parent.ok() && !parent->owner.empty() && parent->owner != ctx.principal().owner) {
      const Error e = MakeError(Code::kTemplateNotFound, "template '" + spec->from + "' not found");
      co_return co_await E2bApi::SendControlError(ctx, e);
    }
  }
  if (builder->building(tid)) {
    const Error e = MakeError(Code::kConflict, "template '" + tid + "' is being built already");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  if (!ctx.principal().admin()) {
    if (auto st = builder->CheckQuota(*spec, mgr_->options().quotas); !st.ok())
      co_return co_await E2bApi::SendControlError(ctx, st.error());
  }
  b->status = "building";
  b->entries.push_back(Entry("info", "Building template " + tid + " from " + spec->from));
  auto ex = co_await asio::this_coro::executor;
  asio::co_spawn(ex, RunBuild(b, std::move(*spec)), asio::detached);
  co_await ctx.SendEmpty(202);
}

asio::awaitable<void> E2bTemplates::RunBuild(std::shared_ptr<Build> b, TemplateSpec spec) {
  TemplateBuilder* builder = mgr_->template_builder();
  auto add = [b](json e) {
    if (b->entries.size() < kEntriesMax) b->entries.push_back(std::move(e));
    else if (b->entries.size() == kEntriesMax)
      b->entries.push_back(Entry("warn", "(the build log is longer than this; lines dropped)"));
  };
  TemplateBuildSink sink = [add](const std::string& event,
                                 const json& data) -> asio::awaitable<void> {
    if (event == "step") {
      add(Entry("info",
                "[" + std::to_string(data.value("index", 0)) + "/" +
                    std::to_string(data.value("of", 0)) + "] " + data.value("name", "") + ": " +
                    data.value("detail", ""),
                E2bStepName(data.value("name", ""))));
    } else if (event == "log") {
      add(Entry(data.value("stream", "") == "stderr" ? "warn" : "info", data.value("text", ""),
                E2bStepName(data.value("step", ""))));
    } else if (event == "done") {
      add(Entry("info",
                data.value("cached", false) ? "Template ready (cached build)" : "Template ready"));
    } else if (event == "error") {
      add(Entry("error", data.value("message", ""), E2bStepName(data.value("name", ""))));
    }
    co_return;
  };
  const TenantQuotas* quota = b->admin ? nullptr : &mgr_->options().quotas;
  auto rec = co_await builder->Build(std::move(spec), sink, quota);
  if (!rec.ok()) {
    const TemplateBuildFailure& f = builder->last_failure();
    json tail = json::array();
    const size_t n = b->entries.size();
    for (size_t i = n > 20 ? n - 20 : 0; i < n; ++i) tail.push_back(b->entries[i]);
    b->reason = {
        {"message", rec.error().message}, {"step", E2bStepName(f.name)}, {"logEntries", tail}};
    b->status = "error";
    co_return;
  }
  build_of_hash_[rec->hash] = b->id;
  for (const auto& t : b->tags) {
    if (auto st = Tag(*rec, TaggedName(b->template_id, t)); !st.ok()) {
      b->reason = {{"message", st.error().message}, {"step", "finalize"}};
      b->status = "error";
      co_return;
    }
  }
  b->status = "ready";
}

asio::awaitable<void> E2bTemplates::BuildStatus(HttpContext& ctx, const std::string& tid,
                                                const std::string& bid) {
  auto found = FindBuild(ctx.principal(), tid, bid);
  if (!found.ok()) co_return co_await E2bApi::SendControlError(ctx, found.error());
  const Build& b = **found;
  size_t offset = 0;
  if (auto q = ctx.Query("logsOffset"); q && !q->empty()) {
    char* end = nullptr;
    const unsigned long long v = strtoull(q->c_str(), &end, 10);
    if (*end) {
      const Error e = Send("'logsOffset' must be a number");
      co_return co_await E2bApi::SendControlError(ctx, e);
    }
    offset = static_cast<size_t>(std::min<unsigned long long>(v, b.entries.size()));
  }
  json entries = json::array();
  for (size_t i = offset; i < b.entries.size(); ++i) entries.push_back(b.entries[i]);
  json out = {{"templateID", tid},
              {"buildID", bid},
              {"status", b.status},
              {"logEntries", entries},
              {"logs", json::array()}};
  if (!b.reason.is_null()) out["reason"] = b.reason;
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> E2bTemplates::AliasExists(HttpContext& ctx, const std::string& alias) {
  TemplateRegistry* reg = mgr_->templates();
  auto rec = Visible(ctx.principal(), alias);
  if (!rec.ok()) {
    // Another tenant's name: E2B answers 403 (the name is taken).
    const bool taken = reg->Resolve(alias).ok();
    const Error e = taken
                        ? MakeError(Code::kForbidden, "template '" + alias + "' is not yours")
                        : MakeError(Code::kTemplateNotFound, "template '" + alias + "' not found");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  const json out = {{"templateID", rec->name}, {"public", rec->owner.empty()}};
  co_await ctx.SendJson(200, out);
}

asio::awaitable<Result<std::pair<std::string, json>>> E2bTemplates::TagsBody(
    HttpContext& ctx, const char* key) const {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return body.error();
  auto named = OptString(*body, key);
  if (!named.ok()) co_return named.error();
  json tags = body->value("tags", json::array());
  if (!named->has_value() || !tags.is_array() || tags.empty())
    co_return Send(std::string("'") + key + "' and 'tags' are required");
  co_return std::make_pair(**named, std::move(tags));
}

asio::awaitable<void> E2bTemplates::AssignTags(HttpContext& ctx) {
  auto body = co_await TagsBody(ctx, "target");
  if (!body.ok()) co_return co_await E2bApi::SendControlError(ctx, body.error());
  const json& tags = body->second;
  auto [name, tag] = SplitTag(body->first);
  auto rec = Visible(ctx.principal(), TaggedName(name, tag));
  if (!rec.ok()) co_return co_await E2bApi::SendControlError(ctx, rec.error());
  std::vector<std::string> added;
  for (const auto& t : tags) {
    const std::string tv = t.is_string() ? t.get<std::string>() : "";
    if (!ValidTag(tv) || !ValidTemplateName(TaggedName(name, tv))) {
      const Error e = Send("tag '" + tv + "' must match [a-z0-9][a-z0-9._-]*");
      co_return co_await E2bApi::SendControlError(ctx, e);
    }
    if (auto st = MayWrite(ctx.principal(), TaggedName(name, tv)); !st.ok())
      co_return co_await E2bApi::SendControlError(ctx, st.error());
    if (auto st = Tag(*rec, TaggedName(name, tv)); !st.ok())
      co_return co_await E2bApi::SendControlError(ctx, st.error());
    added.push_back(tv);
  }
  const json out = {{"buildID", BuildIdOf(rec->hash)}, {"tags", added}};
  co_await ctx.SendJson(201, out);
}

asio::awaitable<void> E2bTemplates::RemoveTags(HttpContext& ctx) {
  auto body = co_await TagsBody(ctx, "name");
  if (!body.ok()) co_return co_await E2bApi::SendControlError(ctx, body.error());
  const std::string& name = body->first;
  for (const auto& t : body->second) {
    const std::string tagged = TaggedName(name, t.is_string() ? t.get<std::string>() : "");
    auto rec = Visible(ctx.principal(), tagged);
    if (!rec.ok() || rec->name != tagged) {
      const Error e = MakeError(Code::kTemplateNotFound, "tag '" + tagged + "' not found");
      co_return co_await E2bApi::SendControlError(ctx, e);
    }
    if (auto st = mgr_->DeleteTemplate(tagged); !st.ok())
      co_return co_await E2bApi::SendControlError(ctx, st.error());
  }
  co_await ctx.SendEmpty(204);
}

asio::awaitable<void> E2bTemplates::ListTags(HttpContext& ctx, const std::string& tid) {
  json out = json::array();
  bool any = false;
  for (const auto& r : mgr_->templates()->List()) {
    auto [name, tag] = SplitTag(r.name);
    if (name != tid || (!r.owner.empty() && !ctx.principal().Owns(r.owner))) continue;
    any = true;
    out.push_back({{"tag", tag.empty() ? "default" : tag},
                   {"buildID", BuildIdOf(r.hash)},
                   {"createdAt", FormatRfc3339(r.built_at)}});
  }
  if (!any) {
    const Error e = MakeError(Code::kTemplateNotFound, "template '" + tid + "' not found");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> E2bTemplates::DeleteTemplate(HttpContext& ctx, const std::string& id) {
  std::vector<std::string> names;
  for (const auto& r : mgr_->templates()->List()) {
    auto [name, tag] = SplitTag(r.name);
    if (name == id && r.name.rfind("image:", 0) != 0) names.push_back(r.name);
  }
  if (id == "base") {
    const Error e = MakeError(
        Code::kNotSupported, "removing 'base' is not supported: hutchd assembles it from the host");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  if (names.empty()) {
    const Error e = MakeError(Code::kTemplateNotFound, "template '" + id + "' not found");
    co_return co_await E2bApi::SendControlError(ctx, e);
  }
  for (const auto& n : names) {
    auto rec = Visible(ctx.principal(), n);
    if (!rec.ok() || (rec->owner.empty() && !ctx.principal().admin())) {
      const Error e = rec.ok() ? MakeError(Code::kForbidden, "template '" + id +
                                                                 "' is shared; "
                                                                 "only an admin key removes it")
                               : rec.error();
      co_return co_await E2bApi::SendControlError(ctx, e);
    }
  }
  for (const auto& n : names)
    if (auto st = mgr_->DeleteTemplate(n); !st.ok())
      co_return co_await E2bApi::SendControlError(ctx, st.error());
  co_await ctx.SendEmpty(204);
}

}  // namespace hutch::api::e2b
