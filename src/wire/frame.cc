#include "wire/frame.h"

#include <cstring>

namespace hutch::wire {

namespace {
void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
}  // namespace

bool IsKnownType(uint8_t t) {
  switch (static_cast<Type>(t)) {
    case Type::kHello:
    case Type::kIdentify:
    case Type::kIdentifyResult:
    case Type::kExecStart:
    case Type::kStdin:
    case Type::kStdinClose:
    case Type::kSignal:
    case Type::kCredit:
    case Type::kCancel:
    case Type::kFsRequest:
    case Type::kFsWriteData:
    case Type::kFsWriteEnd:
    case Type::kStarted:
    case Type::kStdout:
    case Type::kStderr:
    case Type::kExit:
    case Type::kError:
    case Type::kFsResult:
    case Type::kFsEntries:
    case Type::kFsReadData:
    case Type::kProcStart:
    case Type::kProcList:
    case Type::kProcStatus:
    case Type::kProcAttach:
    case Type::kProcStdin:
    case Type::kProcSignal:
    case Type::kPtyStart:
    case Type::kPtyResize:
    case Type::kProcResult:
    case Type::kProcDropped:
      return true;
  }
  return false;
}

std::string Encode(Type type, uint32_t stream, std::string_view payload) {
  std::string out(kHeaderSize + payload.size(), '\0');
  PutU32(out.data(), static_cast<uint32_t>(payload.size()));
  out[4] = static_cast<char>(type);
  out[5] = 0;
  out[6] = 0;
  out[7] = 0;
  PutU32(out.data() + 8, stream);
  if (!payload.empty()) std::memcpy(out.data() + kHeaderSize, payload.data(), payload.size());
  return out;
}

std::string EncodeCredit(uint32_t stream, uint32_t bytes) {
  char b[4];
  PutU32(b, bytes);
  return Encode(Type::kCredit, stream, std::string_view(b, 4));
}

uint32_t DecodeCredit(std::string_view payload) {
  if (payload.size() != 4) return 0;
  return GetU32(payload.data());
}

std::string EncodeProcStdin(uint32_t pid, bool close, std::string_view bytes) {
  std::string p(kProcStdinHeader + bytes.size(), '\0');
  PutU32(p.data(), pid);
  p[4] = static_cast<char>(close ? kStdinFlagClose : 0);
  if (!bytes.empty()) std::memcpy(p.data() + kProcStdinHeader, bytes.data(), bytes.size());
  return p;
}

bool DecodeProcStdin(std::string_view payload, ProcStdin* out) {
  if (payload.size() < kProcStdinHeader) return false;
  const auto flags = static_cast<uint8_t>(payload[4]);
  if ((flags & ~kStdinFlagClose) != 0) return false;
  out->pid = GetU32(payload.data());
  out->close = (flags & kStdinFlagClose) != 0;
  out->bytes = payload.substr(kProcStdinHeader);
  return true;
}

Status FrameReader::Feed(const char* data, size_t n) {
  if (failed_) return MakeError(Code::kInternal, "frame reader already failed");
  // Compact before growing so a long-lived connection does not keep
  // consumed bytes around.
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (1u << 16)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data, n);
  return ParseAvailable();
}

Status FrameReader::ParseAvailable() {
  while (buf_.size() - pos_ >= kHeaderSize) {
    const char* h = buf_.data() + pos_;
    uint32_t len = GetU32(h);
    uint8_t type = static_cast<uint8_t>(h[4]);
    if (len > kMaxPayload) {
      failed_ = true;
      return MakeError(Code::kInternal,
                       "frame payload of " + std::to_string(len) + " bytes exceeds limit");
    }
    if (!IsKnownType(type)) {
      failed_ = true;
      return MakeError(Code::kInternal, "unknown frame type " + std::to_string(type));
    }
    if (h[6] != 0 || h[7] != 0) {
      failed_ = true;
      return MakeError(Code::kInternal, "reserved frame header bits set");
    }
    if (buf_.size() - pos_ < kHeaderSize + len) break;
    Frame f;
    f.type = static_cast<Type>(type);
    f.flags = static_cast<uint8_t>(h[5]);
    f.stream = GetU32(h + 8);
    f.payload.assign(h + kHeaderSize, len);
    pos_ += kHeaderSize + len;
    ready_.push_back(std::move(f));
  }
  return {};
}

bool FrameReader::Next(Frame* out) {
  if (ready_.empty()) return false;
  *out = std::move(ready_.front());
  ready_.pop_front();
  return true;
}

}  // namespace hutch::wire
