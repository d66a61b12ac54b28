// Host <-> agent frames. The same code is linked into hutchd and hutch-agent.
//
// A frame is a 12-byte little-endian header followed by `length` payload bytes:
//   u32 length | u8 type | u8 flags | u16 reserved (0) | u32 stream
// Streams are numbered by the host; stream 0 is the connection itself.
// docs/wire.md describes every frame type and the credit-based flow control.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hutch::wire {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 12;
// Largest payload either side accepts; a bigger length is a protocol error
// (it would otherwise let a broken peer make us allocate without bound).
inline constexpr uint32_t kMaxPayload = 1u << 20;
// Bytes of data (stdout/stderr/file) the agent may send on a stream before
// the host grants more with kCredit. Bounds host memory per stream.
inline constexpr uint32_t kInitialCredit = 256 * 1024;
// Largest data chunk the agent puts in one frame.
inline constexpr uint32_t kChunk = 64 * 1024;

enum class Type : uint8_t {
  // agent -> host, stream 0, JSON {"version":1,"pid":N}: sent once on accept.
  kHello = 1,

  // host -> agent
  kExecStart = 10,    // JSON ExecSpec (docs/wire.md)
  kStdin = 11,        // raw bytes for the process's stdin
  kStdinClose = 12,   // close the process's stdin
  kSignal = 13,       // JSON {"signal":N}: sent to the process group
  kCredit = 14,       // u32 LE: host consumed that many more data bytes
  kCancel = 15,       // kill the process group / abort the file operation
  kFsRequest = 16,    // JSON FsRequest (docs/wire.md)
  kFsWriteData = 17,  // raw bytes appended to the file of a "write" request
  kFsWriteEnd = 18,   // the upload is complete: close the file and answer
  // Background processes (docs/wire.md "Background processes"). Each is a
  // request on a fresh stream; all but kProcAttach are answered by exactly
  // one kProcResult or kError.
  kProcStart =
      19,  // JSON ExecSpec (+ "meta", "stdin_data", "buffer_bytes"); -> kProcResult {process}
  kProcList = 20,    // JSON {}; -> kProcResult {"processes":[...]}
  kProcStatus = 21,  // JSON {"pid":N}; -> kProcResult {process}
  kProcAttach = 22,  // JSON {"pid":N,"from":N}; -> kStarted {process}, output..., kExit
  kProcStdin =
      23,  // u32 LE pid | u8 flags (1: close stdin after) | bytes; -> kProcResult {process}
  kProcSignal = 24,  // JSON {"pid":N,"signal":N}; -> kProcResult {process}
  // Terminals (docs/wire.md "PTY").
  kPtyStart = 25,   // JSON PtySpec; -> kStarted {"pid":N}, kStdout..., kExit
  kPtyResize = 26,  // JSON {"cols":N,"rows":N} on a pty stream
  // A vm sandbox restored from a snapshot or forked: the guest takes its
  // new identity (docs/wire.md "Identify"). -> kIdentifyResult or kError.
  kIdentify = 27,  // JSON {"hostname":s,"realtime_ns":N,"entropy":hex}

  // agent -> host
  kStarted = 30,     // JSON {"pid":N}
  kStdout = 31,      // raw bytes
  kStderr = 32,      // raw bytes
  kExit = 33,        // JSON {"exit_code":N,"signal":N,"timed_out":b,"duration_ms":N}; ends stream
  kError = 34,       // JSON {"code":"...","errno":N,"message":"..."}; ends stream
  kFsResult = 35,    // JSON result; ends stream
  kFsReadData = 36,  // raw bytes of a "read" request (counted against credit)
  kProcResult = 37,  // JSON answer to a kProc* request; ends stream
  kProcDropped =
      38,  // JSON {"from":N,"oldest":N,"dropped_bytes":N}: output skipped on an attach stream
  kIdentifyResult =
      39,           // JSON {"hostname":s,"clock_set":b,"entropy_bytes":N,"reseeded":b}; ends stream
  kFsEntries = 40,  // JSON {"entries":[E...]}: part of a "list" answer; the kFsResult follows
};

bool IsKnownType(uint8_t t);

struct Frame {
  Type type{};
  uint8_t flags = 0;
  uint32_t stream = 0;
  std::string payload;
};

// Serializes a frame: header + payload.
std::string Encode(Type type, uint32_t stream, std::string_view payload);
std::string EncodeCredit(uint32_t stream, uint32_t bytes);
// Reads the u32 of a kCredit payload; 0 when malformed.
uint32_t DecodeCredit(std::string_view payload);

// kProcStdin payload: the target pid, whether to close stdin after the
// bytes, and the bytes themselves (binary-safe, so no JSON).
inline constexpr uint8_t kStdinFlagClose = 1;
inline constexpr size_t kProcStdinHeader = 5;
std::string EncodeProcStdin(uint32_t pid, bool close, std::string_view bytes);
struct ProcStdin {
  uint32_t pid = 0;
  bool close = false;
  std::string_view bytes;  // points into the decoded payload
};
// False when the payload is shorter than its header or has unknown flags.
bool DecodeProcStdin(std::string_view payload, ProcStdin* out);

// Incremental frame parser. Feed it bytes in any split; take whole frames.
// After an error (oversized length, unknown type, non-zero reserved bits) it
// stays failed: the connection must be dropped.
class FrameReader {
 public:
  // Appends bytes; returns an error if the stream is malformed.
  Status Feed(const char* data, size_t n);
  // Moves the next complete frame into *out; false when none is complete.
  bool Next(Frame* out);
  bool failed() const { return failed_; }
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  Status ParseAvailable();
  std::string buf_;
  size_t pos_ = 0;
  std::deque<Frame> ready_;
  bool failed_ = false;
};

}  // namespace hutch::wire
