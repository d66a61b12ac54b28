#include "core/template_builder.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/this_coro.hpp>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/sha256.h"
#include "core/debootstrap.h"
#include "core/exec_session.h"
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

// A step of the build plan, in order.
struct Step {
  enum Kind { kDebootstrap, kPackages, kFiles, kRun, kCapture } kind;
  std::string name;    // "debootstrap", "packages", "files", "run 2", "capture"
  std::string detail;  // the command, the package list...
};

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

// A temp build dir, removed unless the build kept it (renamed it into place).
struct TmpDir {
  std::string dir;
  bool keep = false;
  ~TmpDir() {
    if (keep) return;
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

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

asio::awaitable<Result<TemplateRecord>> TemplateBuilder::Build(TemplateSpec spec, TemplateBuildSink sink) {
  const auto t0 = std::chrono::steady_clock::now();
  failure_ = TemplateBuildFailure{};
  Result<TemplateRecord> r = MakeError(Code::kInternal, "template build did not run");
  bool cached = false;
  if (spec.name == "base") {
    // hutchd assembles base from the host at its start (no download):
    // "building" base.toml reports that template.
    if (spec.from != "base" || !spec.packages.empty() || !spec.files.empty() || !spec.run.empty())
      r = MakeError(Code::kInvalidRequest, "'base' is assembled by hutchd from the host; give your template another name");
    else
      r = reg_->Get("base");
    cached = true;
  } else if (active_.count(spec.name)) {
    r = MakeError(Code::kConflict, "template '" + spec.name + "' is being built already");
  } else {
    active_.insert(spec.name);
    r = co_await Run(spec, sink, &cached);
    active_.erase(spec.name);
  }
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) {
    const Error& e = r.error();
    json ev = {{"code", CodeName(e.code)},   {"message", e.message},
               {"step", failure_.step},      {"name", failure_.name},
               {"exit_code", failure_.exit_code}, {"log_tail", failure_.log_tail}};
    const std::string kind = "error";
    co_await sink(kind, ev);
    spdlog::warn("template={} build_failed step=\"{}\" exit_code={} err=\"{}\"", spec.name, failure_.name,
                 failure_.exit_code, e.message);
    co_return r;
  }
  json ev = {{"template", r->ToJson()}, {"cached", cached}, {"duration_ms", ms}};
  const std::string kind = "done";
  co_await sink(kind, ev);
  spdlog::info("template={} built hash={} cached={} duration_ms={}", spec.name, r->hash.substr(0, 12), cached, ms);
  co_return r;
}

asio::awaitable<Result<TemplateRecord>> TemplateBuilder::Run(const TemplateSpec& spec, TemplateBuildSink& sink,
                                                             bool* cached) {
  const auto t0 = std::chrono::steady_clock::now();
  static const char* const kOut = "stdout";
  static const char* const kErr = "stderr";

  // The bottom of the stack and its identity (for the cache key).
  std::string parent_identity, mirror, bottom_rootfs;
  std::vector<std::string> parent_layers;
  TemplateInfo parent;
  if (spec.FromDebian()) {
    auto m = FindDebianMirror(spec.DebianSuite(), o_.apt_dir);
    if (!m.ok()) co_return m.error();
    mirror = *m;
    parent_identity = "debootstrap:" + spec.DebianSuite() + ":" + mirror;
  } else {
    std::string pname = spec.from;
    auto aliases = reg_->Aliases();
    if (!reg_->Exists(pname))
      if (auto a = aliases.find(pname); a != aliases.end()) pname = a->second;
    auto rec = reg_->Get(pname);
    if (!rec.ok()) co_return rec.error().Context("'from' must name a built template or debian:<suite>");
    parent = rec->info;
    auto id = reg_->Identity(pname);
    if (!id.ok()) co_return id.error();
    parent_identity = *id;
    bottom_rootfs = parent.rootfs;
    parent_layers = parent.layers;
  }
  // apt-get needs a Debian root at the bottom (base is assembled from the
  // host's files and has no package manager).
  if (!spec.packages.empty() && !spec.FromDebian() && access((bottom_rootfs + "/usr/bin/apt-get").c_str(), F_OK) != 0)
    co_return MakeError(Code::kInvalidRequest, "'packages' need a Debian root: template '" + spec.from +
                                                   "' has no apt-get (use from = \"debian:bookworm\" or a "
                                                   "template built from it)");

  const std::string hash = TemplateBuildHash(spec, parent_identity, reg_->uid_base());

  // Cache: this exact build is on disk already.
  if (auto found = reg_->FindBuild(hash); found.ok()) {
    *cached = true;
    TemplateRecord r = *found;
    r.name = spec.name;
    r.info.name = spec.name;
    r.spec = spec.ToJson();
    if (auto st = reg_->Register(r); !st.ok()) co_return st.error();
    co_return r;
  }

  // What a sandbox made from it starts with: the parent's defaults, then
  // the spec's own.
  TemplateInfo info;
  info.name = spec.name;
  info.hash = hash;
  info.env = parent.env;
  for (const auto& [k, v] : spec.env) info.env[k] = v;
  info.user = spec.user.empty() ? parent.user : spec.user;
  info.workdir = spec.workdir.empty() ? parent.workdir : spec.workdir;
  info.start = spec.start.empty() ? parent.start : spec.start;
  info.ready = spec.ready.empty() ? parent.ready : spec.ready;
  info.ready_timeout_seconds = spec.ready.empty() ? parent.ready_timeout_seconds : spec.ready_timeout_seconds;

  std::vector<Step> plan;
  if (spec.FromDebian()) plan.push_back({Step::kDebootstrap, "debootstrap", spec.from + " from " + mirror});
  if (!spec.packages.empty()) {
    std::string list;
    for (const auto& p : spec.packages) list += (list.empty() ? "" : " ") + p;
    plan.push_back({Step::kPackages, "packages", list});
  }
  if (!spec.files.empty()) plan.push_back({Step::kFiles, "files", std::to_string(spec.files.size()) + " file(s)"});
  for (size_t i = 0; i < spec.run.size(); ++i)
    plan.push_back({Step::kRun, "run " + std::to_string(i + 1), spec.run[i]});
  plan.push_back({Step::kCapture, "capture", "the template's layer"});

  const std::string tmp = reg_->builds_dir() + "/.tmp-" + RandomHex(8);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) co_return MakeError(Code::kInternal, "create " + tmp + ": " + ec.message());
  TmpDir tmp_guard{tmp};

