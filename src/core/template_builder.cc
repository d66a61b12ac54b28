#include "core/template_builder.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/scoped_tree.h"
#include "common/sha256.h"
#include "core/build_copy.h"
#include "core/debootstrap.h"
#include "core/exec_session.h"
#include "core/file_ops.h"
#include "core/sandbox.h"

namespace hutch {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bumped when what a build puts into its dir changes, so older builds of
// the same spec are not taken for current ones.
constexpr int kBuildLayout = 1;
// Lines of a failed step's output kept for the error (and bytes, for
// commands that print without newlines).
constexpr size_t kTailLines = 40;
constexpr size_t kTailBytes = 8192;
// The stream names of a step's log events.
constexpr const char* kOut = "stdout";
constexpr const char* kErr = "stderr";

// Bytes of a copy step's archive its files may add up to (they are held
// in hutchd's memory while written).
constexpr uint64_t kCopyArchiveMax = 512ull << 20;
// /etc/passwd or /etc/group read to resolve an owner.
constexpr int64_t kAccountFileMax = 4 << 20;
// The environment of build commands, under the template's env.
const std::map<std::string, std::string>& BuildEnv() {
  static const std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"LC_ALL", "C.UTF-8"},
      {"DEBIAN_FRONTEND", "noninteractive"}};
  return env;
}

// A step of the build plan, in order.
struct Step {
  enum Kind { kDebootstrap, kPackages, kFiles, kRun, kOrdered, kCapture } kind;
  std::string name;    // "debootstrap", "packages", "files", "run 2", "step 3", "capture"
  std::string detail;  // the command, the package list...
  size_t index = 0;    // kOrdered: which of spec.steps
};

// One line saying what an ordered step does (its announcement's detail).
std::string StepDetail(const TemplateStep& st) {
  switch (st.kind) {
    case TemplateStep::Kind::kRun:
      return st.user.empty() ? st.command : st.command + " (as " + st.user + ")";
    case TemplateStep::Kind::kCopy:
      return (st.archive ? st.archive_path : std::string("content")) + " -> " + st.path;
    case TemplateStep::Kind::kEnv: {
      std::string out;
      for (const auto& [k, v] : st.env) out += (out.empty() ? "" : " ") + k + "=" + v;
      return "env " + out;
    }
    case TemplateStep::Kind::kWorkdir:
      return "workdir " + st.path;
    case TemplateStep::Kind::kUser:
      return "user " + st.user;
  }
  return "";
}

// The output of one step, split into lines for the sink, with its tail kept.
class StepLog {
 public:
  StepLog(TemplateBuildSink* sink, std::string step) : sink_(sink), step_(std::move(step)) {}
  asio::awaitable<void> Feed(std::string_view data, const char* stream) {
    partial_.append(data);
    size_t nl;
    while ((nl = partial_.find('\n')) != std::string::npos) {
      std::string line = partial_.substr(0, nl);
      partial_.erase(0, nl + 1);
      co_await Emit(std::move(line), stream);
    }
    if (partial_.size() > kTailBytes) {
      std::string line = std::move(partial_);
      partial_.clear();
      co_await Emit(std::move(line), stream);
    }
  }
  asio::awaitable<void> Flush(const char* stream) {
    if (partial_.empty()) co_return;
    std::string line = std::move(partial_);
    partial_.clear();
    co_await Emit(std::move(line), stream);
  }
  std::string Tail() const {
    std::string out;
    for (const auto& l : tail_) out += l + "\n";
    if (out.size() > kTailBytes) out = out.substr(out.size() - kTailBytes);
    return out;
  }

 private:
  asio::awaitable<void> Emit(std::string line, const char* stream) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    tail_.push_back(line);
    if (tail_.size() > kTailLines) tail_.pop_front();
    json ev = {{"step", step_}, {"stream", stream}, {"text", std::move(line)}};
    const std::string kind = "log";
    co_await (*sink_)(kind, ev);
  }
  TemplateBuildSink* sink_;
  std::string step_;
  std::string partial_;
  std::deque<std::string> tail_;
};

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

uint64_t g_tree_bytes = 0;
int AddSize(const char*, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_F) g_tree_bytes += static_cast<uint64_t>(st->st_blocks) * 512;
  return 0;
}
// Disk use of a tree (what `du` says); builds run on one thread.
uint64_t TreeBytes(const std::string& dir) {
  g_tree_bytes = 0;
  nftw(dir.c_str(), AddSize, 64, FTW_PHYS);
  return g_tree_bytes;
}

}  // namespace

asio::awaitable<void> TemplateBuilder::Teardown(std::shared_ptr<Instance>& inst, int& net_slot) {
  if (inst) co_await inst->Destroy();
  inst.reset();
  if (const int slot = std::exchange(net_slot, -1); slot >= 0 && net_) co_await net_->Release(slot);
}

