// A template spec: what a template is built from and what a sandbox made
// from it starts with. Written as TOML (templates/*.toml, docs/templates.md)
// or as the same keys in JSON (the API accepts both); parsed into one
// struct, normalized, and hashed for the build cache.
//
// Input files travel inside the spec (`content` or `content_b64`): the
// server never reads a path a client names. `hutch template build` turns a
// `src` relative to the spec file into inline content before sending it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hutch {

struct TemplateFile {
  std::string dest;     // absolute path inside the template
  std::string content;  // bytes (decoded from content_b64 if given so)
  uint32_t mode = 0644;
  std::string owner;  // "user", "1000" or "1000:1000"; empty: root
};

// One entry of a spec's ordered `steps` (docs/templates.md "Ordered
// steps"): each runs after the one before it and sees what earlier `env`,
// `workdir` and `user` steps set, as a Dockerfile's lines or E2B's
// builder calls do. The older keys (packages, files, run) keep their fixed
// order and run before the first step.
struct TemplateStep {
  enum class Kind { kRun, kCopy, kEnv, kWorkdir, kUser };
  Kind kind = Kind::kRun;
  // run: the shell command; user: the user later steps (and the template)
  // run as; workdir: the directory (relative: to the current one).
  std::string command;
  std::string user;  // run: this step only (empty: the current user); user: the new one
  std::string path;  // workdir: the directory; copy: the destination
  std::map<std::string, std::string> env;  // env
  // copy: one file's bytes (`content`), or a tar archive (gzip or not)
  // whose entries under `archive_path` are copied to `path` as Docker's
  // COPY copies a build context's.
  std::string data;
  bool archive = false;
  std::string archive_path = ".";
  int32_t mode = -1;  // copy: -1 keeps the archive's modes (0644 for `content`)
  std::string owner;  // copy: user[:group] (empty: root)

  static const char* KindName(Kind k);
  nlohmann::json Normalized() const;
};

struct TemplateSpec {
  std::string name;
  // "debian:<suite>" (debootstrap from the host's configured Debian
  // mirror), "image:<reference>" (an OCI image, pulled if not cached:
  // core/image_puller.h) or the name of another template ("base", ...).
  std::string from = "base";
  std::vector<std::string> packages;  // Debian packages (apt-get install)
  std::vector<TemplateFile> files;    // copied in after the packages
  std::vector<std::string> run;       // shell commands, in order, as root
  std::map<std::string, std::string> env;
  std::string user;                 // default user of commands (empty: root)
  std::string workdir;              // default working directory (empty: the user's home)
  std::vector<TemplateStep> steps;  // in order, after packages, files and run
  std::string start;                // started in the background in every new sandbox
  std::string ready;                // command that exits 0 once the sandbox is ready
  int64_t ready_timeout_seconds = 30;
  std::string description;
  // Not part of the spec (never parsed, never hashed): the owner id of the
  // tenant key asking for the build, "" for an admin key (TemplateRecord::owner).
  std::string owner;

  // Whether `from` names a debootstrap root rather than a template.
  bool FromDebian() const { return from.rfind("debian:", 0) == 0; }
  std::string DebianSuite() const { return FromDebian() ? from.substr(7) : ""; }
  // Canonical JSON of everything that shapes the build and the sandbox
  // defaults (file contents included as hashes), for the cache key.
  nlohmann::json Normalized() const;
  // The API's view (file contents left out, their sizes and hashes kept).
  nlohmann::json ToJson() const;
};

// Parses a spec given as TOML text.
Result<TemplateSpec> ParseTemplateToml(const std::string& text);
// Parses a spec given as a JSON object (the same keys).
Result<TemplateSpec> ParseTemplateJson(const nlohmann::json& j);
// TOML or JSON, whichever the text is (a JSON object starts with '{').
Result<TemplateSpec> ParseTemplateText(const std::string& text);
// The build cache key: SHA-256 (hex) over the normalized spec, the
// identity of what it is built on (a parent's build hash, base's record,
// or debootstrap's suite and mirror), the uid base and the build layout.
std::string TemplateBuildHash(const TemplateSpec& spec, const std::string& parent_identity,
                              uint32_t uid_base);
// A template name: [a-z0-9][a-z0-9._:-]{0,62}, not "." or "..".
bool ValidTemplateName(const std::string& name);
// A Debian suite as debootstrap's command line may take it (run as the
// host's root, and debootstrap reads no `--`): [a-z][a-z0-9-]{0,39}, so
// never an option (issue 32).
bool ValidDebianSuite(const std::string& suite);

}  // namespace hutch
