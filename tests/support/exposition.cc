#include "tests/support/exposition.h"

#include <cmath>
#include <cstdlib>
#include <set>

namespace hutch::testing {

namespace {

bool NameStart(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
bool NameChar(char c, bool colon) { return NameStart(c, colon) || (c >= '0' && c <= '9'); }

// Reads a metric (colon=true) or label name at s[*i].
bool ReadName(const std::string& s, size_t* i, bool colon, std::string* out) {
  size_t j = *i;
  if (j >= s.size() || !NameStart(s[j], colon)) return false;
  while (j < s.size() && NameChar(s[j], colon)) ++j;
  *out = s.substr(*i, j - *i);
  *i = j;
  return true;
}

bool ParseValue(const std::string& tok, double* out) {
  if (tok == "+Inf" || tok == "Inf") *out = INFINITY;
  else if (tok == "-Inf") *out = -INFINITY;
  else if (tok == "NaN") *out = NAN;
  else {
    if (tok.empty()) return false;
    char* end = nullptr;
    *out = std::strtod(tok.c_str(), &end);
    // strtod also takes "inf"/"nan"/hex floats, which Prometheus does not.
    for (char c : tok)
      if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
        return false;
    if (*end != '\0') return false;
  }
  return true;
}

std::string Family(const std::string& name, const std::map<std::string, std::string>& types) {
  if (types.count(name)) return name;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string sfx = suffix;
    if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
      std::string base = name.substr(0, name.size() - sfx.size());
      auto it = types.find(base);
      if (it != types.end() &&
          (it->second == "histogram" || (it->second == "summary" && sfx != "_bucket")))
        return base;
    }
  }
  return name;
}

std::string ParseSample(const std::string& line, PromSample* s) {
  size_t i = 0;
  if (!ReadName(line, &i, true, &s->name)) return "bad metric name";
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      std::string lname;
      if (!ReadName(line, &i, false, &lname)) return "bad label name";
      if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
        return "expected =\" after label name";
      i += 2;
      std::string value;
      bool closed = false;
      while (i < line.size()) {
        char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i >= line.size()) return "dangling backslash";
          char e = line[i++];
          if (e == '\\') value.push_back('\\');
          else if (e == '"') value.push_back('"');
          else if (e == 'n') value.push_back('\n');
          else return std::string("invalid escape \\") + e + " in label value";
        } else {
          value.push_back(c);
        }
      }
      if (!closed) return "unterminated label value";
      if (!s->labels.emplace(lname, value).second) return "duplicate label " + lname;
      if (i < line.size() && line[i] == ',') ++i;
      else if (i < line.size() && line[i] == '}') continue;
      else return "expected , or } after label";
    }
  }
  if (i >= line.size() || (line[i] != ' ' && line[i] != '\t'))
    return "expected a blank before the value";
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  size_t end = line.find_first_of(" \t", i);
  std::string tok = line.substr(i, end == std::string::npos ? std::string::npos : end - i);
  if (!ParseValue(tok, &s->value)) return "bad sample value '" + tok + "'";
  if (end != std::string::npos) {
    size_t t = line.find_first_not_of(" \t", end);
    if (t != std::string::npos) {
      std::string ts = line.substr(t);
      for (size_t k = 0; k < ts.size(); ++k)
        if (!((ts[k] >= '0' && ts[k] <= '9') || (k == 0 && ts[k] == '-')))
          return "bad timestamp '" + ts + "'";
    }
  }
  return "";
}

std::string CheckHistograms(const PromParse& p) {
  for (const auto& [family, type] : p.types) {
    if (type != "histogram") continue;
    // Series key: labels without le.
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    std::map<std::map<std::string, std::string>, double> counts, sums;
    for (const auto& s : p.samples) {
      auto key = s.labels;
      if (s.name == family + "_bucket") {
        auto le = key.find("le");
        if (le == key.end()) return family + "_bucket without le";
        double bound;
        if (!ParseValue(le->second, &bound)) return family + " bad le '" + le->second + "'";
        key.erase(le);
        buckets[key].emplace_back(bound, s.value);
      } else if (s.name == family + "_count") {
        counts[key] = s.value;
      } else if (s.name == family + "_sum") {
        sums[key] = s.value;
      } else if (s.name == family) {
        return "histogram " + family + " has a bare sample";
      }
    }
    for (const auto& [key, bs] : buckets) {
      for (size_t i = 1; i < bs.size(); ++i) {
        if (!(bs[i].first > bs[i - 1].first)) return family + ": le not increasing";
        if (bs[i].second < bs[i - 1].second) return family + ": buckets not cumulative";
      }
      if (bs.empty() || !std::isinf(bs.back().first)) return family + ": no le=\"+Inf\" bucket";
      if (!counts.count(key) || !sums.count(key)) return family + ": missing _count or _sum";
      if (counts[key] != bs.back().second) return family + ": +Inf bucket differs from _count";
    }
  }
  return "";
}

}  // namespace

std::optional<double> PromParse::Value(const std::string& name,
                                       const std::map<std::string, std::string>& labels) const {
  for (const auto& s : samples)
    if (s.name == name && s.labels == labels) return s.value;
  return std::nullopt;
}

PromParse ParseExposition(const std::string& text) {
  PromParse p;
  if (!text.empty() && text.back() != '\n') {
    p.error = "text does not end with a line feed";
    return p;
  }
  static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                               "untyped"};
  std::set<std::string> sampled, helped;
  std::set<std::pair<std::string, std::map<std::string, std::string>>> seen;
  size_t pos = 0;
  int lineno = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    auto fail = [&](const std::string& why) {
      p.error = "line " + std::to_string(lineno) + ": " + why + ": " + line;
      return p;
    };
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line.rfind("# HELP ", 0) != 0 && line.rfind("# TYPE ", 0) != 0)
        continue;  // a plain comment
      bool is_type = line[2] == 'T';
      size_t i = 7;
      std::string name;
      if (!ReadName(line, &i, true, &name)) return fail("bad name in comment");
      std::string rest;
      if (i < line.size()) {
        if (line[i] != ' ') return fail("expected a blank after the name");
        rest = line.substr(i + 1);
      }
      if (is_type) {
        if (!kTypes.count(rest)) return fail("unknown type");
        if (p.types.count(name)) return fail("second TYPE for " + name);
        if (sampled.count(name)) return fail("TYPE after samples of " + name);
        p.types[name] = rest;
      } else {
        if (!helped.insert(name).second) return fail("second HELP for " + name);
        for (size_t k = 0; k < rest.size(); ++k)
          if (rest[k] == '\\' &&
              (k + 1 >= rest.size() || (rest[k + 1] != '\\' && rest[k + 1] != 'n')))
            return fail("invalid escape in HELP");
          else if (rest[k] == '\\') ++k;
      }
      continue;
    }
    PromSample s;
    if (auto err = ParseSample(line, &s); !err.empty()) return fail(err);
    if (!seen.insert({s.name, s.labels}).second) return fail("duplicate sample");
    sampled.insert(Family(s.name, p.types));
    p.samples.push_back(std::move(s));
  }
  p.error = CheckHistograms(p);
  return p;
}

}  // namespace hutch::testing