Error TemplateBuilder::Fail(Error e, TemplateBuildFailure f) {
  failure_ = std::move(f);
  return e;
}

Status TemplateBuilder::CheckQuota(const TemplateSpec& spec, const TenantQuotas& quota) const {
  int count = 0;
  uint64_t bytes = 0;
  for (const auto& t : reg_->List()) {
    if (t.owner != spec.owner || t.name == spec.name) continue;
    ++count;
    bytes += t.size_bytes;
  }
  for (const auto& [name, owner] : active_)
    if (owner == spec.owner && name != spec.name) ++count;
  if (auto st =
          CheckCountQuota("templates", count, 1, quota.max_templates, "--tenant-max-templates");
      !st.ok())
    return st;
  return CheckBytesQuota("templates", bytes, 0, quota.max_template_gb, "--tenant-max-template-gb");
}

asio::awaitable<Result<TemplateRecord>> TemplateBuilder::Build(TemplateSpec spec,
                                                               TemplateBuildSink sink,
                                                               const TenantQuotas* quota) {
  const auto t0 = std::chrono::steady_clock::now();
  failure_ = TemplateBuildFailure{};
  Result<TemplateRecord> r = MakeError(Code::kInternal, "template build did not run");
  bool cached = false;
  if (spec.name == "base") {
    // hutchd assembles base from the host at its start (no download):
    // "building" base.toml reports that template.
    if (spec.from != "base" || !spec.packages.empty() || !spec.files.empty() || !spec.run.empty() ||
        !spec.steps.empty())
      r = MakeError(Code::kInvalidRequest,
                    "'base' is assembled by hutchd from the host; give your template another name");
    else r = reg_->Get("base");
    cached = true;
  } else if (active_.count(spec.name)) {
    r = MakeError(Code::kConflict, "template '" + spec.name + "' is being built already");
  } else if (auto st = quota ? CheckQuota(spec, *quota) : Status(); !st.ok()) {
    r = st.error();
  } else {
    active_[spec.name] = spec.owner;
    r = co_await Run(spec, sink, &cached);
    active_.erase(spec.name);
  }
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!r.ok()) {
    const Error& e = r.error();
    json ev = {{"code", CodeName(e.code)},        {"message", e.message},
               {"step", failure_.step},           {"name", failure_.name},
               {"exit_code", failure_.exit_code}, {"log_tail", failure_.log_tail}};
    const std::string kind = "error";
    co_await sink(kind, ev);
    spdlog::warn("template={} build_failed step=\"{}\" exit_code={} err=\"{}\"", spec.name,
                 failure_.name, failure_.exit_code, e.message);
    co_return r;
  }
  json ev = {{"template", r->ToJson()}, {"cached", cached}, {"duration_ms", ms}};
  const std::string kind = "done";
  co_await sink(kind, ev);
  spdlog::info("template={} built hash={} cached={} duration_ms={}", spec.name,
               r->hash.substr(0, 12), cached, ms);
  co_return r;
}

// One build's state, shared by the steps of TemplateBuilder::Run. A member
// of TemplateBuilder so that its steps reach the builder's driver,
// registry and network, and record failures through Fail().
class TemplateBuilder::BuildRun {
 public:
  BuildRun(TemplateBuilder& b, const TemplateSpec& spec, TemplateBuildSink& sink)
      : b_(b), spec_(spec), sink_(sink) {}

  // The bottom of the stack and its identity (for the cache key): a
  // debootstrap root (built at its step), or the parent template's stack.
  Status ResolveBottom() {
    if (spec_.FromDebian()) {
      auto m = FindDebianMirror(spec_.DebianSuite(), b_.o_.apt_dir);
      if (!m.ok()) return m.error();
      mirror_ = *m;
      parent_identity_ = "debootstrap:" + spec_.DebianSuite() + ":" + mirror_;
      return {};
    }
    std::string pname = spec_.from;
    auto aliases = b_.reg_->Aliases();
    if (!b_.reg_->Exists(pname))
      if (auto a = aliases.find(pname); a != aliases.end()) pname = a->second;
    auto rec = b_.reg_->Get(pname);
    if (!rec.ok())
      return rec.error().Context("'from' must name a built template or debian:<suite>");
    parent_ = rec->info;
    auto id = b_.reg_->Identity(pname);
    if (!id.ok()) return id.error();
    parent_identity_ = *id;
    bottom_rootfs_ = parent_.rootfs;
    parent_layers_ = parent_.layers;
    return {};
  }

