// A Debian root filesystem made by debootstrap, for templates whose spec
// says `from = "debian:<suite>"`.
//
// The mirror is the one this machine's apt already uses (read from
// /etc/apt/sources.list and /etc/apt/sources.list.d at build time), so
// hutch names no package host of its own. debootstrap needs root for what
// it builds (chroot, files of many owners, mounts in the target) but not
// the host's: it runs as root of a user namespace mapped onto the sandbox
// uid range (issue 32 #10), in private mount and pid namespaces, so the
// maintainer scripts it runs can write nothing of the host's, the mounts
// it makes vanish with it, and so does anything left running. Trust: the
// same as `apt-get install` on the host (signed packages from the
// configured mirror); see docs/security.md.
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

inline constexpr const char* kDebootstrapTool = "/usr/sbin/debootstrap";

// Runs debootstrap --variant=minbase SUITE TARGET MIRROR as root of a user
// namespace whose ids are host ids uid_base.. (TARGET is made and given to
// uid_base), streaming its output to `on_output`. Returns debootstrap's
// exit status (0 = done). `tool` is for tests (a script that reports what
// it may do in debootstrap's place).
asio::awaitable<Result<int>> RunDebootstrap(
    const std::string& suite, const std::string& target, const std::string& mirror,
    uint32_t uid_base, std::function<asio::awaitable<void>(std::string_view)> on_output,
    const std::string& tool = kDebootstrapTool);

// Makes a root tree usable as a sandbox's lower layer: owners already in
// the sandbox range (uid_base..uid_base+65535) stay, a host id N below
// 65536 becomes uid_base+N (sandbox uid N; overlayfs cannot copy up files
// of unmapped ids; hutchd's own additions are the host root's), any other
// becomes the sandbox's nobody; setuid and setgid bits go (no_new_privs
// ignores them anyway), and /dev is emptied (the sandbox gets its own).
Status ShiftRootOwners(const std::string& root, uint32_t uid_base);

}  // namespace hutch
