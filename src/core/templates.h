// Templates: a name (or alias) resolved to a read-only root filesystem plus
// the defaults a sandbox made from it starts with.
//
// `base` is assembled from the host's own packages by
// scripts/build-base-template (no download) into <templates-dir>/base.
// Built templates (core/template_builder.h) are content-addressed: the
// build of a spec whose hash is H lives in <builds-dir>/H/ (`rootfs/` for a
// debootstrap root, `layer/` for what its steps changed, `template.json`),
// and a name is a row in the state store pointing at one build. A template
// runs as an overlay of [its layer, its parents' layers..., the bottom
// rootfs], so a template built on another shares its files.
//
// Aliases (`python`, `python:3.12`, `code-interpreter`, ...) map other names
// to templates; they live in an aliases file (TOML, `name = "target"`).
// Until a shipped template is built, `python` and `code-interpreter` fall
// back to `base`, which carries the host's python3.
//
// Used from the I/O thread only.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "store/state_store.h"

namespace hutch {

// What a create needs from a template.
struct TemplateInfo {
  std::string name;                 // the template's own name (aliases resolved)
  std::string hash;                 // build hash; "base" for the host-assembled base
  std::string rootfs;               // bottom of the overlay
  std::vector<std::string> layers;  // read-only layers above rootfs, topmost first
  std::map<std::string, std::string> env;
  std::string user;
  std::string workdir;
  std::string start;
  std::string ready;
  int64_t ready_timeout_seconds = 30;
  std::string owner;  // TemplateRecord::owner
};

// A built template: its build record (template.json) under a name.
struct TemplateRecord {
  std::string name;
  std::string hash;
  std::string from;
  nlohmann::json spec;  // TemplateSpec::ToJson()
  TemplateInfo info;
  SysTime built_at;
  int64_t build_ms = 0;
  uint64_t size_bytes = 0;  // of its own rootfs/layer
  // The owner id of the tenant key that built it; "" for a template every
  // key may use (base, shipped ones, anything an admin key built).
  std::string owner;

  nlohmann::json ToJson() const;  // the API's view
  std::string ToStoreJson() const;
  static bool FromStoreJson(const std::string& text, TemplateRecord* out);
};

struct TemplateRegistryOptions {
  std::string dir;             // <dir>/base holds the base template
  std::string builds_dir;      // content-addressed builds (per state dir)
  std::string builder_script;  // scripts/build-base-template
  std::string aliases_file;    // TOML; created with the default aliases if missing
  uint32_t uid_base = 1000000;
};

class TemplateRegistry {
 public:
  TemplateRegistry(TemplateRegistryOptions o, store::StateStore* store)
      : o_(std::move(o)), store_(store) {}
  // Builds `base` if it is missing (first start on a machine: seconds).
  Status EnsureBase();
  // At start: loads the rows and the aliases, removes what crashed builds
  // left (<builds>/.tmp-*).
  Status Load();

  Result<TemplateInfo> Resolve(const std::string& name) const;
  // A template by its own name (not an alias); base included.
  Result<TemplateRecord> Get(const std::string& name) const;
  std::vector<TemplateRecord> List() const;
  bool Exists(const std::string& name) const { return name == "base" || records_.count(name); }

  // Records a finished build under its name (replacing an earlier build of
  // that name). The build dir must already be in place.
  Status Register(const TemplateRecord& r);
  Status Remove(const std::string& name);
  // Build dirs (with their files) that no template row and no entry of
  // `used` (overlay dirs sandboxes and snapshots stand on) refers to are
  // removed. Returns how many. A registered template's own build dir
  // (its hash) stays too, and so do held ones.
  int Collect(const std::set<std::string>& used);
  // A build dir being assembled across awaits (an image's layers, renamed
  // into place one by one before the template naming them is registered):
  // Collect leaves it alone while held. Counted: two pulls may share one.
  void Hold(const std::string& hash) { ++held_[hash]; }
  void Release(const std::string& hash) {
    if (auto it = held_.find(hash); it != held_.end() && --it->second == 0) held_.erase(it);
  }

  // The cache identity of a parent template (for a child's build hash).
  Result<std::string> Identity(const std::string& name) const;
  // A finished build of this hash, if one is on disk.
  Result<TemplateRecord> FindBuild(const std::string& hash) const;
  std::string BuildDir(const std::string& hash) const { return o_.builds_dir + "/" + hash; }
  const std::string& builds_dir() const { return o_.builds_dir; }
  uint32_t uid_base() const { return o_.uid_base; }

  // Aliases: name -> target template.
  std::map<std::string, std::string> Aliases() const { return aliases_; }
  Status SetAlias(const std::string& name, const std::string& target);
  Status RemoveAlias(const std::string& name);

 private:
  Status SaveAliases() const;
  TemplateInfo BaseInfo() const;

  TemplateRegistryOptions o_;
  store::StateStore* store_;
  std::map<std::string, TemplateRecord> records_;
  std::map<std::string, std::string> aliases_;
  std::map<std::string, int> held_;
};

// The aliases a new aliases file starts with.
std::map<std::string, std::string> DefaultTemplateAliases();

}  // namespace hutch