  // apt-get needs a Debian root at the bottom (base is assembled from the
  // host's files and has no package manager).
  Status CheckPackagesHaveApt() const {
    if (!spec_.packages.empty() && !spec_.FromDebian() &&
        access((bottom_rootfs_ + "/usr/bin/apt-get").c_str(), F_OK) != 0)
      return MakeError(Code::kInvalidRequest,
                       "'packages' need a Debian root: template '" + spec_.from +
                           "' has no apt-get (use from = \"debian:bookworm\" or a "
                           "template built from it)");
    return {};
  }

  // The cache: this exact build is on disk already; registered under the
  // spec's name.
  std::optional<Result<TemplateRecord>> RegisterCachedBuild() {
    hash_ = TemplateBuildHash(spec_, parent_identity_, b_.reg_->uid_base());
    auto found = b_.reg_->FindBuild(hash_);
    if (!found.ok()) return std::nullopt;
    TemplateRecord r = *found;
    r.name = spec_.name;
    r.info.name = spec_.name;
    r.spec = spec_.ToJson();
    r.owner = spec_.owner;
    if (auto st = b_.reg_->Register(r); !st.ok()) return Result<TemplateRecord>(st.error());
    return Result<TemplateRecord>(std::move(r));
  }

  // What a sandbox made from it starts with: the parent's defaults, then
  // the spec's own.
  void InheritDefaults() {
    info_.name = spec_.name;
    info_.hash = hash_;
    info_.env = parent_.env;
    for (const auto& [k, v] : spec_.env) info_.env[k] = v;
    info_.user = spec_.user.empty() ? parent_.user : spec_.user;
    info_.workdir = spec_.workdir.empty() ? parent_.workdir : spec_.workdir;
    info_.start = spec_.start.empty() ? parent_.start : spec_.start;
    info_.ready = spec_.ready.empty() ? parent_.ready : spec_.ready;
    info_.ready_timeout_seconds =
        spec_.ready.empty() ? parent_.ready_timeout_seconds : spec_.ready_timeout_seconds;
    // Ordered steps start from the parent's user, directory and env (as a
    // Dockerfile's lines start from its FROM image's), with the spec's env
    // on top; the last user and workdir they set become the template's
    // unless the spec names its own.
    cur_user_ = parent_.user;
    cur_cwd_ = parent_.workdir;
    cur_env_ = parent_.env;
    for (const auto& [k, v] : spec_.env) cur_env_[k] = v;
    std::string user = cur_user_, cwd = cur_cwd_;
    bool moved = false;
    for (const auto& st : spec_.steps) {
      if (st.kind == TemplateStep::Kind::kEnv)
        for (const auto& [k, v] : st.env) info_.env[k] = v;
      if (st.kind == TemplateStep::Kind::kUser) {
        user = st.user;
        if (!moved) cwd.clear();  // no workdir step yet: the new user's home
      }
      if (st.kind == TemplateStep::Kind::kWorkdir) {
        cwd = st.path[0] == '/' || !cwd.empty() ? AbsoluteBuildPath(st.path, cwd) : st.path;
        moved = true;
      }
    }
    if (spec_.user.empty()) info_.user = user;
    if (spec_.workdir.empty()) info_.workdir = cwd;
  }

  void PlanSteps() {
    if (spec_.FromDebian())
      plan_.push_back({Step::kDebootstrap, "debootstrap", spec_.from + " from " + mirror_});
    if (!spec_.packages.empty()) {
      std::string list;
      for (const auto& p : spec_.packages) list += (list.empty() ? "" : " ") + p;
      plan_.push_back({Step::kPackages, "packages", list});
    }
    if (!spec_.files.empty())
      plan_.push_back({Step::kFiles, "files", std::to_string(spec_.files.size()) + " file(s)"});
    for (size_t i = 0; i < spec_.run.size(); ++i)
      plan_.push_back({Step::kRun, "run " + std::to_string(i + 1), spec_.run[i]});
    for (size_t i = 0; i < spec_.steps.size(); ++i)
      plan_.push_back(
          {Step::kOrdered, "step " + std::to_string(i + 1), StepDetail(spec_.steps[i]), i});
    plan_.push_back({Step::kCapture, "capture", "the template's layer"});
  }

  // The build's temp dir, removed unless Publish renames it into place.
  Status MakeTempDir() {
    tmp_ = b_.reg_->builds_dir() + "/.tmp-" + RandomHex(8);
    std::error_code ec;
    fs::create_directories(tmp_, ec);
    if (ec) return MakeError(Code::kInternal, "create " + tmp_ + ": " + ec.message());
    tmp_guard_.emplace();
    tmp_guard_->dir = tmp_;
    return {};
  }

  int steps() const { return static_cast<int>(plan_.size()); }

