// The guard of the dialects keyed by `Authorization: Bearer <key>` (/v1,
// /mcp): the key, then its rate limit, then the principal on the request.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "auth/credentials.h"
#include "http/http_context.h"

namespace hutch::api {

// Answers 401 (without a valid key) or 429 (over its rate limit, with
// Retry-After) and returns false; else marks the connection authenticated,
// sets the request's principal and returns true. With `challenge`, the
// 401 carries `WWW-Authenticate: Bearer` (clients that look for it: MCP).
asio::awaitable<bool> AdmitBearer(HttpContext& ctx, auth::Credentials& creds,
                                  bool challenge = false);

}  // namespace hutch::api
