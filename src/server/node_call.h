// Calls from one cluster node to another (issue 27), at the other node's
// advertise URL (http://HOST:PORT): a connection for a streamed relay, or
// one whole request and its whole answer (creates, lists, template
// fetches: JSON of bounded size). The caller puts the client's own
// credentials on the request: a node holds none of its own for its peers.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <string>

#include "common/result.h"

namespace hutch::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// Marks a request one node sends another, so it is not relayed again.
inline constexpr const char* kRelayedHeader = "X-Hutch-Relayed";

// A connection to `node` (named in errors) at `advertise`.
asio::awaitable<Result<beast::tcp_stream>> DialNode(const std::string& node,
                                                    const std::string& advertise);

// One whole request to a node, its whole answer (at most 64 MiB).
asio::awaitable<Result<http::response<http::string_body>>> CallNode(
    const std::string& node, const std::string& advertise, http::request<http::string_body> req);

}  // namespace hutch::api