  // Step i of the plan: announced to the sink, its output streamed as log
  // events. Failures are recorded (Fail) with where the build stopped.
  asio::awaitable<Status> RunStep(int i) {
    const Step& step = plan_[i];
    TemplateBuildFailure where{i + 1, step.name, -1, ""};
    co_await AnnounceStep(i);
    StepLog log(&sink_, step.name);
    if (step.kind == Step::kDebootstrap) co_return co_await DebootstrapBottom(log, where);
    if (!inst_) {
      if (auto st = co_await StartBuildSandbox(); !st.ok()) co_return b_.Fail(st.error(), where);
    }
    if (step.kind == Step::kCapture) co_return co_await CaptureLayer(where);
    if (step.kind == Step::kOrdered) co_return co_await RunOrdered(i, log, where);
    co_return co_await RunCommands(i, log, where);
  }

  asio::awaitable<void> Teardown() { co_await b_.Teardown(inst_, net_slot_); }

  // Complete: record it and move it into place under its hash (or take the
  // same build that finished meanwhile), then register it by name.
  Result<TemplateRecord> Publish(std::chrono::steady_clock::time_point t0) {
    const std::string dest = b_.reg_->BuildDir(hash_);
    TemplateRecord r;
    r.name = spec_.name;
    r.hash = hash_;
    r.from = spec_.from;
    r.spec = spec_.ToJson();
    info_.rootfs = bottom_rootfs_;
    info_.layers = {dest + "/layer"};
    for (const auto& l : parent_layers_) info_.layers.push_back(l);
    r.info = info_;
    r.built_at = std::chrono::system_clock::now();
    r.build_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    r.size_bytes = TreeBytes(tmp_ + "/layer");
    {
      std::ofstream out(tmp_ + "/template.json");
      out << r.ToStoreJson() << "\n";
      out.flush();
      if (!out) return MakeError(Code::kStorageFull, "write " + tmp_ + "/template.json");
    }
    if (rename(tmp_.c_str(), dest.c_str()) != 0) {
      // The same build finished meanwhile (under another name): use that one.
      auto found = b_.reg_->FindBuild(hash_);
      if (!found.ok()) return ErrnoError("rename " + tmp_ + " to " + dest);
      r = *found;
      r.name = spec_.name;
      r.info.name = spec_.name;
      r.spec = spec_.ToJson();
    } else {
      tmp_guard_->keep = true;
    }
    r.owner = spec_.owner;
    if (auto st = b_.reg_->Register(r); !st.ok()) return st.error();
    return r;
  }

 private:
  asio::awaitable<void> AnnounceStep(int i) {
    const Step& step = plan_[i];
    const int total = steps();
    json ev = {{"index", i + 1},
               {"of", total},
               {"name", step.name},
               {"detail", step.detail},
               {"percent", i * 100 / total}};
    const std::string kind = "step";
    co_await sink_(kind, ev);
  }

  // The debootstrap root is a build dir of its own, keyed by suite,
  // mirror and uid base, so every template from debian:<suite> shares it.
  asio::awaitable<Status> DebootstrapBottom(StepLog& log, TemplateBuildFailure& where) {
    json rkey = {{"debootstrap", spec_.DebianSuite()},
                 {"mirror", mirror_},
                 {"uid_base", b_.reg_->uid_base()},
                 {"layout", kBuildLayout}};
    const std::string rhash = Sha256Hex(rkey.dump());
    const std::string rdir = b_.reg_->BuildDir(rhash);
    if (access((rdir + "/debootstrap.json").c_str(), F_OK) == 0) {
      const std::string msg = "using the cached root " + rhash.substr(0, 12) + "\n";
      co_await log.Feed(msg, kOut);
    } else {
      const std::string rtmp = b_.reg_->builds_dir() + "/.tmp-" + RandomHex(8);
      ScopedTree rguard{rtmp};
      std::error_code ec;
      fs::create_directories(rtmp, ec);
      std::function<asio::awaitable<void>(std::string_view)> on_out =
          [&log](std::string_view d) -> asio::awaitable<void> { co_await log.Feed(d, kOut); };
      const std::string target = rtmp + "/rootfs";
      auto rc = co_await RunDebootstrap(spec_.DebianSuite(), target, mirror_, b_.reg_->uid_base(),
                                        on_out);
      co_await log.Flush(kOut);
      if (!rc.ok()) co_return b_.Fail(rc.error(), where);
      if (*rc != 0) {
        where.exit_code = *rc;
        where.log_tail = log.Tail();
        co_return b_.Fail(MakeError(Code::kBuildFailed,
                                    "step 1 (debootstrap) exited with " + std::to_string(*rc)),
                          where);
      }
      // apt in the build sandbox runs as the namespace's root; its
      // download sandbox user would need more than the jail allows.
      {
        std::ofstream a(target + "/etc/apt/apt.conf.d/99hutch-build");
        a << "APT::Sandbox::User \"root\";\nAcquire::Retries \"3\";\n";
      }
      if (auto st = ShiftRootOwners(target, b_.reg_->uid_base()); !st.ok())
        co_return b_.Fail(st.error(), where);
      {
        std::ofstream m(rtmp + "/debootstrap.json");
        m << json{{"suite", spec_.DebianSuite()},
                  {"mirror", mirror_},
                  {"uid_base", b_.reg_->uid_base()}}
                 .dump()
          << "\n";
      }
      if (rename(rtmp.c_str(), rdir.c_str()) == 0) rguard.keep = true;
      else if (access((rdir + "/debootstrap.json").c_str(), F_OK) != 0)
        co_return b_.Fail(ErrnoError("rename " + rtmp + " to " + rdir), where);
    }
    bottom_rootfs_ = rdir + "/rootfs";
    co_return Status{};
  }

