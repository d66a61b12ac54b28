#include "common/log_format.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/clock.h"

namespace hutch {

namespace {

// Length of the valid UTF-8 sequence at the start of `s`, 0 if the bytes
// there are not one (stray continuation, overlong form, surrogate, > U+10FFFF,
// or cut short).
size_t Utf8SequenceLength(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  auto in = [&](size_t i, unsigned char lo, unsigned char hi) {
    return i < s.size() && b(i) >= lo && b(i) <= hi;
  };
  unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return in(1, 0xA0, 0xBF) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return in(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // no UTF-16 surrogates
  if (c == 0xF0) return in(1, 0x90, 0xBF) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return in(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

// Text mode: the message as written, except that control characters and
// bytes that are not UTF-8 are escaped, so a value carrying a newline
// cannot forge a second log line.
void AppendTextEscaped(std::string* out, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = Utf8SequenceLength(s.substr(i));
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 1 && c >= 0x20 && c != 0x7F) {
      out->push_back(s[i]);
    } else if (n > 1) {
      out->append(s.substr(i, n));
    } else {
      n = 1;
      if (c == '\n') *out += "\\n";
      else if (c == '\r') *out += "\\r";
      else if (c == '\t') *out += "\\t";
      else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        *out += buf;
      }
    }
    i += n;
  }
}

bool KeyStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool KeyChar(char c) { return KeyStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; }

// Length of the key of a `key=` token starting at s[i], 0 if there is none.
size_t FieldKeyLength(std::string_view s, size_t i) {
  if (i >= s.size() || !KeyStart(s[i])) return 0;
  size_t j = i + 1;
  while (j < s.size() && KeyChar(s[j])) ++j;
  return j < s.size() && s[j] == '=' ? j - i : 0;
}

size_t SkipSpaces(std::string_view s, size_t i) {
  while (i < s.size() && s[i] == ' ') ++i;
  return i;
}

struct Field {
  std::string_view key;
  std::string_view value;
};

struct Message {
  std::vector<std::string_view> words;  // everything that is not a field
  std::vector<Field> fields;
};

// Index of the quote that closes a value opened at s[open]. Call sites
// write `k="{}"` without escaping the value, so a quote inside it is
// literal: prefer the first quote that is followed by the end or by another
// `key=`, else the first one followed by a space; npos when unterminated.
size_t ClosingQuote(std::string_view s, size_t open) {
  size_t fallback = std::string_view::npos;
  for (size_t k = open + 1; k < s.size(); ++k) {
    if (s[k] != '"') continue;
    if (k + 1 == s.size()) return k;
    if (s[k + 1] != ' ') continue;
    size_t p = SkipSpaces(s, k + 1);
    if (p == s.size() || FieldKeyLength(s, p) > 0) return k;
    if (fallback == std::string_view::npos) fallback = k;
  }
  return fallback;
}

Message Parse(std::string_view s) {
  Message m;
  size_t i = SkipSpaces(s, 0);
  while (i < s.size()) {
    if (size_t kl = FieldKeyLength(s, i); kl > 0) {
      Field f{s.substr(i, kl), {}};
      size_t v = i + kl + 1;
      if (v < s.size() && s[v] == '"') {
        size_t close = ClosingQuote(s, v);
        if (close == std::string_view::npos) {
          f.value = s.substr(v + 1);
          i = s.size();
        } else {
          f.value = s.substr(v + 1, close - v - 1);
          i = close + 1;
        }
      } else {
        size_t end = std::min(s.find(' ', v), s.size());
        f.value = s.substr(v, end - v);
        i = end;
      }
      m.fields.push_back(f);
    } else {
      size_t end = std::min(s.find(' ', i), s.size());
      m.words.push_back(s.substr(i, end - i));
      i = end;
    }
    i = SkipSpaces(s, i);
  }
  return m;
}

bool IsIdentifier(std::string_view w) {
  if (w.empty() || !KeyStart(w[0])) return false;
  return std::all_of(w.begin(), w.end(), KeyChar);
}

void AppendJsonPair(std::string* out, std::string_view key, std::string_view value) {
  *out += ",\"";
  AppendJsonString(out, key);
  *out += "\":\"";
  AppendJsonString(out, value);
  out->push_back('"');
}

void FormatJson(const spdlog::details::log_msg& msg, std::string* out) {
  std::string_view payload(msg.payload.data(), msg.payload.size());
  Message m = Parse(payload);
  *out += "{\"ts\":\"" + FormatRfc3339(msg.time) + "\"";
  auto level = spdlog::level::to_string_view(msg.level);
  AppendJsonPair(out, "level", std::string_view(level.data(), level.size()));
  if (m.words.size() == 1 && IsIdentifier(m.words[0])) {
    AppendJsonPair(out, "event", m.words[0]);
  } else {
    std::string text;
    for (auto w : m.words) {
      if (!text.empty()) text.push_back(' ');
      text.append(w);
    }
    AppendJsonPair(out, "msg", text);
  }
  // A field named like a fixed key, or repeated, gets a '_' suffix rather
  // than a duplicate key (which JSON parsers resolve differently).
  std::vector<std::string> used = {"ts", "level", "event", "msg"};
  for (const auto& f : m.fields) {
    std::string key(f.key);
    while (std::find(used.begin(), used.end(), key) != used.end()) key.push_back('_');
    AppendJsonPair(out, key, f.value);
    used.push_back(std::move(key));
  }
  *out += "}\n";
}

void FormatText(const spdlog::details::log_msg& msg, std::string* out) {
  auto level = spdlog::level::to_string_view(msg.level);
  *out += FormatRfc3339(msg.time);
  out->push_back(' ');
  out->append(level.data(), level.size());
  out->push_back(' ');
  AppendTextEscaped(out, std::string_view(msg.payload.data(), msg.payload.size()));
  out->push_back('\n');
}

}  // namespace

bool ParseLogFormat(std::string_view s, LogFormat* out) {
  if (s == "text") *out = LogFormat::kText;
  else if (s == "json") *out = LogFormat::kJson;
  else return false;
  return true;
}

void AppendJsonString(std::string* out, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = Utf8SequenceLength(s.substr(i));
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 0) {
      *out += "\\ufffd";
      n = 1;
    } else if (n > 1) {
      out->append(s.substr(i, n));
    } else if (c == '"') {
      *out += "\\\"";
    } else if (c == '\\') {
      *out += "\\\\";
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      *out += buf;
    } else {
      out->push_back(static_cast<char>(c));
    }
    i += n;
  }
}

void LogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  std::string line;
  line.reserve(msg.payload.size() + 64);
  if (format_ == LogFormat::kJson) FormatJson(msg, &line);
  else FormatText(msg, &line);
  dest.append(line.data(), line.data() + line.size());
}

void InstallLogFormat(LogFormat format) {
  spdlog::set_formatter(std::make_unique<LogFormatter>(format));
}

}  // namespace hutch
