// The request target of an HTTP request (RFC 9112 origin-form): its
// percent-decoded path, its path segments and its query parameters. Pure
// functions, no I/O: untrusted bytes from the request line go through here
// (and the fuzz target fuzz/request_target_fuzz.cc).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace hutch::api {

// Percent-decodes a URL component ('+' is a space in queries). False on a
// malformed escape or a NUL byte (encoded or raw).
bool UrlDecode(std::string_view in, bool plus_is_space, std::string* out);

struct RequestTarget {
  std::string path;                                             // decoded (raw when malformed)
  std::map<std::string, std::string> query;                     // decoded; last one wins
  std::vector<std::pair<std::string, std::string>> query_list;  // every pair, in order
  bool ok = true;  // false: a malformed escape somewhere
};
RequestTarget ParseRequestTarget(std::string_view target);

// "/v1//sandboxes/x/" -> {"v1", "sandboxes", "x"}.
std::vector<std::string> PathSegments(const std::string& path);

// A raw request target cut after its first `n` path segments, for a route
// that relays the rest elsewhere (the port proxy): `prefix` holds those
// segments decoded, `rest` the raw remainder exactly as the client sent it
// (path from its '/', "/" when the path ended, then the raw query if any),
// so escapes and oddities the relayed server may care about survive.
// ok=false when the path has fewer than `n` segments or one of them is a
// malformed escape.
struct SplitTarget {
  std::vector<std::string> prefix;
  std::string rest;
  bool ok = false;
};
SplitTarget SplitRequestTarget(std::string_view target, size_t n);

}  // namespace hutch::api