  // The IPv4 addresses of the host's apt sources, now. A build's apt-get
  // goes to the mirror the host uses; when that is a private or reserved
  // address (an apt cache on the LAN), mode `all` alone would refuse it
  // (issue 32 #7), so the build sandbox, and no other, may reach these
  // addresses. A name that does not resolve is skipped: apt reports it.
  asio::awaitable<std::vector<uint32_t>> MirrorAddresses() {
    std::vector<uint32_t> out;
    asio::ip::tcp::resolver resolver(co_await asio::this_coro::executor);
    for (const auto& host : AptSourceHosts(b_.o_.apt_dir)) {
      boost::system::error_code ec;
      auto results = co_await resolver.async_resolve(asio::ip::tcp::v4(), host, "80",
                                                     asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        spdlog::warn("template build mirror_unresolved host={} err=\"{}\"", host, ec.message());
        continue;
      }
      for (const auto& r : results) {
        const uint32_t a = r.endpoint().address().to_v4().to_uint();
        if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
      }
    }
    co_return out;
  }

  // The build sandbox, started before the first step that needs it: the
  // parent's stack, the host's network.
  asio::awaitable<Status> StartBuildSandbox() {
    InstanceSpec is;
    is.id = "tb_" + RandomHex(8);
    is.rootfs = bottom_rootfs_;
    is.layers = parent_layers_;
    is.cpus = b_.o_.cpus;
    is.memory_mb = b_.o_.memory_mb;
    is.disk_mb = b_.o_.disk_mb;
    is.pids_max = b_.o_.pids_max;
    if (!b_.net_) {
      co_return MakeError(
          Code::kUnavailable,
          "template builds need sandbox networking (apt-get, run steps): " + b_.net_unavailable_);
    }
    net::NetworkPolicy all;
    all.mode = net::NetMode::kAll;
    all.private_hosts = co_await MirrorAddresses();
    auto lease = co_await b_.net_->Acquire(all);
    if (!lease.ok()) co_return lease.error().Context("network of the build sandbox");
    net_slot_ = lease->slot;
    is.netns_path = lease->netns_path;
    is.resolv_conf = lease->resolv_conf;
    is.gateway = lease->gateway;
    auto created = co_await b_.driver_->Create(is);
    if (!created.ok()) {
      co_await Teardown();
      co_return created.error().Context("start the build sandbox");
    }
    inst_ = *created;
    sb_->rec.id = is.id;
    sb_->rec.status = SandboxStatus::kRunning;
    sb_->instance = inst_;
    co_return Status{};
  }

  // The sandbox's writable layer becomes the template's own layer; the
  // build sandbox is done then.
  asio::awaitable<Status> CaptureLayer(const TemplateBuildFailure& where) {
    const std::string layer = tmp_ + "/layer";
    auto st = co_await inst_->CaptureLayer(layer);
    co_await Teardown();
    sb_->instance.reset();
    if (!st.ok()) co_return b_.Fail(st.error().Context("capture the template's layer"), where);
    co_return Status{};
  }

  // The step's commands, as root, with the template's env; a file's
  // bytes go in on stdin (the agent writes inside its own root: the host
  // never opens a path in the build sandbox).
  std::vector<std::pair<std::string, std::optional<std::string>>> StepCommands(
      const Step& step) const {
    std::vector<std::pair<std::string, std::optional<std::string>>> cmds;
    if (step.kind == Step::kPackages) {
      cmds.push_back({"set -e; apt-get update; apt-get install -y --no-install-recommends " +
                          step.detail + "; apt-get clean; rm -rf /var/lib/apt/lists/*",
                      std::nullopt});
    } else if (step.kind == Step::kFiles) {
      for (const auto& tf : spec_.files) {
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", tf.mode);
        const std::string q = ShellQuote(tf.dest);
        std::string c =
            "set -e; mkdir -p \"$(dirname " + q + ")\"; cat > " + q + "; chmod " + mode + " " + q;
        if (!tf.owner.empty()) c += "; chown " + ShellQuote(tf.owner) + " " + q;
        c += "; echo " + ShellQuote("wrote " + tf.dest);
        cmds.push_back({c, tf.content});
      }
    } else {
      cmds.push_back({step.detail, std::nullopt});
    }
    return cmds;
  }

