// Building a template from its spec (core/template_spec.h).
//
// The steps: (1) the bottom: the parent template's overlay stack, or a
// fresh debootstrap root for `from = "debian:<suite>"`, or an OCI image's
// root for `from = "image:<ref>"` (pulled first if not cached, its
// progress reported as the build's first steps: core/image_puller.h); (2) a build
// sandbox on that stack — the jail driver, as for any sandbox, with its
// own network slot in mode `all` (the internet through NAT; the host,
// link-local and other sandboxes stay unreachable, as for API sandboxes)
// — in which `packages` are installed with apt-get,
// `files` written and `run` commands executed, each as its own step; (3)
// the sandbox's writable layer is captured (Instance::CaptureLayer, as for
// snapshots) as the template's own read-only layer.
//
// Cache: the build hash covers the normalized spec, the file contents, the
// parent's identity (its build hash, or base's build record) and the uid
// base; an existing build of that hash is registered at once (no sandbox
// is started). A build is written to <builds>/.tmp-<random> and renamed
// to <builds>/<hash> only when complete, then its name's row is stored:
// a failed or crashed build leaves nothing registered, and the next start
// removes its temp dir (TemplateRegistry::Load) and its build sandbox
// (the driver's reconcile).
//
// One build per template name at a time. I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/image_puller.h"
#include "core/template_spec.h"
#include "core/templates.h"
#include "core/tenant_quotas.h"
#include "driver/driver.h"
#include "net/network_manager.h"

namespace hutch {

struct TemplateBuildOptions {
  // The build sandbox: its writable layer is a tmpfs, so everything the
  // steps install must fit in disk_mb (and memory_mb, which it is charged to).
  int64_t memory_mb = 8192;
  int64_t disk_mb = 8192;
  double cpus = 2;
  int64_t pids_max = 4096;
  int64_t step_timeout_seconds = 3600;
  // Where the host's apt sources are (debian:<suite> takes its mirror there).
  std::string apt_dir = "/etc/apt";
};

// Progress, in the order it happens: "step" {index, of, name, detail,
// percent}, "log" {step, stream, text} (one line each), "ping" {} during
// quiet stretches, then "done" {template, cached, duration_ms} or "error"
// {code, message, step, name, exit_code, log_tail}.
using TemplateBuildSink =
    std::function<asio::awaitable<void>(const std::string& event, const nlohmann::json& data)>;

// What a build failure says (besides the Error it returns).
struct TemplateBuildFailure {
  int step = 0;          // 1-based; 0: before any step
  std::string name;      // "packages", "run 2", ...
  int exit_code = -1;    // -1: not a command's exit
  std::string log_tail;  // the last lines of its output
};

class TemplateBuilder {
 public:
  TemplateBuilder(TemplateBuildOptions o, Driver* driver, TemplateRegistry* reg)
      : o_(o), driver_(driver), reg_(reg) {}

  // Builds (or finds in the cache) and registers the template. The sink
  // receives progress, ending with "done" or "error".
  // `quota`: a tenant key's limits on spec.owner's templates (null: an
  // admin key, exempt), checked again here as the build is registered.
  asio::awaitable<Result<TemplateRecord>> Build(TemplateSpec spec, TemplateBuildSink sink,
                                                const TenantQuotas* quota = nullptr);
  // Whether spec.owner may build one more template: its templates and
  // builds under way, other than one of spec.name (a rebuild replaces it).
  // Sizes are known once built, so a build is refused at or over the bytes.
  Status CheckQuota(const TemplateSpec& spec, const TenantQuotas& quota) const;
  // Build sandboxes get a network slot from `n` (mode `all`); without one
  // (`why` says why), steps that need the network fail with that reason.
  void SetNetwork(net::NetworkManager* n, std::string why) {
    net_ = n;
    net_unavailable_ = std::move(why);
  }
  // `from = "image:..."` pulls through `p` (null: refused).
  void SetImagePuller(ImagePuller* p) { images_ = p; }
  bool building(const std::string& name) const { return active_.count(name) > 0; }
  // Where the last failed build stopped.
  const TemplateBuildFailure& last_failure() const { return failure_; }

 private:
  // One build's state and steps (template_builder.cc).
  class BuildRun;
  asio::awaitable<Result<TemplateRecord>> Run(const TemplateSpec& spec, TemplateBuildSink& sink,
                                              bool* cached);
  // Destroys the build sandbox (if any), then frees its network slot.
  asio::awaitable<void> Teardown(std::shared_ptr<Instance>& inst, int& net_slot);
  // Notes where the build stopped; returns `e`.
  Error Fail(Error e, TemplateBuildFailure f);

  TemplateBuildOptions o_;
  Driver* driver_;
  TemplateRegistry* reg_;
  net::NetworkManager* net_ = nullptr;
  ImagePuller* images_ = nullptr;
  std::string net_unavailable_ = "networking is not configured";
  std::map<std::string, std::string> active_;  // name -> owner id of builds under way
  TemplateBuildFailure failure_;
};

}  // namespace hutch
