// HTTP header values built from data the sandbox controls (issue 32: a file
// named "x\r\nSet-Cookie: ..." inside a sandbox became a header of the
// client's response). Every such value goes through here: either encoded so
// that no byte of the data can end the header, or refused.
#pragma once

#include <string>
#include <string_view>

namespace hutch {

// A Content-Disposition value for `filename` (RFC 6266): the disposition
// type, an ASCII `filename="..."` fallback in which every byte outside
// printable ASCII, and '"', '\\' and '%', is '_', and `filename*=UTF-8''...`
// (RFC 5987) carrying the name byte for byte, percent-encoded. `type` is
// "inline" or "attachment". An empty name gives "download" as fallback.
std::string ContentDisposition(std::string_view type, std::string_view filename);

// True if `value` can be a header value as is: no CR, LF, NUL or other
// control byte but HTAB. Values that fail are refused, not cleaned: a
// caller that cannot encode them drops the header.
bool IsSafeHeaderValue(std::string_view value);

}  // namespace hutch