  // Runs the step's commands one after the other; the first that does not
  // exit 0 ends the build (and the build sandbox).
  asio::awaitable<Status> RunCommands(int i, StepLog& log, TemplateBuildFailure& where) {
    const Step& step = plan_[i];
    // The fixed-order steps run as root in /, with the template's whole env.
    std::map<std::string, std::string> env = BuildEnv();
    env["HOME"] = "/root";
    for (const auto& [k, v] : info_.env) env[k] = v;
    const RunAs as{"root", "/", std::move(env)};
    for (auto& [script, input] : StepCommands(step)) {
      auto [exit, lost] = co_await ExecCommand(script, std::move(input), log, as);
      if (co_await CommandFailed(exit, log, where)) co_return Failed(i, exit, lost, where);
    }
    co_return Status{};
  }

  // Whether a command's end fails the step (then the build sandbox is torn
  // down and `where` gets the log's tail).
  asio::awaitable<bool> CommandFailed(const std::optional<ExitInfo>& exit, StepLog& log,
                                      TemplateBuildFailure& where) {
    if (exit && exit->exit_code == 0 && !exit->timed_out) co_return false;
    where.log_tail = log.Tail();
    co_await Teardown();
    sb_->instance.reset();
    co_return true;
  }

  // The error of a failed command (after CommandFailed).
  Error Failed(int i, const std::optional<ExitInfo>& exit, const Error& lost,
               TemplateBuildFailure& where) {
    const Step& step = plan_[i];
    if (!exit)
      return b_.Fail(lost.Context("step " + std::to_string(i + 1) + " (" + step.name + ")"), where);
    where.exit_code = exit->exit_code;
    std::string why = exit->timed_out    ? "timed out"
                      : exit->oom_killed ? "was OOM-killed"
                      : exit->signal     ? "was killed by signal " + std::to_string(exit->signal)
                                         : "exited with " + std::to_string(exit->exit_code);
    return b_.Fail(MakeError(Code::kBuildFailed, "step " + std::to_string(i + 1) + " (" +
                                                     step.name + ": " + step.detail + ") " + why),
                   where);
  }

  // An ordered step (TemplateStep): env, workdir and user change what
  // later steps see; run and copy act in the build sandbox.
  asio::awaitable<Status> RunOrdered(int i, StepLog& log, TemplateBuildFailure& where) {
    const TemplateStep& st = spec_.steps[plan_[i].index];
    switch (st.kind) {
      case TemplateStep::Kind::kEnv:
        for (const auto& [k, v] : st.env) cur_env_[k] = v;
        co_return Status{};
      case TemplateStep::Kind::kUser:
        cur_user_ = st.user;
        if (!moved_) cur_cwd_.clear();  // the new user's home, as InheritDefaults says
        co_return Status{};
      case TemplateStep::Kind::kWorkdir: {
        auto st2 = co_await MakeWorkdir(st.path, log);
        if (!st2.ok()) co_return b_.Fail(st2.error().Context(plan_[i].name), where);
        co_return Status{};
      }
      case TemplateStep::Kind::kCopy: {
        auto st2 = co_await CopyInto(st, log);
        if (!st2.ok()) {
          where.log_tail = log.Tail();
          co_return b_.Fail(st2.error().Context(plan_[i].name + " (" + plan_[i].detail + ")"),
                            where);
        }
        co_return Status{};
      }
      case TemplateStep::Kind::kRun:
        break;
    }
    std::map<std::string, std::string> env = BuildEnv();
    for (const auto& [k, v] : cur_env_) env[k] = v;
    const RunAs as{st.user.empty() ? CurrentUser() : st.user, cur_cwd_, std::move(env)};
    auto [exit, lost] = co_await ExecCommand(st.command, std::nullopt, log, as);
    if (co_await CommandFailed(exit, log, where)) co_return Failed(i, exit, lost, where);
    co_return Status{};
  }

  std::string CurrentUser() const { return cur_user_.empty() ? "root" : cur_user_; }

  // The build sandbox's account files, read through the agent.
  asio::awaitable<Result<std::pair<uint32_t, uint32_t>>> OwnerIds(const std::string& owner) {
    auto passwd = co_await ReadWholeFile(sb_, "/etc/passwd", "root", kAccountFileMax);
    if (!passwd.ok()) co_return passwd.error().Context("read /etc/passwd");
    auto group = co_await ReadWholeFile(sb_, "/etc/group", "root", kAccountFileMax);
    const std::string groups = group.ok() ? *group : std::string();
    co_return ResolveOwner(owner, *passwd, groups);
  }

