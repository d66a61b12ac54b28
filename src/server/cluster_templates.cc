#include "server/cluster_templates.h"

#include <spdlog/spdlog.h>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/file_body.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/scoped_tree.h"
#include "common/subprocess.h"
#include "server/node_call.h"

namespace hutch::api {

namespace {

namespace fs = std::filesystem;

constexpr auto kCopyTimeout = std::chrono::hours(1);
// What the receiver needs to place the copied dirs in its own state dir.
constexpr const char* kBuildsDirHeader = "X-Hutch-Builds-Dir";
constexpr const char* kBaseRootfsHeader = "X-Hutch-Base-Rootfs";
constexpr const char* kBaseIdentityHeader = "X-Hutch-Base-Identity";
constexpr const char* kHashHeader = "X-Hutch-Template-Hash";
constexpr const char* kOwnerHeader = "X-Hutch-Template-Owner";

// tar of the named dirs under $1, to stdout; its complaints are dropped
// (stdout is the stream), its exit status says whether it is whole.
constexpr const char* kTarScript =
    "d=$1; shift; exec tar --format=posix --numeric-owner --xattrs --xattrs-include='*' "
    "-C \"$d\" -cf - \"$@\" 2>/dev/null";

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The build dir (a hash) `path` lies in under `builds`; "" if elsewhere.
std::string BuildOf(const std::string& path, const std::string& builds) {
  if (path.rfind(builds + "/", 0) != 0) return "";
  const std::string rest = path.substr(builds.size() + 1);
  return rest.substr(0, rest.find('/'));
}

// A build dir name as a peer sends it: a plain name, nothing that walks.
bool PlainName(const std::string& s) {
  if (s.empty() || s[0] == '.') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

}  // namespace

std::string ClusterTemplates::SourceFor(const std::string& name, const std::string& target) const {
  if (name.empty()) return "";
  const auto& nodes = cluster_->nodes();
  if (auto t = nodes.find(target); t != nodes.end() && t->second.has_template(name)) return "";
  for (const auto& [n, info] : nodes)
    if (n != target && info.has_template(name)) return n;
  return "";
}

bool ClusterTemplates::Listed(const std::string& name) const {
  for (const auto& [n, info] : cluster_->nodes())
    if (info.has_template(name)) return true;
  return false;
}

asio::awaitable<bool> ClusterTemplates::Serve(HttpContext& ctx,
                                              const std::vector<std::string>& seg) {
  if (seg.size() != 5 || seg[0] != "v1" || seg[1] != "cluster" || seg[2] != "templates")
    co_return false;
  if (seg[4] == "export" && ctx.method() == http::verb::get) {
    co_await Export(ctx, seg[3]);
    co_return true;
  }
  if (seg[4] == "fetch" && ctx.method() == http::verb::post) {
    co_await Fetch(ctx, seg[3]);
    co_return true;
  }
  co_return false;
}

asio::awaitable<void> ClusterTemplates::Export(HttpContext& ctx, const std::string& name) {
  const auth::Principal who = creds_->MatchBearer(ctx.Header("Authorization"));
  if (who.empty()) {
    const Error e = MakeError(Code::kUnauthorized, "a valid API key is required");
    co_return co_await ctx.SendError(e);
  }
  auto rec = templates_->Get(name);
  // Another tenant's template is not there for this key.
  if (!rec.ok() || !(rec->owner.empty() || who.Owns(rec->owner))) {
    const Error e = MakeError(Code::kTemplateNotFound, "template '" + name + "' not found");
    co_return co_await ctx.SendError(e);
  }
  const std::string& builds = templates_->builds_dir();
  std::vector<std::string> dirs;
  std::vector<std::string> paths = rec->info.layers;
  paths.push_back(rec->info.rootfs);
  for (const auto& p : paths) {
    const std::string h = BuildOf(p, builds);
    if (!h.empty() && std::find(dirs.begin(), dirs.end(), h) == dirs.end()) dirs.push_back(h);
  }
  // An image template's record has a dir of its own, apart from its layer
  // dirs (core/image_puller.h).
  if (!dirs.empty() && std::find(dirs.begin(), dirs.end(), rec->hash) == dirs.end() &&
      PlainName(rec->hash) && fs::exists(templates_->BuildDir(rec->hash) + "/template.json"))
    dirs.push_back(rec->hash);
  if (dirs.empty()) {
    // base and shipped templates: every node has its own.
    const Error e =
        MakeError(Code::kInvalidRequest, "template '" + name + "' has no build to copy");
    co_return co_await ctx.SendError(e);
  }
  auto base = templates_->Resolve("base");
  auto identity = templates_->Identity("base");
  std::vector<std::pair<std::string, std::string>> headers = {
      {kBuildsDirHeader, builds},
      {kBaseRootfsHeader, base.ok() ? base->rootfs : ""},
      {kBaseIdentityHeader, identity.ok() ? *identity : ""},
      {kHashHeader, rec->hash},
      {kOwnerHeader, rec->owner}};
  if (auto st = co_await ctx.BeginStream(200, "application/x-tar", -1, headers); !st.ok())
    co_return;
  std::vector<std::string> argv = {"/bin/sh", "-c", kTarScript, "sh", builds};
  argv.insert(argv.end(), dirs.begin(), dirs.end());
  bool broken = false;
  auto sink = [&ctx, &broken](std::string_view d) -> asio::awaitable<void> {
    if (broken) co_return;
    auto st = co_await ctx.WriteChunk(d);
    if (!st.ok()) broken = true;
  };
  const std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  auto rc = co_await RunToolStreaming(argv, env, kCopyTimeout, sink);
  if (broken || !rc.ok() || *rc != 0) {
    // No last chunk: the receiver sees a stream cut short, not a template.
    spdlog::warn("cluster_template_export_failed template={} exit={} client_gone={}", name,
                 rc.ok() ? *rc : -1, broken);
    ctx.CloseAfterResponse();
    co_return;
  }
  (void)co_await ctx.EndStream();
  spdlog::info("cluster_template_exported template={} hash={} dirs={}", name, rec->hash,
               dirs.size());
}

asio::awaitable<void> ClusterTemplates::Fetch(HttpContext& ctx, const std::string& name) {
  if (creds_->MatchBearer(ctx.Header("Authorization")).empty()) {
    const Error e = MakeError(Code::kUnauthorized, "a valid API key is required");
    co_return co_await ctx.SendError(e);
  }
  const auto from = ctx.Query("from");
  if (!from || from->empty()) {
    const Error e = MakeError(Code::kInvalidRequest, "'from' (a node name) is required");
    co_return co_await ctx.SendError(e);
  }
  if (templates_->Exists(name)) {
    const nlohmann::json j = {{"name", name}, {"copied", false}};
    co_return co_await ctx.SendJson(200, j);
  }
  auto r = co_await FetchFrom(ctx, name, *from);
  if (!r.ok()) co_return co_await ctx.SendError(r.error());
  co_await ctx.SendJson(201, *r);
}

asio::awaitable<Result<nlohmann::json>> ClusterTemplates::FetchFrom(HttpContext& ctx,
                                                                    const std::string& name,
                                                                    const std::string& from) {
  std::string advertise;
  if (auto it = cluster_->nodes().find(from); it != cluster_->nodes().end())
    advertise = it->second.advertise;
  if (advertise.empty())
    co_return MakeError(Code::kUnavailable, "node '" + from + "' is not in the cluster");
  auto up = co_await DialNode(from, advertise);
  if (!up.ok()) co_return up.error();
  const std::string tar = FindTool("tar");
  if (tar.empty()) co_return MakeError(Code::kInternal, "tar is not installed");

  const std::string& builds = templates_->builds_dir();
  // Under the builds dir (one file system: the rename into place is
  // atomic) with the prefix a restart sweeps.
  ScopedTree tmp{builds + "/.tmp-copy-" + RandomHex(8)};
  std::error_code fec;
  fs::create_directories(tmp.dir + "/tree", fec);
  if (fec) co_return MakeError(Code::kInternal, "create " + tmp.dir + ": " + fec.message());
  const std::string archive = tmp.dir + "/stream.tar";

  http::request<http::empty_body> req{http::verb::get, "/v1/cluster/templates/" + name + "/export",
                                      11};
  req.set(http::field::host, advertise);
  req.set(http::field::authorization, std::string(ctx.Header("Authorization")));
  req.set(kRelayedHeader, cluster_->node());
  req.set(http::field::connection, "close");
  boost::system::error_code ec;
  up->expires_after(kCopyTimeout);
  co_await http::async_write(*up, req, asio::redirect_error(asio::use_awaitable, ec));
  beast::flat_buffer buf;
  http::response_parser<http::file_body> rp;
  rp.body_limit(boost::none);
  rp.get().body().open(archive.c_str(), beast::file_mode::write, ec);
  if (ec) co_return MakeError(Code::kInternal, "open " + archive + ": " + ec.message());
  co_await http::async_read(*up, buf, rp, asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return MakeError(Code::kUnavailable,
                        "copying template '" + name + "' from node " + from + ": " + ec.message());
  auto res = rp.release();
  res.body().close();
  if (res.result_int() != 200) {
    const Code code = res.result_int() == 404 ? Code::kTemplateNotFound : Code::kUnavailable;
    co_return MakeError(
        code, "node " + from + " did not give template '" + name + "': " + ReadSmallFile(archive));
  }
  const std::string src_builds(res[kBuildsDirHeader]);
  const std::string src_base(res[kBaseRootfsHeader]);
  const std::string hash(res[kHashHeader]);
  const std::string owner(res[kOwnerHeader]);
  if (!PlainName(hash) || src_builds.empty())
    co_return MakeError(Code::kUnavailable, "node " + from + " sent no template build");

  const std::vector<std::string> untar = {
      tar,  "-x",   "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", tmp.dir + "/tree",
      "-f", archive};
  auto unpacked = co_await RunTool(untar, kCopyTimeout);
  fs::remove(archive, fec);
  if (!unpacked.ok()) co_return unpacked.error().Context("unpack template '" + name + "'");

  // The paths a build record names, from the sender's state dir to ours.
  auto base = templates_->Resolve("base");
  bool on_base = false;
  auto local = [&](const std::string& p) -> std::string {
    if (p.rfind(src_builds + "/", 0) == 0) return builds + p.substr(src_builds.size());
    if (!src_base.empty() && p == src_base && base.ok()) {
      on_base = true;
      return base->rootfs;
    }
    return p;
  };
  std::vector<std::pair<std::string, std::string>> moves;
  for (const auto& e : fs::directory_iterator(tmp.dir + "/tree", fec)) {
    const std::string h = e.path().filename().string();
    if (!PlainName(h)) co_return MakeError(Code::kUnavailable, "unexpected entry " + h);
    const std::string dest = templates_->BuildDir(h);
    if (fs::exists(dest)) continue;  // this node has that build already
    const std::string record = e.path().string() + "/template.json";
    if (!fs::exists(record) &&
        (fs::exists(e.path() / "layer") || fs::exists(e.path() / "rootfs"))) {
      // A layer of an image (shared between images): no record to adapt.
      moves.emplace_back(e.path().string(), dest);
      continue;
    }
    TemplateRecord r;
    if (!TemplateRecord::FromStoreJson(ReadSmallFile(record), &r))
      co_return MakeError(Code::kUnavailable,
                          "build " + h + " from node " + from + " has no readable template.json");
    r.info.rootfs = local(r.info.rootfs);
    for (auto& l : r.info.layers) l = local(l);
    std::ofstream(record, std::ios::trunc) << r.ToStoreJson();
    moves.emplace_back(e.path().string(), dest);
  }
  if (fec) co_return MakeError(Code::kInternal, "read " + tmp.dir + ": " + fec.message());
  // A layer is only right over the base it was built on.
  const std::string src_identity(res[kBaseIdentityHeader]);
  if (on_base) {
    auto mine = templates_->Identity("base");
    if (!mine.ok() || *mine != src_identity)
      co_return MakeError(Code::kConflict, "template '" + name + "' stands on node " + from +
                                               "'s base, which differs from this node's "
                                               "(build base from the same packages everywhere)");
  }
  for (const auto& [src, dest] : moves) {
    fs::rename(src, dest, fec);
    // Lost a race with a copy of the same build: theirs is as good.
    if (fec && !fs::exists(dest))
      co_return MakeError(Code::kInternal, "rename to " + dest + ": " + fec.message());
  }
  auto rec = templates_->FindBuild(hash);
  if (!rec.ok()) co_return rec.error().Context("template '" + name + "' copied from " + from);
  rec->name = name;
  rec->info.name = name;
  rec->owner = owner;
  rec->info.owner = owner;
  if (auto st = templates_->Register(*rec); !st.ok()) co_return st.error();
  spdlog::info("cluster_template_copied template={} hash={} from={} builds={}", name, hash, from,
               moves.size());
  co_return nlohmann::json{{"name", name}, {"hash", hash}, {"from", from}, {"copied", true}};
}

}  // namespace hutch::api
