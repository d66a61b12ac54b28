// GET /v1/sandboxes?watch=true: the sandbox list as a stream of changes
// (SSE), for clients that show a live list (the web console). The first
// event is the whole list (`list`), then `upsert` for a sandbox that
// appeared or changed (status, expiry, metadata, ...) and `remove` for one
// that left the list (its stopped record forgotten, or no longer matching
// the filter); `: ping` while nothing changes.
//
// Changes are found by comparing the manager's list with the last one
// sent, twice a second, inside hutchd: a client learns of a change within
// half a second without asking, and one watcher costs one in-memory list
// walk per tick, not an HTTP request.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>

#include "core/sandbox_manager.h"
#include "http/http_context.h"
#include "http/metrics.h"

namespace hutch::api {

// Streams the changes of the sandboxes `filter` selects (its limit and
// cursor are ignored: every page is watched) until the client leaves.
asio::awaitable<void> WatchSandboxes(HttpContext& ctx, SandboxManager& mgr, ListFilter filter,
                                     std::chrono::seconds ping_interval, Gauge& open_streams);

}  // namespace hutch::api