  // The directory later steps run in: cur_cwd_, or the current user's home.
  asio::awaitable<Result<std::string>> CurrentDir() {
    if (!cur_cwd_.empty()) co_return cur_cwd_;
    auto passwd = co_await ReadWholeFile(sb_, "/etc/passwd", "root", kAccountFileMax);
    if (!passwd.ok()) co_return passwd.error().Context("read /etc/passwd");
    std::stringstream ss(*passwd);
    std::string line;
    const std::string user = CurrentUser();
    while (std::getline(ss, line)) {
      std::vector<std::string> f;
      std::stringstream ls(line);
      std::string part;
      while (std::getline(ls, part, ':')) f.push_back(part);
      if (f.size() >= 6 && (f[0] == user || f[2] == user)) co_return f[5].empty() ? "/" : f[5];
    }
    co_return std::string("/");
  }

  // A workdir step: the directory is made (as root, then given to the
  // current user when that is not root, so its later steps can write
  // there) and later steps run in it.
  asio::awaitable<Status> MakeWorkdir(const std::string& path, StepLog& log) {
    auto base = co_await CurrentDir();
    if (!base.ok()) co_return base.error();
    std::string dir = AbsoluteBuildPath(path, *base);
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    const json stat_req = {{"op", "stat"}, {"path", dir}, {"user", "root"}};
    const bool existed = (co_await FsCall(sb_, stat_req)).ok();
    const json mk = {{"op", "mkdir"}, {"path", dir}, {"user", "root"}};
    if (auto r = co_await FsCall(sb_, mk); !r.ok()) co_return r.error().Context("mkdir " + dir);
    if (!existed && CurrentUser() != "root") {
      auto ids = co_await OwnerIds(CurrentUser());
      if (!ids.ok()) co_return ids.error();
      const json ch = {{"op", "chmod"},
                       {"path", dir},
                       {"user", "root"},
                       {"uid", ids->first},
                       {"gid", ids->second}};
      if (auto r = co_await FsCall(sb_, ch); !r.ok()) co_return r.error().Context("chown " + dir);
    }
    cur_cwd_ = dir;
    moved_ = true;
    // The directory as made (a relative path resolved against the home it
    // was relative to), for the template's default.
    if (spec_.workdir.empty()) info_.workdir = dir;
    const std::string msg = "workdir " + dir + "\n";
    co_await log.Feed(msg, kOut);
    co_return Status{};
  }

  // A copy step: its archive's selected entries (or its one file) are
  // written by the agent as root, then given to the owner.
  asio::awaitable<Status> CopyInto(const TemplateStep& st, StepLog& log) {
    auto base = co_await CurrentDir();
    if (!base.ok()) co_return base.error();
    const std::string dest = AbsoluteBuildPath(st.path, *base);
    std::vector<ArchiveEntry> entries;
    std::string src = st.archive_path;
    if (st.archive) {
      auto read = ReadTarArchive(st.data, kCopyArchiveMax);
      if (!read.ok()) co_return read.error();
      entries = std::move(*read);
    } else {
      if (dest.back() == '/')
        co_return MakeError(Code::kInvalidRequest, "copy: 'dest' of 'content' must name a file");
      entries.push_back({"file", ArchiveEntry::Type::kFile, 0644, st.data, ""});
      src = "file";
    }
    auto plan = PlanCopy(entries, src, dest);
    if (!plan.ok()) co_return plan.error();
    std::optional<std::pair<uint32_t, uint32_t>> ids;
    if (!st.owner.empty()) {
      auto o = co_await OwnerIds(st.owner);
      if (!o.ok()) co_return o.error();
      ids = *o;
    }
    int files = 0;
    for (const auto& t : *plan) {
      const ArchiveEntry& e = *t.entry;
      if (e.type == ArchiveEntry::Type::kSymlink) {
        const std::string msg = "skipped symlink " + e.path + " -> " + e.link + "\n";
        co_await log.Feed(msg, kErr);
        continue;
      }
      const bool dir = e.type == ArchiveEntry::Type::kDir;
      const std::string mk_path = dir ? t.dest : t.dest.substr(0, t.dest.rfind('/'));
      if (!mk_path.empty()) {
        const json mk = {{"op", "mkdir"}, {"path", mk_path}, {"user", "root"}};
        if (auto r = co_await FsCall(sb_, mk); !r.ok())
          co_return r.error().Context("mkdir " + mk_path);
      }
      if (!dir) {
        const int mode = st.mode >= 0 ? st.mode : static_cast<int>(e.mode);
        auto w = co_await WriteWholeFile(sb_, t.dest, "root", mode, e.data);
        if (!w.ok()) co_return w.error().Context("write " + t.dest);
        ++files;
      }
      if (ids) {
        const json ch = {{"op", "chmod"},
                         {"path", t.dest},
                         {"user", "root"},
                         {"uid", ids->first},
                         {"gid", ids->second}};
        if (auto r = co_await FsCall(sb_, ch); !r.ok())
          co_return r.error().Context("chown " + t.dest);
      }
    }
    const std::string msg = "copied " + std::to_string(files) + " file(s) to " + dest + "\n";
    co_await log.Feed(msg, kOut);
    co_return Status{};
  }

