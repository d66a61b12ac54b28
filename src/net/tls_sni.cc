#include "net/tls_sni.h"

#include <algorithm>
#include <cstdint>

namespace hutch::net {

namespace {

// A bounds-checked reader of big-endian fields; any read past the end
// makes it !ok() and returns zeros.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool ok() const { return ok_; }
  size_t left() const { return b_.size() - pos_; }
  uint32_t Int(size_t n) {
    if (left() < n) return Fail();
    uint32_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b_[pos_ + i]);
    pos_ += n;
    return v;
  }
  std::string_view Bytes(size_t n) {
    if (left() < n) {
      Fail();
      return {};
    }
    auto s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // A field with an n-byte length prefix.
  std::string_view Vec(size_t n) { return Bytes(Int(n)); }

 private:
  uint32_t Fail() {
    ok_ = false;
    pos_ = b_.size();
    return 0;
  }
  std::string_view b_;
  size_t pos_ = 0;
  bool ok_ = true;
};

constexpr uint32_t kHandshakeRecord = 22, kClientHello = 1, kServerNameExt = 0, kHostName = 0;

std::string FromServerNameList(std::string_view ext) {
  Reader list(Reader(ext).Vec(2));
  while (list.ok() && list.left() > 0) {
    const uint32_t type = list.Int(1);
    std::string_view name = list.Vec(2);
    if (list.ok() && type == kHostName) {
      std::string out(name);
      std::transform(out.begin(), out.end(), out.begin(), ::tolower);
      return out;
    }
  }
  return "";
}

}  // namespace

SniPeek PeekSni(std::string_view bytes) {
  Reader rec(bytes);
  const uint32_t type = rec.Int(1);
  if (rec.ok() && type != kHandshakeRecord) return {SniPeek::kNotTls, ""};
  rec.Int(2);  // record version
  const uint32_t len = rec.Int(2);
  if (!rec.ok() || rec.left() < len) return {SniPeek::kNeedMore, ""};
  Reader hs(rec.Bytes(len));
  if (hs.Int(1) != kClientHello) return {SniPeek::kNotTls, ""};
  Reader hello(hs.Bytes(std::min<size_t>(hs.Int(3), hs.left())));
  hello.Int(2);     // client version
  hello.Bytes(32);  // random
  hello.Vec(1);     // session id
  hello.Vec(2);     // cipher suites
  hello.Vec(1);     // compression methods
  Reader exts(hello.Vec(2));
  if (!hello.ok()) return {SniPeek::kFound, ""};
  while (exts.ok() && exts.left() > 0) {
    const uint32_t ext_type = exts.Int(2);
    std::string_view body = exts.Vec(2);
    if (exts.ok() && ext_type == kServerNameExt) return {SniPeek::kFound, FromServerNameList(body)};
  }
  return {SniPeek::kFound, ""};
}

}  // namespace hutch::net
