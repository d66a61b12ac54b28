#include "api/common/file_send.h"

#include "core/file_ops.h"
#include "http/byte_range.h"

namespace hutch::api {

asio::awaitable<Status> SendSandboxFile(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                        const std::string& path, const std::string& user) {
  int64_t offset = 0, length = -1;
  ByteRange range = ParseRange(ctx.Header("Range"));
  if (range.present) {
    nlohmann::json stat_req = {
        {"op", "stat"}, {"path", path}, {"user", user.empty() ? "root" : user}};
    auto st = co_await FsCall(sb, stat_req);
    if (!st.ok()) co_return st.error();
    int64_t size = (*st)["entry"].value("size", int64_t{0});
    auto w = FitRange(range, size);
    if (!w.ok()) {
      // The 416 answer still carries the dialect's error body.
      ctx.AddHeader("Content-Range", "bytes */" + std::to_string(size));
      co_return w.error();
    }
    range.present = w->partial;
    offset = w->offset;
    length = w->length;
  }
  auto dl = co_await FileDownload::Start(sb, path, user, offset, length);
  ctx.ClearHeaders();
  if (!dl.ok()) co_return dl.error();
  auto& d = **dl;
  std::vector<std::pair<std::string, std::string>> headers = {{"Accept-Ranges", "bytes"}};
  int status = 200;
  if (range.present) {
    status = 206;
    int64_t last = d.offset() + d.length() - 1;
    headers.push_back({"Content-Range", "bytes " + std::to_string(d.offset()) + "-" +
                                            std::to_string(last) + "/" +
                                            std::to_string(d.file_size())});
  }
  if (auto st = co_await ctx.BeginStream(status, "application/octet-stream", d.length(), headers);
      !st.ok())
    co_return Status{};
  int64_t sent = 0;
  while (true) {
    auto chunk = co_await d.Next();
    if (!chunk.ok() || !chunk->has_value()) break;
    sent += static_cast<int64_t>((*chunk)->size());
    if (auto st = co_await ctx.WriteChunk(**chunk); !st.ok()) co_return Status{};
    d.Consumed((*chunk)->size());
  }
  // A short body (file shrank, sandbox died) must not look complete: the
  // Content-Length promise is broken, so the connection closes.
  if (sent != d.length()) co_return Status{};
  (void)co_await ctx.EndStream();
  co_return Status{};
}

}  // namespace hutch::api
