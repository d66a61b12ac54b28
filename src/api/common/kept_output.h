// KeptOutput: one stream (stdout or stderr) of a blocking exec, kept until
// the command ends so that it can go into the JSON answer. It keeps what
// fits both the per-stream cap and the server-wide OutputBudget, counted
// as the bytes the answer will carry after encoding, and drops the rest
// (the answer says so). Bytes are held as they came (the agent's frames),
// never copied into one growing string, and encoded only while the answer
// is written (exec_answer), a piece at a time.
//
// The encoding rule (docs/api.md "Exec"): a stream goes out as a JSON
// string when it is valid UTF-8 and escaping it at most doubles it (plus
// 64 bytes, so short outputs with a few control characters stay text);
// otherwise as base64 of the raw bytes. Output that is mostly control bytes
// (`\x01` escapes to six bytes) or is not text costs 4/3 of its size, not 6x.
//
// Used by one request on the I/O thread; the chunks it hands out may be
// encoded on another thread.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "api/common/output_budget.h"
#include "api/common/utf8.h"

namespace hutch::api {

class KeptOutput {
 public:
  // `cap`: most bytes the stream may take in the answer, after encoding.
  // The lease is the request's share of the server-wide budget (both
  // streams of a request grow the same lease).
  KeptOutput(size_t cap, OutputBudget::Lease* lease) : cap_(cap), lease_(lease) {}

  // The next bytes the command wrote: kept if they fit, else as much of
  // them as fits (cut at a character boundary) and nothing after that.
  void Add(std::string data);
  // Once the command ended: decides the encoding (and trims an answer that
  // would no longer fit once decided). Call once, before the getters below.
  void Finish();

  bool text() const { return text_; }
  // Size of the JSON string's inside: escaped text or base64.
  size_t encoded_size() const;
  uint64_t total() const { return total_; }  // bytes the command wrote
  bool truncated() const { return truncated_; }
  size_t kept() const { return n_; }
  bool empty() const { return chunks_.empty(); }
  // Takes kept chunks from the front: whole chunks, at least one, until
  // about `max` bytes.
  std::vector<std::string> TakeChunks(size_t max);

  // Answer size of `n` bytes whose escaped size is `escaped`, text or not.
  static size_t EncodedSize(size_t n, size_t escaped, bool utf8);
  static size_t Base64Size(size_t n) { return (n + 2) / 3 * 4; }

 private:
  // Grows this stream's lease to `size` (never shrinks it).
  bool Reserve(size_t size);
  // Drops kept bytes from the end.
  void TrimBack(size_t bytes);

  const size_t cap_;
  OutputBudget::Lease* lease_;
  std::deque<std::string> chunks_;
  size_t n_ = 0;        // bytes kept
  size_t escaped_ = 0;  // their JSON-escaped size
  size_t leased_ = 0;   // budget this stream holds
  uint64_t total_ = 0;
  bool truncated_ = false;
  bool text_ = true;
  Utf8Check utf8_;
};

}  // namespace hutch::api
