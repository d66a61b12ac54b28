// Named network namespaces, made the way ip-netns(8) makes them but from
// hutchd itself: an empty file `<dir>/<name>` with the namespace
// bind-mounted on it, so the namespace lives on without any process in it
// and anyone can join it by opening the path. Spawning `ip netns add`
// cost a process start per slot on the path that refills warm slots.
//
// `dir` is a mount point with shared propagation (PrepareNetnsDir), as
// ip-netns makes /run/netns: a namespace bound there, and its unmount,
// reach every copy of the mount tree (a mount namespace cloned while the
// namespace existed would otherwise keep it alive after its removal).
//
// Blocking; each call is a handful of syscalls. Any thread may call them.
#pragma once

#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch::net {

// Creates `dir` if missing and makes it a shared mount point (bound onto
// itself first when it is not a mount point yet). Idempotent.
Status PrepareNetnsDir(const std::string& dir);

// A new network namespace (only `lo`, down) bound at `<dir>/<name>`;
// returns an fd of it. Fails with EEXIST when the name is taken. On failure
// nothing is left behind.
Result<UniqueFd> CreateNamedNetns(const std::string& dir, const std::string& name);

// Unbinds and removes `<dir>/<name>`: the namespace goes once nothing else
// holds it (a process in it, an open fd). A missing one is not an error.
Status RemoveNamedNetns(const std::string& dir, const std::string& name);

}  // namespace hutch::net
