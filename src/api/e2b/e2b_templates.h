// E2B's template build API (docs/compat-e2b.md "Template builds"), as the
// SDK's Template.build calls it: POST /v3/templates asks for a build of a
// name (its tags), GET /templates/{id}/files/{hash} answers whether a copy
// step's files are here and where to PUT them (a single-use URL on this
// server), POST /v2/templates/{id}/builds/{build} starts the build with
// the ordered steps, and GET .../status is polled for the build log (from
// `logsOffset` on). Steps become a hutch template spec with ordered steps
// (core/template_spec.h), built by the same TemplateBuilder /v1 uses.
// Tags are templates named `name:tag` on the same build; Template.exists
// asks GET /templates/aliases/{name}.
//
// What lives here (in memory; a restart forgets it, the templates stay):
// builds asked for and their logs, uploads by files hash (bounded), and
// upload tokens. I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "auth/principal.h"
#include "core/sandbox_manager.h"
#include "core/template_spec.h"
#include "http/router.h"

namespace hutch::api::e2b {

class E2bTemplates {
 public:
  E2bTemplates(SandboxManager* mgr, size_t json_limit) : mgr_(mgr), json_limit_(json_limit) {}
  // The routes, under the /e2b mount (the upload route is open: its
  // single-use token is its credential). Registered before E2bApi's
  // DELETE /e2b/templates/{id}, which comes here for templates.
  void Register(Router& r);
  // DELETE /templates/{id} of a template (and its tags): `id` names no snapshot.
  asio::awaitable<void> DeleteTemplate(HttpContext& ctx, const std::string& id);

  // One build asked for with POST /v3/templates.
  struct Build {
    std::string id;           // a UUID, as E2B's
    std::string template_id;  // the template's name
    std::vector<std::string> tags;
    std::string owner;  // the key's owner id ("" for an admin key)
    bool admin = false;
    std::string status = "waiting";                    // waiting, building, ready, error
    nlohmann::json entries = nlohmann::json::array();  // BuildLogEntry, in order
    nlohmann::json reason;                             // BuildStatusReason once failed
    SysTime created;
  };

 private:
  asio::awaitable<void> RequestBuild(HttpContext& ctx);
  asio::awaitable<void> FileUploadLink(HttpContext& ctx, const std::string& tid,
                                       const std::string& hash);
  asio::awaitable<void> Upload(HttpContext& ctx, const std::string& token);
  asio::awaitable<void> StartBuild(HttpContext& ctx, const std::string& tid,
                                   const std::string& bid);
  asio::awaitable<void> BuildStatus(HttpContext& ctx, const std::string& tid,
                                    const std::string& bid);
  asio::awaitable<void> AliasExists(HttpContext& ctx, const std::string& alias);
  asio::awaitable<void> AssignTags(HttpContext& ctx);
  asio::awaitable<void> RemoveTags(HttpContext& ctx);
  asio::awaitable<void> ListTags(HttpContext& ctx, const std::string& tid);
  // The body of the tag routes: `key` (a name) and a non-empty `tags`.
  asio::awaitable<Result<std::pair<std::string, nlohmann::json>>> TagsBody(HttpContext& ctx,
                                                                           const char* key) const;

  // The E2B build body (TemplateBuildStartV2) as a spec named `tid` for
  // `who` (its COPY steps take the files `who` uploaded).
  Result<TemplateSpec> SpecOf(const nlohmann::json& body, const std::string& tid,
                              const auth::Principal& who) const;
  // Runs the build; its progress becomes the build's log entries.
  asio::awaitable<void> RunBuild(std::shared_ptr<Build> b, TemplateSpec spec);
  // Whether `who` may build or tag the name `name` (free, or its own).
  Status MayWrite(const auth::Principal& who, const std::string& name) const;
  // A template `who` may see, by name or alias.
  Result<TemplateRecord> Visible(const auth::Principal& who, const std::string& name) const;
  // The build id E2B shows for a build hash: the id of the build that made
  // it here, else one derived from the hash.
  std::string BuildIdOf(const std::string& hash) const;
  // Registers build `rec` under `name` too (a tag).
  Status Tag(const TemplateRecord& rec, const std::string& name);
  // Build `bid` of template `tid`, when `who` asked for it (else 404).
  Result<std::shared_ptr<Build>> FindBuild(const auth::Principal& who, const std::string& tid,
                                           const std::string& bid) const;
  void Prune();

  SandboxManager* mgr_;
  size_t json_limit_;
  std::map<std::string, std::shared_ptr<Build>> builds_;  // by build id
  std::map<std::string, std::string> build_of_hash_;      // build hash -> build id
  struct Uploaded {
    std::string owner;
    std::string bytes;
  };
  std::map<std::string, Uploaded> uploads_;  // by "<owner>/<files hash>"
  std::deque<std::string> upload_order_;     // oldest first, for the bound
  size_t upload_bytes_ = 0;
  struct Token {
    std::string key;  // "<owner>/<files hash>"
    SysTime expires;
  };
  std::map<std::string, Token> tokens_;
};

}  // namespace hutch::api::e2b
