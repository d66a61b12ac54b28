#include "common/header_value.h"

namespace hutch {

namespace {

// RFC 5987 attr-char: sent as is in an ext-value; everything else is %XX.
bool IsAttrChar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '&':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string ContentDisposition(std::string_view type, std::string_view filename) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string fallback, encoded;
  for (unsigned char c : filename) {
    // '%' too: some clients percent-decode the plain parameter.
    const bool plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '%';
    fallback += plain ? static_cast<char>(c) : '_';
    if (IsAttrChar(c)) {
      encoded += static_cast<char>(c);
    } else {
      encoded += '%';
      encoded += kHex[c >> 4];
      encoded += kHex[c & 0xf];
    }
  }
  if (filename.empty()) fallback = encoded = "download";
  std::string out(type);
  out += "; filename=\"" + fallback + "\"; filename*=UTF-8''" + encoded;
  return out;
}

bool IsSafeHeaderValue(std::string_view value) {
  for (unsigned char c : value)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  return true;
}

}  // namespace hutch
