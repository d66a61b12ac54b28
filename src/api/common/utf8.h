// Splitting process output into SSE-safe text: valid UTF-8 goes out as
// JSON text, anything else as base64 (api-v1.md). A multi-byte character
// split across two output chunks is held back and joined, not mangled.
#pragma once

#include "common/base64.h"

#include <string>
#include <string_view>
#include <vector>

namespace hutch::api {

using hutch::Base64Decode;
using hutch::Base64Encode;

// Length of the longest prefix of `s` that is valid UTF-8 and does not end
// inside a character. Sets *invalid when `s` contains a byte sequence that
// can never be valid (as opposed to one merely cut short at the end).
size_t Utf8ValidPrefix(std::string_view s, bool* invalid);

// Appends `s` (valid UTF-8) as the inside of a JSON string literal.
void AppendJsonEscaped(std::string* out, std::string_view s);
// Length `s` would have after AppendJsonEscaped.
size_t JsonEscapedSize(std::string_view s);

// One SSE output event: `data: {"text":...}` for text, `{"b64":...}` for
// bytes, and also b64 for text so full of control characters (NULs from
// /dev/zero, say) that JSON escapes (6 bytes each) would outgrow base64.
std::string OutputEvent(const char* name, bool text, std::string_view bytes);

// Checks that a byte stream fed in pieces is valid UTF-8, characters
// split between pieces included.
class Utf8Check {
 public:
  // Feeds the next piece. Returns the offset in `s` of the first byte of an
  // invalid sequence (0 when it began in an earlier piece), or npos while
  // the stream is valid so far.
  size_t Feed(std::string_view s);
  // Valid so far (an unfinished character at the end still counts).
  bool valid() const { return !bad_; }
  // Bytes of an unfinished character at the end (0-3).
  size_t pending() const { return pending_.size(); }
  // Valid and not ending inside a character.
  bool complete() const { return !bad_ && pending_.empty(); }
  // Forgets the unfinished character at the end (its bytes were dropped).
  void DropPending() { pending_.clear(); }

 private:
  std::string pending_;
  bool bad_ = false;
};

class Utf8Splitter {
 public:
  struct Piece {
    bool text;  // true: valid UTF-8; false: send as base64
    std::string bytes;
  };
  // Feeds bytes; returns what can be emitted now (0, 1 or 2 pieces).
  std::vector<Piece> Feed(std::string_view data);
  // At end of stream: whatever is held back (an incomplete character).
  std::vector<Piece> Flush();

 private:
  std::string pending_;
};

}  // namespace hutch::api
