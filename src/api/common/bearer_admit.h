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
// The same for a principal found by other means (a terminal ticket's key):
// an empty `who` is answered 401 with `refused` as the message.
asio::awaitable<bool> AdmitPrincipal(HttpContext& ctx, auth::Credentials& creds,
                                     auth::Principal who, const std::string& refused,
                                     bool challenge = false);

}  // namespace hutch::api
