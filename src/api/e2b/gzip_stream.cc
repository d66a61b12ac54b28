#include "api/e2b/gzip_stream.h"

#include <zlib.h>

namespace hutch::api::e2b {

struct GzipDeflater::State {
  z_stream z{};
};

GzipDeflater::GzipDeflater() : s_(std::make_unique<State>()) {
  // 15 + 16: a gzip wrapper; level 1: the transfer is what we save on, not disk.
  deflateInit2(&s_->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}

GzipDeflater::~GzipDeflater() { deflateEnd(&s_->z); }

std::string GzipDeflater::Run(std::string_view in, int flush) {
  std::string out;
  s_->z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s_->z.avail_in = static_cast<uInt>(in.size());
  char buf[64 * 1024];
  do {
    s_->z.next_out = reinterpret_cast<Bytef*>(buf);
    s_->z.avail_out = sizeof buf;
    int rc = deflate(&s_->z, flush);
    out.append(buf, sizeof buf - s_->z.avail_out);
    if (rc == Z_STREAM_END || rc == Z_STREAM_ERROR) break;
  } while (s_->z.avail_out == 0 || (flush == Z_FINISH));
  return out;
}

std::string GzipDeflater::Feed(std::string_view in) { return Run(in, Z_NO_FLUSH); }
std::string GzipDeflater::Finish() { return Run(std::string_view(), Z_FINISH); }

struct GzipInflater::State {
  z_stream z{};
};

GzipInflater::GzipInflater() : s_(std::make_unique<State>()) { inflateInit2(&s_->z, 15 + 16); }
GzipInflater::~GzipInflater() { inflateEnd(&s_->z); }

Result<std::string> GzipInflater::Feed(std::string_view in) {
  std::string out;
  if (finished_) return out;  // trailing bytes after the stream are ignored
  s_->z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s_->z.avail_in = static_cast<uInt>(in.size());
  char buf[64 * 1024];
  while (s_->z.avail_in > 0 || s_->z.avail_out == 0) {
    s_->z.next_out = reinterpret_cast<Bytef*>(buf);
    s_->z.avail_out = sizeof buf;
    int rc = inflate(&s_->z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - s_->z.avail_out);
    if (rc == Z_STREAM_END) {
      finished_ = true;
      break;
    }
    if (rc == Z_BUF_ERROR && s_->z.avail_in == 0) break;
    if (rc != Z_OK) return MakeError(Code::kInvalidRequest, "corrupt gzip body");
  }
  return out;
}

Result<std::string> GunzipBounded(std::string_view in, size_t limit) {
  GzipInflater inflater;
  std::string out;
  constexpr size_t kStep = 4096;  // at most ~4 MiB of output per step (deflate's 1032:1)
  for (size_t at = 0; at < in.size() && !inflater.finished(); at += kStep) {
    auto part = inflater.Feed(in.substr(at, kStep));
    if (!part.ok()) return part.error();
    out += *part;
    if (out.size() > limit)
      return MakeError(Code::kPayloadTooLarge,
                       "gzip message inflates past " + std::to_string(limit) + " bytes");
  }
  if (!inflater.finished()) return MakeError(Code::kInvalidRequest, "truncated gzip message");
  return out;
}

}  // namespace hutch::api::e2b
