#include "http/static_files.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sha256.h"

namespace hutch::api {

namespace fs = std::filesystem;

namespace {

// Whether an If-None-Match value names `etag` (a list, weak forms and *).
bool NoneMatchHits(const std::string& header, const std::string& etag) {
  if (header.empty()) return false;
  std::stringstream in(header);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    std::string tag = item.substr(b, e - b + 1);
    if (tag == "*") return true;
    if (tag.rfind("W/", 0) == 0) tag = tag.substr(2);
    if (tag == etag) return true;
  }
  return false;
}

}  // namespace

std::string StaticContentType(const std::string& name) {
  static const std::map<std::string, std::string> kTypes = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".txt", "text/plain; charset=utf-8"},
  };
  const std::string ext = fs::path(name).extension().string();
  auto it = kTypes.find(ext);
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

Result<StaticFiles> StaticFiles::Load(const std::string& dir, size_t limit) {
  StaticFiles out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return MakeError(Code::kFileNotFound, "static files: " + dir + " is not a directory");
  size_t total = 0;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) return MakeError(Code::kInternal, "static files: " + dir + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return MakeError(Code::kInternal, "static files: " + dir + ": " + ec.message());
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const std::string rel = fs::relative(it->path(), dir, ec).generic_string();
    std::ifstream f(it->path(), std::ios::binary);
    std::string body((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!f.good() && !f.eof())
      return MakeError(Code::kInternal, "static files: cannot read " + it->path().string());
    total += body.size();
    if (total > limit)
      return MakeError(Code::kPayloadTooLarge, "static files: " + dir + " holds more than " +
                                                   std::to_string(limit) + " bytes");
    File file;
    file.etag = "\"" + Sha256Hex(body).substr(0, 16) + "\"";
    file.content_type = StaticContentType(rel);
    file.immutable = rel.rfind("assets/", 0) == 0;
    file.body = std::move(body);
    out.files_.emplace(rel, std::move(file));
  }
  return out;
}

const StaticFiles::File* StaticFiles::Find(const std::string& rel) const {
  auto it = files_.find(rel);
  return it == files_.end() ? nullptr : &it->second;
}

std::vector<std::string> StaticFiles::Names() const {
  std::vector<std::string> names;
  names.reserve(files_.size());
  for (const auto& [name, file] : files_) names.push_back(name);
  return names;
}

asio::awaitable<void> SendStaticFile(HttpContext& ctx, const StaticFiles::File& f) {
  ctx.AddHeader("ETag", f.etag);
  ctx.AddHeader("Cache-Control", f.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  ctx.AddHeader("X-Content-Type-Options", "nosniff");
  if (NoneMatchHits(ctx.Header("If-None-Match"), f.etag)) co_return co_await ctx.SendEmpty(304);
  co_await ctx.SendText(200, f.content_type, f.body);
}

}  // namespace hutch::api
