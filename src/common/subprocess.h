// Running a host tool (cp, mkfs.ext4) from a coroutine without blocking the
// I/O thread: the child is spawned with posix_spawn and awaited through its
// pidfd.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"

namespace asio = boost::asio;

namespace hutch {

// Waits until `fd` is readable or `timeout` passes (false then). Does not
// take the fd.
asio::awaitable<bool> WaitReadable(int fd, std::chrono::milliseconds timeout);

// Runs argv[0] (an absolute path) with a minimal environment, stdin from
// /dev/null and stdout/stderr captured (the last 2 KiB go into the error
// message). Fails unless it exits 0 within `timeout` (it is killed then).
asio::awaitable<Status> RunTool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);
// The same with `*input` (if not null) as the tool's stdin (`nft -f -`,
// `ip -batch -`).
asio::awaitable<Status> RunToolWithInput(const std::vector<std::string>& argv, const std::string* input,
                                         std::chrono::milliseconds timeout);

}  // namespace hutch
