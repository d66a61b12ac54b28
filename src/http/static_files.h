// A directory of static files held in memory and served read-only: the
// web console's assets (src/server/console_ui). The tree is read once,
// when hutchd starts, so a request never touches the file system and no
// request path can name a file outside it: a path is a key of the map or
// nothing.
//
// Caching: a file under `assets/` is content-addressed (its name carries
// a hash of its bytes, which the console's build guarantees), so it is
// served `immutable` for a year; every other file (index.html, which
// names the current assets) is `no-cache`: revalidated by its ETag on each
// load. Immutable after Load; the I/O thread only serves from it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "http/http_context.h"

namespace hutch::api {

class StaticFiles {
 public:
  struct File {
    std::string body;
    std::string content_type;
    std::string etag;  // "\"<16 hex of the body's SHA-256>\""
    bool immutable = false;
  };

  // Every regular file below `dir` (symbolic links and other kinds are
  // skipped), keyed by its path relative to `dir` with '/' separators; at
  // most `limit` bytes in all (payload_too_large past it).
  static Result<StaticFiles> Load(const std::string& dir, size_t limit);

  // The file at relative path `rel` ("index.html", "assets/app-X.js"), or
  // null.
  const File* Find(const std::string& rel) const;
  size_t count() const { return files_.size(); }
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, File> files_;
};

// The Content-Type hutchd serves a file name with (by its extension;
// application/octet-stream when unknown).
std::string StaticContentType(const std::string& name);

// Answers a GET with `f`: 200 with ETag and Cache-Control, or 304 when
// the request's If-None-Match names its ETag. Headers added to `ctx`
// before the call go with either answer.
asio::awaitable<void> SendStaticFile(HttpContext& ctx, const StaticFiles::File& f);

}  // namespace hutch::api