  // The build sandbox, started before the first step that needs it.
  std::shared_ptr<Instance> inst;
  int net_slot = -1;
  auto sb = std::make_shared<Sandbox>();

  const int total = static_cast<int>(plan.size());
  for (int i = 0; i < total; ++i) {
    const Step& step = plan[i];
    TemplateBuildFailure where{i + 1, step.name, -1, ""};
    {
      json ev = {{"index", i + 1},    {"of", total},
                 {"name", step.name}, {"detail", step.detail},
                 {"percent", i * 100 / total}};
      const std::string kind = "step";
      co_await sink(kind, ev);
    }
    StepLog log(&sink, step.name);

    if (step.kind == Step::kDebootstrap) {
      // The debootstrap root is a build dir of its own, keyed by suite,
      // mirror and uid base, so every template from debian:<suite> shares it.
      json rkey = {{"debootstrap", spec.DebianSuite()},
                   {"mirror", mirror},
                   {"uid_base", reg_->uid_base()},
                   {"layout", kBuildLayout}};
      const std::string rhash = Sha256Hex(rkey.dump());
      const std::string rdir = reg_->BuildDir(rhash);
      if (access((rdir + "/debootstrap.json").c_str(), F_OK) == 0) {
        const std::string msg = "using the cached root " + rhash.substr(0, 12) + "\n";
        co_await log.Feed(msg, kOut);
      } else {
        const std::string rtmp = reg_->builds_dir() + "/.tmp-" + RandomHex(8);
        TmpDir rguard{rtmp};
        fs::create_directories(rtmp, ec);
        std::function<asio::awaitable<void>(std::string_view)> on_out =
            [&log](std::string_view d) -> asio::awaitable<void> { co_await log.Feed(d, kOut); };
        const std::string target = rtmp + "/rootfs";
        auto rc = co_await RunDebootstrap(spec.DebianSuite(), target, mirror, on_out);
        co_await log.Flush(kOut);
        if (!rc.ok()) co_return Fail(rc.error(), where);
        if (*rc != 0) {
          where.exit_code = *rc;
          where.log_tail = log.Tail();
          co_return Fail(MakeError(Code::kBuildFailed, "step 1 (debootstrap) exited with " + std::to_string(*rc)),
                         where);
        }
        // apt in the build sandbox runs as the namespace's root; its
        // download sandbox user would need more than the jail allows.
        {
          std::ofstream a(target + "/etc/apt/apt.conf.d/99hutch-build");
          a << "APT::Sandbox::User \"root\";\nAcquire::Retries \"3\";\n";
        }
        if (auto st = ShiftRootOwners(target, reg_->uid_base()); !st.ok()) co_return Fail(st.error(), where);
        {
          std::ofstream m(rtmp + "/debootstrap.json");
          m << json{{"suite", spec.DebianSuite()}, {"mirror", mirror}, {"uid_base", reg_->uid_base()}}.dump()
            << "\n";
        }
        if (rename(rtmp.c_str(), rdir.c_str()) == 0) rguard.keep = true;
        else if (access((rdir + "/debootstrap.json").c_str(), F_OK) != 0)
          co_return Fail(ErrnoError("rename " + rtmp + " to " + rdir), where);
      }
      bottom_rootfs = rdir + "/rootfs";
      continue;
    }

    if (!inst) {
      // The build sandbox: the parent's stack, the host's network.
      InstanceSpec is;
      is.id = "tb_" + RandomHex(8);
      is.rootfs = bottom_rootfs;
      is.layers = parent_layers;
      is.cpus = o_.cpus;
      is.memory_mb = o_.memory_mb;
      is.disk_mb = o_.disk_mb;
      is.pids_max = o_.pids_max;
      if (!net_) {
        co_return Fail(MakeError(Code::kUnavailable,
                                 "template builds need sandbox networking (apt-get, run steps): " + net_unavailable_),
                       where);
      }
      net::NetworkPolicy all;
      all.mode = net::NetMode::kAll;
      auto lease = co_await net_->Acquire(all);
      if (!lease.ok()) co_return Fail(lease.error().Context("network of the build sandbox"), where);
      net_slot = lease->slot;
      is.netns_path = lease->netns_path;
      is.resolv_conf = lease->resolv_conf;
      is.gateway = lease->gateway;
      auto created = co_await driver_->Create(is);
      if (!created.ok()) {
        co_await Teardown(inst, net_slot);
        co_return Fail(created.error().Context("start the build sandbox"), where);
      }
      inst = *created;
      sb->rec.id = is.id;
      sb->rec.status = SandboxStatus::kRunning;
      sb->instance = inst;
    }

    if (step.kind == Step::kCapture) {
      const std::string layer = tmp + "/layer";
      auto st = co_await inst->CaptureLayer(layer);
      co_await Teardown(inst, net_slot);
      sb->instance.reset();
      if (!st.ok()) co_return Fail(st.error().Context("capture the template's layer"), where);
      continue;
    }

    // The step's commands, as root, with the template's env; a file's
    // bytes go in on stdin (the agent writes inside its own root: the host
    // never opens a path in the build sandbox).
    std::vector<std::pair<std::string, std::optional<std::string>>> cmds;
    if (step.kind == Step::kPackages) {
      cmds.push_back({"set -e; apt-get update; apt-get install -y --no-install-recommends " + step.detail +
                          "; apt-get clean; rm -rf /var/lib/apt/lists/*",
                      std::nullopt});
    } else if (step.kind == Step::kFiles) {
      for (const auto& tf : spec.files) {
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", tf.mode);
        const std::string q = ShellQuote(tf.dest);
        std::string c = "set -e; mkdir -p \"$(dirname " + q + ")\"; cat > " + q + "; chmod " + mode + " " + q;
        if (!tf.owner.empty()) c += "; chown " + ShellQuote(tf.owner) + " " + q;
        c += "; echo " + ShellQuote("wrote " + tf.dest);
        cmds.push_back({c, tf.content});
      }
    } else {
      cmds.push_back({step.detail, std::nullopt});
    }
    for (auto& [script, input] : cmds) {
      ExecRequest req;
      req.timeout_seconds = o_.step_timeout_seconds;
      req.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                 {"HOME", "/root"},
                 {"LC_ALL", "C.UTF-8"},
                 {"DEBIAN_FRONTEND", "noninteractive"}};
      for (const auto& [k, v] : info.env) req.env[k] = v;
      req.user = "root";
      req.cwd = "/";
      req.argv = {"/bin/sh", "-c", script};
      req.stdin_data = std::move(input);
      auto session = co_await ExecSession::Start(sb, req);
      std::optional<ExitInfo> exit;
      Error lost;
      if (!session.ok()) {
        lost = session.error();
      } else {
        while (true) {
          auto ev = co_await (*session)->NextFor(std::chrono::seconds(10));
          if (!ev) {
            // Keeps the progress stream alive through quiet steps.
            const std::string kind = "ping";
            const json none = json::object();
            co_await sink(kind, none);
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
      if (exit && exit->exit_code == 0 && !exit->timed_out) continue;
      where.log_tail = log.Tail();
      co_await Teardown(inst, net_slot);
      sb->instance.reset();
      if (!exit) co_return Fail(lost.Context("step " + std::to_string(i + 1) + " (" + step.name + ")"), where);
      where.exit_code = exit->exit_code;
      std::string why = exit->timed_out    ? "timed out"
                        : exit->oom_killed ? "was OOM-killed"
                        : exit->signal     ? "was killed by signal " + std::to_string(exit->signal)
                                           : "exited with " + std::to_string(exit->exit_code);
      co_return Fail(MakeError(Code::kBuildFailed,
                               "step " + std::to_string(i + 1) + " (" + step.name + ": " + step.detail + ") " + why),
                     where);
    }
  }
  co_await Teardown(inst, net_slot);

  // Complete: record it and move it into place under its hash.
  const std::string dest = reg_->BuildDir(hash);
  TemplateRecord r;
  r.name = spec.name;
  r.hash = hash;
  r.from = spec.from;
  r.spec = spec.ToJson();
  info.rootfs = bottom_rootfs;
  info.layers = {dest + "/layer"};
  for (const auto& l : parent_layers) info.layers.push_back(l);
  r.info = info;
  r.built_at = std::chrono::system_clock::now();
  r.build_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  r.size_bytes = TreeBytes(tmp + "/layer");
  {
    std::ofstream out(tmp + "/template.json");
    out << r.ToStoreJson() << "\n";
    out.flush();
    if (!out) co_return MakeError(Code::kStorageFull, "write " + tmp + "/template.json");
  }
  if (rename(tmp.c_str(), dest.c_str()) != 0) {
    // The same build finished meanwhile (under another name): use that one.
    auto found = reg_->FindBuild(hash);
    if (!found.ok()) co_return ErrnoError("rename " + tmp + " to " + dest);
    r = *found;
    r.name = spec.name;
    r.info.name = spec.name;
    r.spec = spec.ToJson();
  } else {
    tmp_guard.keep = true;
  }
  if (auto st = reg_->Register(r); !st.ok()) co_return st.error();
  co_return r;
}

}  // namespace hutch
