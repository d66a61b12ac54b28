// Running a host tool (cp, mkfs.ext4) from a coroutine without blocking the
// I/O thread: the child is spawned with posix_spawn and awaited through its
// pidfd.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace asio = boost::asio;

namespace hutch {

// The absolute path of a host tool (ip, nft, nsenter) in the usual system
// directories, or "" when it is not installed.
std::string FindTool(const char* name);

// Waits until `fd` is readable or `timeout` passes (false then). Does not
// take the fd.
asio::awaitable<bool> WaitReadable(int fd, std::chrono::milliseconds timeout);

// Runs argv[0] (an absolute path) with a minimal environment, stdin from
// /dev/null and stdout/stderr captured (the last 2 KiB go into the error
// message). Fails unless it exits 0 within `timeout` (it is killed then).
asio::awaitable<Status> RunTool(const std::vector<std::string>& argv,
                                std::chrono::milliseconds timeout);
// The same with `*input` (if not null) as the tool's stdin (`nft -f -`,
// `ip -batch -`).
asio::awaitable<Status> RunToolWithInput(const std::vector<std::string>& argv,
                                         const std::string* input,
                                         std::chrono::milliseconds timeout);

// A tool that needs root for what it builds (chroot, chown to many ids,
// mounts inside its tree) but must not hold the host's root while running
// code from outside (debootstrap's maintainer scripts): it runs as root of
// a fresh user namespace whose ids 0..count-1 are host ids uid_base.. (a
// sandbox's range), so on the host it can write only what that range owns
// and what anyone may write. It gets a mount namespace of its own with a
// fresh tmpfs on /tmp and `workdir` bound at kToolWorkdir: the workdir may
// lie under directories only the host's root may enter (the state dir).
// It keeps the host's network (it downloads). The caller gives `workdir`
// to uid_base first.
//
// With `overlay_target` (a directory under `workdir`), an overlayfs with
// `overlay_options` (lowerdir=…,upperdir=…,workdir=…) is mounted there by
// the host's root before the namespace is entered, so the tool sees it
// under kToolWorkdir: it writes into the upper directory through the
// merged view (how an image layer is applied onto the layers below it as
// an overlay diff, whiteouts made by overlayfs itself). The mount lives
// and dies with the tool's mount namespace.
struct ToolUserNamespace {
  uint32_t uid_base = 0;
  uint32_t count = 65536;
  std::string workdir;
  std::string overlay_target;
  std::string overlay_options;
};
inline constexpr const char* kToolWorkdir = "/tmp/work";

// Runs argv[0] (an absolute path) with exactly `env`, stdin from
// /dev/null, and hands its stdout+stderr to `on_output` as they arrive
// (for tools whose progress someone watches: debootstrap). Returns the exit
// status (128+signal when killed); killed with SIGKILL after `timeout`
// (then the result is 128+9). With `userns`, as described there (a
// failure to set it up is exit status 125, the reason in the output).
asio::awaitable<Result<int>> RunToolStreaming(
    const std::vector<std::string>& argv, const std::vector<std::string>& env,
    std::chrono::milliseconds timeout,
    std::function<asio::awaitable<void>(std::string_view)> on_output,
    const ToolUserNamespace* userns = nullptr);

}  // namespace hutch
