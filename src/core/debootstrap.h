// A Debian root filesystem made by debootstrap, for templates whose spec
// says `from = "debian:<suite>"`.
//
// The mirror is the one this machine's apt already uses (read from
// /etc/apt/sources.list and /etc/apt/sources.list.d at build time), so
// hutch names no package host of its own. debootstrap runs as the host's
// root (it needs chroot and mknod) in a private mount and pid namespace, so
// the mounts it makes inside the target and anything its maintainer
// scripts leave running vanish with it. Trust: the same as `apt-get
// install` on the host (signed packages from the configured mirror); see
// docs/security.md.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace asio = boost::asio;

namespace hutch {

// A mirror as debootstrap's last argument may take it: an http(s) URL with
// a host and a path, of URL characters only (no space, no control byte, no
// userinfo, query or fragment), so never an option nor a second argument
// (issue 32).
bool ValidDebianMirror(const std::string& url);

// The Debian archive URI this host's apt sources name for `suite` (or for
// any Debian suite when none names it), from the apt source files under
// `apt_dir` (normally /etc/apt).
Result<std::string> FindDebianMirror(const std::string& suite,
                                     const std::string& apt_dir = "/etc/apt");

// The host names (no port) of every http(s) source in the apt source files
// under `apt_dir`, once each, in file order: where a build sandbox's apt
// goes (its sources came from the host's mirror).
std::vector<std::string> AptSourceHosts(const std::string& apt_dir = "/etc/apt");

// Runs debootstrap --variant=minbase SUITE TARGET MIRROR, streaming its
// output to `on_output`. Returns debootstrap's exit status (0 = done).
asio::awaitable<Result<int>> RunDebootstrap(
    const std::string& suite, const std::string& target, const std::string& mirror,
    std::function<asio::awaitable<void>(std::string_view)> on_output);

// Makes a root tree made by the host's root usable as a sandbox's lower
// layer: every owner id moves up by uid_base (sandbox uid N = host uid
// uid_base+N; overlayfs cannot copy up files of unmapped ids), setuid and
// setgid bits go (no_new_privs ignores them anyway), and /dev is emptied
// (the sandbox gets its own).
Status ShiftRootOwners(const std::string& root, uint32_t uid_base);

}  // namespace hutch
