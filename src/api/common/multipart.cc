#include "api/common/multipart.h"

#include <algorithm>
#include <cctype>

namespace hutch::api {

namespace {

constexpr size_t kMaxHeaderBytes = 16 * 1024;

std::string Lower(std::string_view s) {
  std::string o(s);
  for (auto& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

// The value of parameter `key` (name, filename) in a Content-Disposition
// header value; quoted strings may hold backslash escapes.
std::string DispositionParam(std::string_view v, std::string_view key) {
  std::string lower = Lower(v);
  size_t pos = 0;
  while ((pos = lower.find(key, pos)) != std::string::npos) {
    bool starts =
        pos == 0 || lower[pos - 1] == ';' || lower[pos - 1] == ' ' || lower[pos - 1] == '\t';
    size_t eq = pos + key.size();
    if (!starts || eq >= v.size() || v[eq] != '=') {
      pos += key.size();
      continue;
    }
    size_t i = eq + 1;
    std::string out;
    if (i < v.size() && v[i] == '"') {
      for (++i; i < v.size() && v[i] != '"'; ++i) {
        if (v[i] == '\\' && i + 1 < v.size()) ++i;
        out.push_back(v[i]);
      }
    } else {
      for (; i < v.size() && v[i] != ';'; ++i) out.push_back(v[i]);
      while (!out.empty() && out.back() == ' ') out.pop_back();
    }
    return out;
  }
  return {};
}

}  // namespace

std::string MultipartBoundary(std::string_view ct) {
  std::string lower = Lower(ct);
  size_t p = lower.find("boundary=");
  if (p == std::string::npos) return {};
  std::string_view v = ct.substr(p + 9);
  std::string out;
  if (!v.empty() && v[0] == '"') {
    size_t end = v.find('"', 1);
    out =
        std::string(v.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1));
  } else {
    size_t end = v.find(';');
    out = std::string(v.substr(0, end));
    while (!out.empty() && out.back() == ' ') out.pop_back();
  }
  if (out.size() > 70) return {};  // RFC 2046: at most 70 characters
  return out;
}

Result<std::vector<MultipartReader::Event>> MultipartReader::Feed(std::string_view bytes) {
  std::vector<Event> out;
  buf_.append(bytes);
  while (true) {
    if (state_ == kDone) {
      buf_.clear();  // the epilogue is ignored
      return out;
    }
    if (state_ == kPreamble) {
      // The first boundary may open the body (no CRLF before it).
      std::string_view first(delim_);
      first.remove_prefix(2);
      size_t p = buf_.rfind(first, 0) == 0 ? 0 : buf_.find(delim_);
      if (p == std::string::npos) {
        if (buf_.size() > delim_.size()) buf_.erase(0, buf_.size() - delim_.size());
        return out;
      }
      buf_.erase(0, p + (p == 0 && buf_.rfind(first, 0) == 0 ? first.size() : delim_.size()));
      state_ = kAfterBoundary;
      continue;
    }
    if (state_ == kAfterBoundary) {
      if (buf_.size() < 2) return out;
      if (buf_.compare(0, 2, "--") == 0) {
        state_ = kDone;
        continue;
      }
      // Transport padding (spaces, tabs) may precede the line break.
      size_t i = 0;
      while (i < buf_.size() && (buf_[i] == ' ' || buf_[i] == '\t')) ++i;
      if (buf_.size() < i + 2) return out;
      if (buf_.compare(i, 2, "\r\n") != 0)
        return MakeError(Code::kInvalidRequest, "malformed multipart boundary line");
      buf_.erase(0, i + 2);
      state_ = kHeaders;
      continue;
    }
    if (state_ == kHeaders) {
      size_t end = buf_.rfind("\r\n", 0) == 0 ? 0 : buf_.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (buf_.size() > kMaxHeaderBytes)
          return MakeError(Code::kInvalidRequest, "multipart part headers too large");
        return out;
      }
      Event begin;
      begin.kind = Event::kPartBegin;
      std::string_view headers(buf_.data(), end);
      while (!headers.empty()) {
        size_t nl = headers.find("\r\n");
        std::string_view line = headers.substr(0, nl);
        headers.remove_prefix(nl == std::string_view::npos ? headers.size() : nl + 2);
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        if (Lower(line.substr(0, colon)) != "content-disposition") continue;
        std::string_view value = line.substr(colon + 1);
        begin.name = DispositionParam(value, "name");
        begin.filename = DispositionParam(value, "filename");
      }
      buf_.erase(0, end == 0 ? 2 : end + 4);
      out.push_back(std::move(begin));
      state_ = kBody;
      continue;
    }
    // kBody: everything up to the next delimiter is data; keep back a tail
    // that could be the start of a delimiter split across reads.
    size_t p = buf_.find(delim_);
    if (p == std::string::npos) {
      size_t keep = std::min(buf_.size(), delim_.size() - 1);
      if (buf_.size() > keep) {
        Event d;
        d.data = buf_.substr(0, buf_.size() - keep);
        buf_.erase(0, buf_.size() - keep);
        out.push_back(std::move(d));
      }
      return out;
    }
    if (p > 0) {
      Event d;
      d.data = buf_.substr(0, p);
      out.push_back(std::move(d));
    }
    Event endp;
    endp.kind = Event::kPartEnd;
    out.push_back(std::move(endp));
    buf_.erase(0, p + delim_.size());
    state_ = kAfterBoundary;
  }
}

}  // namespace hutch::api
