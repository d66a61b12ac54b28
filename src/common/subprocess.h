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

// Runs argv[0] (an absolute path) with exactly `env`, stdin from
// /dev/null, and hands its stdout+stderr to `on_output` as they arrive
// (for tools whose progress someone watches: debootstrap). Returns the exit
// status (128+signal when killed); killed with SIGKILL after `timeout`
// (then the result is 128+9).
asio::awaitable<Result<int>> RunToolStreaming(
    const std::vector<std::string>& argv, const std::vector<std::string>& env,
    std::chrono::milliseconds timeout,
    std::function<asio::awaitable<void>(std::string_view)> on_output);

}  // namespace hutch
