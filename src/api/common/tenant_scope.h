// What a tenant key may reach (issue 32 #13), decided in one place for
// every dialect: each dialect names the resource a request's path points
// at (its own path shapes), and this says whether the request's principal
// may touch it. Another tenant's sandbox, snapshot, volume or private
// template reads exactly like one that does not exist — the same 404 and
// code — so ids do not leak across tenants. Lists filter with
// Principal::Scope() instead.
#pragma once

#include <string>

#include "auth/principal.h"
#include "common/result.h"
#include "core/sandbox_manager.h"

namespace hutch::api {

enum class ScopedKind {
  kNone,           // nothing owned (lists, creates, probes)
  kSandbox,        // id = a sandbox id
  kSnapshot,       // id = a snapshot id
  kVolume,         // id = a volume name
  kTemplateRead,   // id = a template name or alias, read or used
  kTemplateWrite,  // id = a template name, removed
  kAdminOnly,      // server-wide settings (template aliases)
};

struct ScopedTarget {
  ScopedKind kind = ScopedKind::kNone;
  std::string id;
};

// Ok when `who` may reach `t`, else the error to answer: the resource's
// not-found for what belongs to someone else, `forbidden` for admin-only
// routes. A resource that does not exist passes (its handler answers).
Status CheckScope(SandboxManager& mgr, const auth::Principal& who, const ScopedTarget& t);

}  // namespace hutch::api
