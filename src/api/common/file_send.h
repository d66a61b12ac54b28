// Sends a sandbox file as an HTTP response body, honouring a `Range`
// header (206 + Content-Range, 416 when it does not fit): the download half
// of every dialect's file API (/v1 fs, OpenSandbox's files/download). The
// bytes stream from the agent with flow control; nothing is held whole.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>

#include "core/sandbox.h"
#include "http/http_context.h"

namespace hutch::api {

// An error is returned only while nothing was sent yet, so the caller can
// answer it in its dialect's error shape (a 416 error leaves the
// `Content-Range: bytes */size` header queued for that answer). Once the
// body started, a failure cuts the connection (the Content-Length promise is
// broken) and the result is ok.
asio::awaitable<Status> SendSandboxFile(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                        const std::string& path, const std::string& user);

}  // namespace hutch::api
