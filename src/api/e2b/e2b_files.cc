// envd's plain-HTTP file transfer: GET /files (raw bytes, gzip when the
// client accepts it) and POST /files (multipart/form-data parts or one
// application/octet-stream body, optionally gzip-encoded), streamed through
// core's FileDownload / FileUpload so no file is ever held whole.
#include "api/common/multipart.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/gzip_stream.h"
#include "common/header_value.h"
#include "core/file_ops.h"

namespace hutch::api::e2b {

namespace {

// envd's REST errors: {"code":<status>,"message":...}; the SDK maps 400,
// 401, 404, 429, 507 to its error classes.
asio::awaitable<void> SendFilesError(HttpContext& ctx, const Error& e) {
  ctx.NoteError(e);
  int status = CodeHttpStatus(e.code);
  switch (e.code) {
    case Code::kInvalidRequest:
    case Code::kIsADirectory:
    case Code::kNotADirectory:
      status = 400;
      break;
    case Code::kNoSpace:
      status = 507;
      break;
    case Code::kPermissionDenied:
      status = 403;
      break;
    default:
      break;
  }
  const nlohmann::json body = {{"code", status}, {"message", e.message}};
  co_await ctx.SendJson(status, body);
}

bool AcceptsGzip(const std::string& accept_encoding) {
  std::string a = accept_encoding;
  for (auto& c : a) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t p = a.find("gzip");
  if (p == std::string::npos) return false;
  // "gzip;q=0" refuses it.
  size_t end = a.find(',', p);
  std::string param = a.substr(p + 4, end == std::string::npos ? std::string::npos : end - p - 4);
  param.erase(std::remove(param.begin(), param.end(), ' '), param.end());
  return param.rfind(";q=0", 0) != 0 || param.rfind(";q=0.", 0) == 0;
}

std::string BaseName(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

nlohmann::json WrittenJson(const nlohmann::json& entry, const std::string& fallback) {
  std::string path = entry.value("path", fallback);
  return nlohmann::json{{"name", BaseName(path)}, {"type", "file"}, {"path", path}};
}

}  // namespace

asio::awaitable<void> E2bApi::FilesGet(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                       const std::string& call_user) {
  auto path = ctx.Query("path");
  if (!path || path->empty() || path->find('\0') != std::string::npos) {
    Error err = MakeError(Code::kInvalidRequest, "query parameter 'path' is required");
    co_return co_await SendFilesError(ctx, err);
  }
  const std::string user =
      ctx.Query("username").value_or("").empty() ? call_user : *ctx.Query("username");
  auto dl = co_await FileDownload::Start(sb, *path, user, 0, -1);
  if (!dl.ok()) co_return co_await SendFilesError(ctx, dl.error());
  auto& d = **dl;
  const bool gzip = AcceptsGzip(ctx.Header("Accept-Encoding"));
  std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Disposition", ContentDisposition("inline", BaseName(*path))}};
  if (gzip) headers.push_back({"Content-Encoding", "gzip"});
  headers.push_back({"Vary", "Accept-Encoding"});
  const std::string type = "application/octet-stream";
  if (auto st = co_await ctx.BeginStream(200, type, gzip ? -1 : d.length(), headers); !st.ok())
    co_return;
  GzipDeflater deflater;
  int64_t sent = 0;
  while (true) {
    auto chunk = co_await d.Next();
    if (!chunk.ok() || !chunk->has_value()) break;
    const size_t n = (*chunk)->size();
    sent += static_cast<int64_t>(n);
    std::string out = gzip ? deflater.Feed(**chunk) : std::move(**chunk);
    if (!out.empty())
      if (auto st = co_await ctx.WriteChunk(out); !st.ok()) co_return;
    d.Consumed(n);
  }
  // A short body must not look complete: without the rest (or the gzip
  // trailer) the connection closes instead.
  if (sent != d.length()) {
    ctx.CloseAfterResponse();
    co_return;
  }
  if (gzip) {
    std::string tail = deflater.Finish();
    if (auto st = co_await ctx.WriteChunk(tail); !st.ok()) co_return;
  }
  (void)co_await ctx.EndStream();
}

asio::awaitable<void> E2bApi::FilesPost(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                        const std::string& call_user) {
  const std::string user =
      ctx.Query("username").value_or("").empty() ? call_user : *ctx.Query("username");
  const std::string qpath = ctx.Query("path").value_or("");
  if (qpath.find('\0') != std::string::npos) {
    Error err = MakeError(Code::kInvalidRequest, "path contains NUL");
    co_return co_await SendFilesError(ctx, err);
  }
  const std::string ct = ctx.Header("Content-Type");
  std::string encoding = ctx.Header("Content-Encoding");
  for (auto& c : encoding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!encoding.empty() && encoding != "gzip" && encoding != "identity") {
    Error err = MakeError(Code::kInvalidRequest, "unsupported Content-Encoding '" + encoding + "'");
    co_return co_await SendFilesError(ctx, err);
  }
  std::unique_ptr<GzipInflater> inflater;
  if (encoding == "gzip") inflater = std::make_unique<GzipInflater>();
  nlohmann::json written = nlohmann::json::array();

  if (ct.rfind("application/octet-stream", 0) == 0) {
    if (qpath.empty()) {
      Error err = MakeError(Code::kInvalidRequest, "query parameter 'path' is required");
      co_return co_await SendFilesError(ctx, err);
    }
    auto up = co_await FileUpload::Start(sb, qpath, user, 0644);
    if (!up.ok()) co_return co_await SendFilesError(ctx, up.error());
    auto& u = **up;
    GzipInflater* inf = inflater.get();
    auto st = co_await ctx.StreamBody([&u, inf](std::string_view data) -> asio::awaitable<Status> {
      if (!inf) co_return co_await u.Write(data);
      auto plain = inf->Feed(data);
      if (!plain.ok()) co_return plain.error();
      co_return co_await u.Write(*plain);
    });
    if (!st.ok()) co_return co_await SendFilesError(ctx, st.error());
    if (inf && !inf->finished()) {
      Error err = MakeError(Code::kInvalidRequest, "truncated gzip body");
      co_return co_await SendFilesError(ctx, err);
    }
    auto entry = co_await u.Finish();
    if (!entry.ok()) co_return co_await SendFilesError(ctx, entry.error());
    written.push_back(WrittenJson(*entry, qpath));
    co_return co_await ctx.SendJson(200, written);
  }

  const std::string boundary = MultipartBoundary(ct);
  if (ct.rfind("multipart/form-data", 0) != 0 || boundary.empty()) {
    Error err = MakeError(Code::kInvalidRequest,
                          "Content-Type must be multipart/form-data (with a boundary) or "
                          "application/octet-stream");
    co_return co_await SendFilesError(ctx, err);
  }
  MultipartReader reader(boundary);
  std::unique_ptr<FileUpload> current;
  std::string current_path;
  bool skipping = false;
  auto handle = [&](std::vector<MultipartReader::Event> events) -> asio::awaitable<Status> {
    for (auto& ev : events) {
      if (ev.kind == MultipartReader::Event::kPartBegin) {
        // Parts without a file (other form fields) are skipped.
        skipping = ev.filename.empty() && ev.name != "file";
        if (skipping) continue;
        current_path = qpath.empty() ? ev.filename : qpath;
        if (current_path.empty() || current_path.find('\0') != std::string::npos)
          co_return MakeError(Code::kInvalidRequest,
                              "a file part needs a path (query 'path' or its filename)");
        auto up = co_await FileUpload::Start(sb, current_path, user, 0644);
        if (!up.ok()) co_return up.error();
        current = std::move(*up);
      } else if (ev.kind == MultipartReader::Event::kData) {
        if (skipping || !current) continue;
        if (auto st = co_await current->Write(ev.data); !st.ok()) co_return st;
      } else {
        if (skipping || !current) continue;
        auto entry = co_await current->Finish();
        current.reset();
        if (!entry.ok()) co_return entry.error();
        written.push_back(WrittenJson(*entry, current_path));
      }
    }
    co_return Status{};
  };
  GzipInflater* inf = inflater.get();
  auto st = co_await ctx.StreamBody([&](std::string_view data) -> asio::awaitable<Status> {
    std::string plain;
    if (inf) {
      auto p = inf->Feed(data);
      if (!p.ok()) co_return p.error();
      plain = std::move(*p);
      data = plain;
    }
    auto events = reader.Feed(data);
    if (!events.ok()) co_return events.error();
    co_return co_await handle(std::move(*events));
  });
  if (!st.ok()) co_return co_await SendFilesError(ctx, st.error());
  if (!reader.done()) {
    Error err =
        MakeError(Code::kInvalidRequest, "multipart body ended before its closing boundary");
    co_return co_await SendFilesError(ctx, err);
  }
  if (written.empty()) {
    Error err = MakeError(Code::kInvalidRequest, "no file part in the multipart body");
    co_return co_await SendFilesError(ctx, err);
  }
  co_await ctx.SendJson(200, written);
}

}  // namespace hutch::api::e2b