  // How a command ended: its exit, or (none) why it was lost.
  struct CommandEnd {
    std::optional<ExitInfo> exit;
    Error lost;
  };

  // Who a command runs as, where, with what env (cwd empty: the user's home).
  struct RunAs {
    std::string user;
    std::string cwd;
    std::map<std::string, std::string> env;
  };

  // One command in the build sandbox, its output fed to the step's log.
  asio::awaitable<CommandEnd> ExecCommand(const std::string& script,
                                          std::optional<std::string> input, StepLog& log,
                                          const RunAs& as) {
    std::optional<ExitInfo> exit;
    Error lost;
    ExecRequest req;
    req.timeout_seconds = b_.o_.step_timeout_seconds;
    req.env = as.env;
    req.user = as.user;
    req.cwd = as.cwd;
    req.argv = {"/bin/sh", "-c", script};
    req.stdin_data = std::move(input);
    auto session = co_await ExecSession::Start(sb_, req);
    if (!session.ok()) {
      lost = session.error();
    } else {
      while (true) {
        auto ev = co_await (*session)->NextFor(std::chrono::seconds(10));
        if (!ev) {
          // Keeps the progress stream alive through quiet steps.
          const std::string kind = "ping";
          const json none = json::object();
          co_await sink_(kind, none);
          continue;
        }
        if (ev->kind == ExecEvent::kStdout || ev->kind == ExecEvent::kStderr) {
          const char* stream = ev->kind == ExecEvent::kStdout ? kOut : kErr;
          co_await log.Feed(ev->data, stream);
          (*session)->Consumed(ev->data.size());
          continue;
        }
        if (ev->kind == ExecEvent::kExit) exit = ev->exit;
        else lost = ev->error;
        break;
      }
    }
    co_await log.Flush(kOut);
    co_return CommandEnd{exit, lost};
  }

  TemplateBuilder& b_;
  const TemplateSpec& spec_;
  TemplateBuildSink& sink_;
  std::string parent_identity_, mirror_, bottom_rootfs_;
  std::vector<std::string> parent_layers_;
  TemplateInfo parent_;
  std::string hash_;
  TemplateInfo info_;
  std::vector<Step> plan_;
  // What ordered steps have set so far: the user and directory of the next
  // command (empty: root; the user's home) and its env.
  std::string cur_user_, cur_cwd_;
  std::map<std::string, std::string> cur_env_;
  bool moved_ = false;  // a workdir step has run
  std::string tmp_;
  std::optional<ScopedTree> tmp_guard_;
  // The build sandbox (once started) and its network slot.
  std::shared_ptr<Instance> inst_;
  int net_slot_ = -1;
  std::shared_ptr<Sandbox> sb_ = std::make_shared<Sandbox>();
};

// The build, top to bottom: find the bottom of the stack, take a cached
// build if there is one, else run the plan's steps in a build sandbox and
// publish the result.
asio::awaitable<Result<TemplateRecord>> TemplateBuilder::Run(const TemplateSpec& spec,
                                                             TemplateBuildSink& sink,
                                                             bool* cached) {
  const auto t0 = std::chrono::steady_clock::now();
  // An image parent is pulled (or found cached) first; the spec then names
  // its template, so the build hash covers the canonical reference.
  TemplateSpec from_image;
  if (IsImageTemplateName(spec.from)) {
    if (!images_)
      co_return MakeError(Code::kNotSupported,
                          "this server does not pull images ('from' " + spec.from + ")");
    auto img = co_await images_->Ensure(spec.from, sink);
    if (!img.ok()) co_return Fail(img.error(), TemplateBuildFailure{0, "pull", -1, ""});
    from_image = spec;
    from_image.from = img->name;
  }
  BuildRun run(*this, from_image.name.empty() ? spec : from_image, sink);
  if (auto st = run.ResolveBottom(); !st.ok()) co_return st.error();
  if (auto st = run.CheckPackagesHaveApt(); !st.ok()) co_return st.error();
  if (auto r = run.RegisterCachedBuild()) {
    *cached = true;
    co_return std::move(*r);
  }
  run.InheritDefaults();
  run.PlanSteps();
  if (auto st = run.MakeTempDir(); !st.ok()) co_return st.error();
  for (int i = 0; i < run.steps(); ++i) {
    if (auto st = co_await run.RunStep(i); !st.ok()) co_return st.error();
  }
  co_await run.Teardown();
  co_return run.Publish(t0);
}

}  // namespace hutch
