#include "http/request_target.h"

namespace hutch::api {

bool UrlDecode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    // A raw NUL is as unwelcome as an encoded one: paths go to C APIs.
    if (c == '\0') return false;
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      auto hex = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        if (h >= 'a' && h <= 'f') return h - 'a' + 10;
        if (h >= 'A' && h <= 'F') return h - 'A' + 10;
        return -1;
      };
      int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      char d = static_cast<char>(hi * 16 + lo);
      if (d == '\0') return false;
      out->push_back(d);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

RequestTarget ParseRequestTarget(std::string_view target) {
  RequestTarget t;
  size_t q = target.find('?');
  std::string_view raw_path = target.substr(0, q);
  if (!UrlDecode(raw_path, false, &t.path)) {
    t.ok = false;
    t.path = std::string(raw_path);
  }
  if (q == std::string_view::npos) return t;
  std::string_view qs = target.substr(q + 1);
  while (!qs.empty()) {
    size_t amp = qs.find('&');
    std::string_view kv = qs.substr(0, amp);
    qs.remove_prefix(amp == std::string_view::npos ? qs.size() : amp + 1);
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    std::string k, v;
    if (!UrlDecode(kv.substr(0, eq), true, &k) ||
        !UrlDecode(eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1), true,
                   &v)) {
      t.ok = false;
      continue;
    }
    t.query_list.emplace_back(k, v);
    t.query[k] = std::move(v);
  }
  return t;
}

std::vector<std::string> PathSegments(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

SplitTarget SplitRequestTarget(std::string_view target, size_t n) {
  SplitTarget out;
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  // Segments are counted as PathSegments counts them: runs of '/' are one
  // separator, so the prefix matches what the router matched.
  size_t i = 0;
  while (out.prefix.size() < n) {
    while (i < path.size() && path[i] == '/') ++i;
    if (i == path.size()) return out;
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string seg;
    if (!UrlDecode(path.substr(i, j - i), false, &seg)) return out;
    out.prefix.push_back(std::move(seg));
    i = j;
  }
  out.rest = i < path.size() ? std::string(path.substr(i)) : std::string("/");
  if (q != std::string_view::npos) out.rest.append(target.substr(q));
  out.ok = true;
  return out;
}

}  // namespace hutch::api
