#include "core/templates.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>
#include <toml++/toml.h>

#include "common/sha256.h"
#include "core/template_spec.h"

namespace hutch {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Names that meant `base` before real templates existed (base carries the
// host's python3); they keep working until their template is built.
const std::map<std::string, std::string> kFallbacks = {{"python", "base"},
                                                       {"code-interpreter", "base"}};

json InfoJson(const TemplateInfo& i) {
  return json{{"rootfs", i.rootfs},   {"layers", i.layers},
              {"env", i.env},         {"user", i.user},
              {"workdir", i.workdir}, {"start", i.start},
              {"ready", i.ready},     {"ready_timeout_seconds", i.ready_timeout_seconds}};
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::map<std::string, std::string> DefaultTemplateAliases() {
  return {{"python", "python"},
          {"python:3", "python"},
          {"python:3.11", "python"},
          {"python:3.12", "python"},
          {"code-interpreter", "code-interpreter"},
          {"code-interpreter-v1", "code-interpreter"},
          {"node", "node"},
          {"node:18", "node"},
          {"node:20", "node"},
          {"debian", "debian"},
          {"debian:bookworm", "debian"},
          {"ubuntu", "debian"}};
}

json TemplateRecord::ToJson() const {
  json j = {{"name", name},
            {"hash", hash},
            {"from", from},
            {"status", "ready"},
            {"built_at", FormatRfc3339(built_at)},
            {"build_ms", build_ms},
            {"size_bytes", size_bytes},
            {"env", info.env},
            {"user", info.user},
            {"workdir", info.workdir},
            {"start", info.start},
            {"ready", info.ready},
            {"layers", info.layers.size() + 1}};
  if (!spec.is_null()) j["spec"] = spec;
  return j;
}

std::string TemplateRecord::ToStoreJson() const {
  json j = {{"name", name},           {"hash", hash},
            {"from", from},           {"spec", spec},
            {"info", InfoJson(info)}, {"built_at_ms", ToUnixMs(built_at)},
            {"build_ms", build_ms},   {"size_bytes", size_bytes},
            {"owner", owner}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool TemplateRecord::FromStoreJson(const std::string& text, TemplateRecord* out) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    TemplateRecord r;
    r.name = j.at("name").get<std::string>();
    r.hash = j.at("hash").get<std::string>();
    r.from = j.value("from", "");
    r.spec = j.value("spec", json());
    const json& i = j.at("info");
    r.info.name = r.name;
    r.info.hash = r.hash;
    r.info.rootfs = i.at("rootfs").get<std::string>();
    r.info.layers = i.value("layers", std::vector<std::string>{});
    r.info.env = i.value("env", std::map<std::string, std::string>{});
    r.info.user = i.value("user", "");
    r.info.workdir = i.value("workdir", "");
    r.info.start = i.value("start", "");
    r.info.ready = i.value("ready", "");
    r.info.ready_timeout_seconds = i.value("ready_timeout_seconds", int64_t{30});
    r.built_at = FromUnixMs(j.value("built_at_ms", int64_t{0}));
    r.build_ms = j.value("build_ms", int64_t{0});
    r.size_bytes = j.value("size_bytes", uint64_t{0});
    r.owner = j.value("owner", "");
    r.info.owner = r.owner;
    *out = std::move(r);
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

Status TemplateRegistry::EnsureBase() {
  std::string marker = o_.dir + "/base/template.json";
  struct stat st;
  if (stat(marker.c_str(), &st) == 0) return {};
  spdlog::info("template=base building dir={} (first start; takes a few seconds)", o_.dir);
  pid_t pid = fork();
  if (pid < 0) return ErrnoError("fork template builder");
  if (pid == 0) {
    std::string dest = o_.dir + "/base";
    std::string base = std::to_string(o_.uid_base);
    execl("/bin/bash", "bash", o_.builder_script.c_str(), dest.c_str(), base.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return MakeError(Code::kInternal, "template builder " + o_.builder_script + " failed (status " +
                                          std::to_string(status) + ")");
  if (stat(marker.c_str(), &st) != 0)
    return MakeError(Code::kInternal, "template builder left no " + marker);
  return {};
}

Status TemplateRegistry::Load() {
  std::error_code ec;
  fs::create_directories(o_.builds_dir, ec);
  if (ec) return MakeError(Code::kInternal, "create " + o_.builds_dir + ": " + ec.message());
  // A build that crashed left its temp dir: it was never registered.
  for (const auto& e : fs::directory_iterator(o_.builds_dir, ec)) {
    if (e.path().filename().string().rfind(".tmp-", 0) != 0) continue;
    std::error_code rec;
    fs::remove_all(e.path(), rec);
    spdlog::info("template_build_leftover_removed dir={}", e.path().string());
  }
  if (store_) {
    auto rows = store_->LoadTemplates();
    if (!rows.ok()) return rows.error().Context("load templates");
    for (const auto& [name, text] : *rows) {
      TemplateRecord r;
      if (!TemplateRecord::FromStoreJson(text, &r)) {
        spdlog::error("template={} unreadable_record", name);
        continue;
      }
      records_[name] = std::move(r);
    }
  }
  aliases_.clear();
  if (!fs::exists(o_.aliases_file)) {
    aliases_ = DefaultTemplateAliases();
    return SaveAliases();
  }
  try {
    toml::table t = toml::parse_file(o_.aliases_file);
    for (const auto& [k, v] : t) {
      auto target = v.value<std::string>();
      if (!target || !ValidTemplateName(std::string(k.str())) || !ValidTemplateName(*target)) {
        spdlog::warn("aliases_file={} ignored_entry={}", o_.aliases_file, std::string(k.str()));
        continue;
      }
      aliases_[std::string(k.str())] = *target;
    }
  } catch (const toml::parse_error& e) {
    return MakeError(Code::kInvalidRequest,
                     "aliases file " + o_.aliases_file + ": " + std::string(e.description()));
  }
  return Status{};
}

Status TemplateRegistry::SaveAliases() const {
  if (o_.aliases_file.empty()) return Status{};
  std::string tmp = o_.aliases_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "# Template aliases: name = \"template\" (hutch template alias NAME TARGET).\n";
    for (const auto& [k, v] : aliases_) out << '"' << k << "\" = \"" << v << "\"\n";
    out.flush();
    if (!out) return MakeError(Code::kInternal, "write " + tmp);
  }
  if (rename(tmp.c_str(), o_.aliases_file.c_str()) != 0) return ErrnoError("rename " + tmp);
  return Status{};
}

Status TemplateRegistry::SetAlias(const std::string& name, const std::string& target) {
  if (!ValidTemplateName(name) || !ValidTemplateName(target))
    return MakeError(Code::kInvalidRequest,
                     "alias and target must be template names ([a-z0-9][a-z0-9._:-]*)");
  if (name == "base") return MakeError(Code::kInvalidRequest, "'base' cannot be an alias");
  if (records_.count(name))
    return MakeError(Code::kConflict, "'" + name + "' is a template; an alias cannot hide it");
  aliases_[name] = target;
  return SaveAliases();
}

Status TemplateRegistry::RemoveAlias(const std::string& name) {
  if (!aliases_.erase(name))
    return MakeError(Code::kTemplateNotFound, "alias '" + name + "' not found");
  return SaveAliases();
}

TemplateInfo TemplateRegistry::BaseInfo() const {
  TemplateInfo i;
  i.name = "base";
  i.hash = "base";
  i.rootfs = o_.dir + "/base/rootfs";
  return i;
}

Result<TemplateInfo> TemplateRegistry::Resolve(const std::string& name) const {
  auto own = [&](const std::string& n) -> const TemplateInfo* {
    auto it = records_.find(n);
    return it == records_.end() ? nullptr : &it->second.info;
  };
  if (name == "base") {
    struct stat st;
    if (stat((o_.dir + "/base/template.json").c_str(), &st) != 0)
      return MakeError(Code::kTemplateNotFound, "template 'base' not found");
    return BaseInfo();
  }
  if (auto* i = own(name)) return *i;
  std::string target = name;
  if (auto a = aliases_.find(name); a != aliases_.end()) {
    target = a->second;
    if (target == "base") return Resolve("base");
    if (auto* i = own(target)) return *i;
  }
  // Not built yet: the names that always meant base still do.
  if (auto f = kFallbacks.find(target); f != kFallbacks.end()) return Resolve(f->second);
  if (auto f = kFallbacks.find(name); f != kFallbacks.end()) return Resolve(f->second);
  return MakeError(Code::kTemplateNotFound, "template '" + name + "' not found");
}

Result<TemplateRecord> TemplateRegistry::Get(const std::string& name) const {
  if (name == "base") {
    auto i = Resolve("base");
    if (!i.ok()) return i.error();
    TemplateRecord r;
    r.name = "base";
    r.hash = "base";
    r.from = "host";
    r.info = *i;
    struct stat st;
    if (stat((o_.dir + "/base/template.json").c_str(), &st) == 0)
      r.built_at = std::chrono::system_clock::from_time_t(st.st_mtime);
    return r;
  }
  auto it = records_.find(name);
  if (it == records_.end())
    return MakeError(Code::kTemplateNotFound, "template '" + name + "' not found");
  return it->second;
}

std::vector<TemplateRecord> TemplateRegistry::List() const {
  std::vector<TemplateRecord> out;
  if (auto b = Get("base"); b.ok()) out.push_back(*b);
  for (const auto& [n, r] : records_) out.push_back(r);
  return out;
}

Status TemplateRegistry::Register(const TemplateRecord& r) {
  if (store_) {
    if (auto st = store_->PutTemplate(r.name, r.ToStoreJson()); !st.ok())
      return st.error().Context("register template");
  }
  records_[r.name] = r;
  records_[r.name].info.owner = r.owner;
  return Status{};
}

Status TemplateRegistry::Remove(const std::string& name) {
  if (!records_.count(name))
    return MakeError(Code::kTemplateNotFound, "template '" + name + "' not found");
  if (store_) {
    if (auto st = store_->DeleteTemplate(name); !st.ok())
      return st.error().Context("delete template");
  }
  records_.erase(name);
  return Status{};
}

int TemplateRegistry::Collect(const std::set<std::string>& used) {
  std::set<std::string> keep;
  auto note = [&](const std::string& dir) {
    // <builds>/<hash>/{rootfs,layer}
    if (dir.rfind(o_.builds_dir + "/", 0) != 0) return;
    std::string rest = dir.substr(o_.builds_dir.size() + 1);
    keep.insert(rest.substr(0, rest.find('/')));
  };
  for (const auto& [h, n] : held_) keep.insert(h);
  for (const auto& [n, r] : records_) {
    if (!r.hash.empty()) keep.insert(r.hash);
    note(r.info.rootfs);
    for (const auto& l : r.info.layers) note(l);
  }
  for (const auto& d : used) note(d);
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o_.builds_dir, ec)) {
    std::string h = e.path().filename().string();
    if (h.rfind(".tmp-", 0) == 0 || keep.count(h)) continue;
    // A debootstrap root is the cache of every debian:<suite> build: kept.
    if (fs::exists(e.path() / "debootstrap.json", ec)) continue;
    std::error_code rec;
    fs::remove_all(e.path(), rec);
    ++removed;
    spdlog::info("template_build_removed hash={}", h);
  }
  return removed;
}

Result<std::string> TemplateRegistry::Identity(const std::string& name) const {
  if (name == "base") {
    // base is rebuilt in place when its layout changes: its build record
    // (layout, uid base, build time) says which base a child stands on.
    std::string t = ReadSmallFile(o_.dir + "/base/template.json");
    if (t.empty()) return MakeError(Code::kTemplateNotFound, "template 'base' not found");
    return "base:" + Sha256Hex(t);
  }
  auto it = records_.find(name);
  if (it == records_.end())
    return MakeError(Code::kTemplateNotFound, "template '" + name + "' not found");
  return it->second.hash;
}

Result<TemplateRecord> TemplateRegistry::FindBuild(const std::string& hash) const {
  std::string path = BuildDir(hash) + "/template.json";
  std::string text = ReadSmallFile(path);
  TemplateRecord r;
  if (text.empty() || !TemplateRecord::FromStoreJson(text, &r))
    return MakeError(Code::kTemplateNotFound, "no build " + hash);
  return r;
}

}  // namespace hutch
