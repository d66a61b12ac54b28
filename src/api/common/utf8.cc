#include "api/common/utf8.h"

#include <algorithm>

namespace hutch::api {

size_t Utf8ValidPrefix(std::string_view s, bool* invalid) {
  *invalid = false;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      *invalid = true;
      return i;
    }
    size_t avail = std::min(len, n - i);
    for (size_t k = 1; k < avail; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) {
        *invalid = true;
        return i;
      }
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (avail < len) return i;  // cut short at the end: maybe completed later
    // Overlong forms, surrogates and values past U+10FFFF are invalid.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
      *invalid = true;
      return i;
    }
    i += len;
  }
  return i;
}

namespace {
// Escape sequence lengths per byte: 1 = literal, 2 = \x, 6 = \u00XX.
struct EscapeTable {
  unsigned char len[256];
  constexpr EscapeTable() : len() {
    for (int i = 0; i < 256; ++i) len[i] = 1;
    for (int i = 0; i < 0x20; ++i) len[i] = 6;
    len[static_cast<unsigned char>('\n')] = 2;
    len[static_cast<unsigned char>('\r')] = 2;
    len[static_cast<unsigned char>('\t')] = 2;
    len[static_cast<unsigned char>('"')] = 2;
    len[static_cast<unsigned char>('\\')] = 2;
    len[0x7f] = 6;
  }
};
constexpr EscapeTable kEscape;
}  // namespace

size_t JsonEscapedSize(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += kEscape.len[c];
  return n;
}

void AppendJsonEscaped(std::string* out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out->reserve(out->size() + JsonEscapedSize(s));
  size_t run = 0;  // start of the current run of literal bytes
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (kEscape.len[c] == 1) continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      default: {
        char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        out->append(u, 6);
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
}

std::string OutputEvent(const char* name, bool text, std::string_view bytes) {
  if (text && JsonEscapedSize(bytes) > bytes.size() / 3 * 4 + 8) text = false;
  std::string ev = "event: ";
  ev += name;
  if (text) {
    ev += "\ndata: {\"text\":\"";
    AppendJsonEscaped(&ev, bytes);
  } else {
    ev += "\ndata: {\"b64\":\"";
    ev += Base64Encode(bytes);
  }
  ev += "\"}\n\n";
  return ev;
}

size_t Utf8Check::Feed(std::string_view s) {
  if (bad_) return 0;
  if (!pending_.empty()) {
    // Complete the character the last piece ended inside.
    const unsigned char lead = static_cast<unsigned char>(pending_[0]);
    const size_t len = (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : 4;
    const size_t take = std::min(len - pending_.size(), s.size());
    pending_.append(s.substr(0, take));
    bool invalid = false;
    const size_t ok = Utf8ValidPrefix(pending_, &invalid);
    if (invalid) {
      bad_ = true;
      return 0;
    }
    if (ok == 0) return std::string_view::npos;  // still unfinished: `s` was that short
    pending_.clear();
    s.remove_prefix(take);
    const size_t rest = Feed(s);
    return rest == std::string_view::npos ? rest : rest + take;
  }
  bool invalid = false;
  const size_t ok = Utf8ValidPrefix(s, &invalid);
  if (invalid) {
    bad_ = true;
    return ok;
  }
  pending_.assign(s.substr(ok));
  return std::string_view::npos;
}

std::vector<Utf8Splitter::Piece> Utf8Splitter::Feed(std::string_view data) {
  std::string buf = std::move(pending_);
  pending_.clear();
  buf.append(data);
  std::vector<Piece> out;
  bool invalid = false;
  size_t ok = Utf8ValidPrefix(buf, &invalid);
  if (invalid) {
    // Not text: send the whole chunk as bytes.
    out.push_back({false, std::move(buf)});
    return out;
  }
  if (ok > 0) out.push_back({true, buf.substr(0, ok)});
  pending_ = buf.substr(ok);  // at most 3 bytes of an unfinished character
  return out;
}

std::vector<Utf8Splitter::Piece> Utf8Splitter::Flush() {
  std::vector<Piece> out;
  if (!pending_.empty()) out.push_back({false, std::move(pending_)});
  pending_.clear();
  return out;
}

}  // namespace hutch::api
