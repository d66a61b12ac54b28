#include "api/common/tenant_scope.h"

namespace hutch::api {

Status CheckScope(SandboxManager& mgr, const auth::Principal& who, const ScopedTarget& t) {
  if (who.admin() || t.kind == ScopedKind::kNone) return Status{};
  switch (t.kind) {
    case ScopedKind::kSandbox: {
      auto rec = mgr.Get(t.id);
      if (rec.ok() && !who.Owns(rec->owner_key))
        return MakeError(Code::kSandboxNotFound, "sandbox " + t.id + " not found");
      return Status{};
    }
    case ScopedKind::kSnapshot: {
      auto snap = mgr.GetSnapshot(t.id);
      if (snap.ok() && !who.Owns(snap->owner))
        return MakeError(Code::kSnapshotNotFound, "snapshot " + t.id + " not found");
      return Status{};
    }
    case ScopedKind::kVolume: {
      if (mgr.volumes() == nullptr) return Status{};
      auto vol = mgr.volumes()->Get(t.id);
      if (vol.ok() && !who.Owns(vol->owner))
        return MakeError(Code::kVolumeNotFound, "volume " + t.id + " not found");
      return Status{};
    }
    case ScopedKind::kTemplateRead:
    case ScopedKind::kTemplateWrite: {
      if (mgr.templates() == nullptr) return Status{};
      auto info = mgr.templates()->Resolve(t.id);
      if (!info.ok()) return Status{};
      // Public templates (owner "") are everyone's to use, an admin's to remove.
      if (info->owner.empty() && t.kind == ScopedKind::kTemplateRead) return Status{};
      if (info->owner.empty())
        return MakeError(Code::kForbidden, "template '" + t.id +
                                               "' is shared by every key; only an admin key may "
                                               "remove it");
      if (!who.Owns(info->owner))
        return MakeError(Code::kTemplateNotFound, "template '" + t.id + "' not found");
      return Status{};
    }
    case ScopedKind::kAdminOnly:
      return MakeError(Code::kForbidden,
                       "this route needs an admin key (this key is tenant " + who.owner + "'s)");
    case ScopedKind::kNone:
      break;
  }
  return Status{};
}

}  // namespace hutch::api
