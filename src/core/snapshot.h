// A snapshot: a sandbox's filesystem state, kept as a read-only overlay
// layer on the host, from which new sandboxes start. The jail driver has no
// process checkpointing (CRIU fails on these kernels), so a snapshot holds
// files only (`memory: false`) and its children start fresh processes.
//
// Layers stack: a sandbox made from a snapshot runs on [its layers...,
// template]; a snapshot of that sandbox adds one more layer on top. A fork
// is an internal snapshot (not listed) whose children are the fork's
// sandboxes. A deleted snapshot's files stay until no sandbox and no other
// snapshot stands on them (SandboxManager collects them).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"

namespace hutch {

struct SnapshotRecord {
  std::string id;                   // snap_...
  std::string sandbox_id;           // the sandbox it was taken of
  std::string owner;                // its sandbox's owner id (auth/principal.h)
  std::string template_name;        // the template under every layer
  std::vector<std::string> layers;  // host dirs, topmost first; layers[0] is its own
  std::string rootfs;               // the template's bottom under them ("" in old records)
  SysTime created_at;
  uint64_t size_bytes = 0;  // of its own layer
  bool internal = false;    // made by a fork: never listed
  bool deleted = false;     // deleted by the API, files kept while in use
  // A name its owner gave it (E2B's snapshot names), unique among the
  // owner's snapshots: naming another moves the name there. "" none.
  std::string name;

  nlohmann::json ToJson() const;  // the API's view
  std::string ToStoreJson() const;
  static bool FromStoreJson(const std::string& text, SnapshotRecord* out);
};

}  // namespace hutch
