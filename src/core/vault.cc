#include "core/vault.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/base64.h"
#include "net/dns_pattern.h"

namespace hutch::vault {

namespace {

constexpr size_t kMaxValueBytes = 16 << 10;
constexpr size_t kMaxNameBytes = 128;

Error Invalid(const std::string& msg) { return MakeError(Code::kInvalidRequest, msg); }

// Names of credentials, bindings and sources: what logs and errors may
// show, so they stay plain.
Status CheckName(const std::string& what, const std::string& n) {
  if (n.empty() || n.size() > kMaxNameBytes) return Invalid(what + " name must be 1-128 bytes");
  for (unsigned char c : n)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.'))
      return Invalid(what + " name '" + n + "' may hold only letters, digits, '-', '_' and '.'");
  return Status{};
}

// A string field that must be there (`optional` false) or may be absent.
Result<std::string> StringField(const nlohmann::json& j, const char* key, const std::string& what,
                                bool optional = true) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (optional) return std::string();
    return Invalid(what + ": '" + key + "' is required");
  }
  if (!it->is_string()) return Invalid(what + ": '" + key + "' must be a string");
  return it->get<std::string>();
}

Result<std::vector<std::string>> StringList(const nlohmann::json& j, const char* key,
                                            const std::string& what) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) return Invalid(what + ": '" + key + "' must be an array of strings");
  for (const auto& e : *it) {
    if (!e.is_string() || e.get<std::string>().empty())
      return Invalid(what + ": '" + key + "' must be an array of non-empty strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Status CheckHeaderName(const std::string& what, const std::string& n) {
  if (n.empty()) return Invalid(what + ": a header name is required");
  for (unsigned char c : n)
    if (!(std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string::npos))
      return Invalid(what + ": '" + n + "' is not a header name");
  return Status{};
}

// A header or query value may not carry CR, LF or NUL: the proxy writes it
// into a request line or header, where those would split it.
Status CheckValueBytes(const std::string& cred, const std::string& v) {
  if (v.empty()) return Invalid("credential " + cred + ": the value is empty");
  if (v.size() > kMaxValueBytes)
    return Invalid("credential " + cred + ": the value is over 16 KiB");
  if (v.find_first_of(std::string("\r\n\0", 3)) != std::string::npos)
    return Invalid("credential " + cred + ": the value holds CR, LF or NUL");
  return Status{};
}

Result<BindingMatch> ParseMatch(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) return Invalid(what + ": 'match' must be an object");
  BindingMatch m;
  auto scheme = StringField(j, "scheme", what);
  if (!scheme.ok()) return scheme.error();
  m.scheme = *scheme;
  std::transform(m.scheme.begin(), m.scheme.end(), m.scheme.begin(), ::tolower);
  // Over plain HTTP nothing proves the peer is the bound host (a sandbox
  // could name it in Host and connect anywhere): credentials go over
  // verified TLS only.
  if (m.scheme == "http")
    return MakeError(Code::kNotSupported,
                     what +
                         ": credentials are injected over https only (plain http cannot "
                         "prove the destination is the bound host)");
  if (!m.scheme.empty() && m.scheme != "https") return Invalid(what + ": scheme must be https");
  m.scheme = "https";
  auto host = StringField(j, "host", what, false);
  if (!host.ok()) return host.error();
  auto pattern = net::NormalizeDomainPattern(*host);
  if (!pattern.ok()) return pattern.error().Context(what);
  m.host = *pattern;
  if (auto it = j.find("port"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 65535)
      return Invalid(what + ": port must be 1-65535");
    m.port = it->get<int>();
  } else {
    m.port = 443;
  }
  auto paths = StringList(j, "paths", what);
  if (!paths.ok()) return paths.error();
  for (const auto& p : *paths)
    if (p[0] != '/' && p != "*") return Invalid(what + ": path '" + p + "' must start with '/'");
  m.paths = std::move(paths).value();
  auto methods = StringList(j, "methods", what);
  if (!methods.ok()) return methods.error();
  for (auto& meth : *methods) std::transform(meth.begin(), meth.end(), meth.begin(), ::toupper);
  m.methods = std::move(methods).value();
  return m;
}

Result<BindingAuth> ParseAuth(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) return Invalid(what + ": 'auth' must be an object");
  BindingAuth a;
  auto type = StringField(j, "type", what, false);
  if (!type.ok()) return type.error();
  if (*type == "bearer") a.kind = AuthKind::kBearer;
  else if (*type == "basic") a.kind = AuthKind::kBasic;
  else if (*type == "header") a.kind = AuthKind::kHeader;
  else if (*type == "query") a.kind = AuthKind::kQuery;
  else return Invalid(what + ": auth type must be bearer, basic, header or query");
  auto cred = StringField(j, "credential", what, false);
  if (!cred.ok()) return cred.error();
  a.credential = *cred;
  if (auto st = CheckName("credential", a.credential); !st.ok()) return st.error().Context(what);
  if (a.kind == AuthKind::kHeader) {
    auto h = StringField(j, "header", what, false);
    if (!h.ok()) return h.error();
    if (auto st = CheckHeaderName(what, *h); !st.ok()) return st.error();
    a.name = *h;
  } else if (a.kind == AuthKind::kQuery) {
    auto p = StringField(j, "param", what, false);
    if (!p.ok()) return p.error();
    if (auto st = CheckName("query parameter", *p); !st.ok()) return st.error().Context(what);
    a.name = *p;
  } else if (a.kind == AuthKind::kBasic) {
    auto u = StringField(j, "username", what);
    if (!u.ok()) return u.error();
    if (u->find_first_of(":\r\n") != std::string::npos)
      return Invalid(what + ": username may not hold ':' or line breaks");
    a.username = *u;
    if (auto e = j.find("encoded"); e != j.end() && !e->is_null()) {
      if (!e->is_boolean()) return Invalid(what + ": 'encoded' must be a boolean");
      a.encoded = e->get<bool>();
    }
    if (a.encoded && !a.username.empty())
      return Invalid(what + ": an encoded credential holds the username already");
  }
  return a;
}

bool PathMatches(const std::vector<std::string>& globs, const std::string& path) {
  if (globs.empty()) return true;
  for (const auto& g : globs)
    if (fnmatch(g.c_str(), path.c_str(), 0) == 0) return true;
  return false;
}

bool SchemePortMatch(const BindingMatch& m, const std::string& scheme, int port) {
  if (!m.scheme.empty() && m.scheme != scheme) return false;
  return m.port == 0 || m.port == port;
}

std::string InjectedValue(const BindingAuth& a, const std::string& secret) {
  switch (a.kind) {
    case AuthKind::kBearer:
      return "Bearer " + secret;
    case AuthKind::kBasic:
      if (a.encoded) return "Basic " + secret;
      return "Basic " + Base64Encode(a.username.empty() ? secret : a.username + ":" + secret);
    case AuthKind::kHeader:
    case AuthKind::kQuery:
      break;
  }
  return secret;
}

}  // namespace

const char* AuthKindName(AuthKind k) {
  switch (k) {
    case AuthKind::kBearer:
      return "bearer";
    case AuthKind::kBasic:
      return "basic";
    case AuthKind::kHeader:
      return "header";
    case AuthKind::kQuery:
      return "query";
  }
  return "bearer";
}

Result<std::pair<std::string, HostSource>> ParseHostSource(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos)
    return Invalid("vault source '" + spec + "' is not NAME=file:PATH or NAME=env:VAR");
  std::string name = spec.substr(0, eq), rest = spec.substr(eq + 1);
  if (auto st = CheckName("vault source", name); !st.ok()) return st.error();
  HostSource src;
  if (rest.rfind("file:", 0) == 0) {
    src.kind = HostSource::kFile;
    src.where = rest.substr(5);
  } else if (rest.rfind("env:", 0) == 0) {
    src.kind = HostSource::kEnv;
    src.where = rest.substr(4);
  } else {
    return Invalid("vault source " + name + " must be file:PATH or env:VAR");
  }
  if (src.where.empty()) return Invalid("vault source " + name + " names no file or variable");
  return std::make_pair(name, src);
}

Result<std::string> ReadHostSource(const std::string& name, const HostSource& src) {
  std::string v;
  if (src.kind == HostSource::kEnv) {
    const char* e = std::getenv(src.where.c_str());
    if (!e)
      return MakeError(Code::kUnavailable, "vault source " + name + ": its variable is unset");
    v = e;
  } else {
    std::ifstream in(src.where, std::ios::binary);
    if (!in)
      return MakeError(Code::kUnavailable, "vault source " + name + ": its file is unreadable");
    std::stringstream ss;
    ss << in.rdbuf();
    v = ss.str();
    // A file written by an editor or `echo` ends in a newline that is not
    // part of the secret.
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  }
  return v;
}

Result<Credential> ParseCredential(const nlohmann::json& j, const HostSources& sources) {
  if (!j.is_object()) return Invalid("a credential must be an object");
  auto name = StringField(j, "name", "credential", false);
  if (!name.ok()) return name.error();
  if (auto st = CheckName("credential", *name); !st.ok()) return st.error();
  const std::string what = "credential " + *name;
  auto value = StringField(j, "value", what);
  auto source = StringField(j, "source", what);
  if (!value.ok()) return value.error();
  if (!source.ok()) return source.error();
  if (value->empty() == source->empty())
    return Invalid(what + ": give exactly one of 'value' and 'source'");
  Credential c{*name, *value};
  if (!source->empty()) {
    auto it = sources.find(*source);
    if (it == sources.end())
      return Invalid(what + ": no vault source '" + *source +
                     "' on this server (the operator names them with --vault-source)");
    auto v = ReadHostSource(it->first, it->second);
    if (!v.ok()) return v.error().Context(what);
    c.value = std::move(v).value();
  }
  if (auto st = CheckValueBytes(*name, c.value); !st.ok()) return st.error();
  return c;
}

Result<Binding> ParseBinding(const nlohmann::json& j) {
  if (!j.is_object()) return Invalid("a binding must be an object");
  auto name = StringField(j, "name", "binding", false);
  if (!name.ok()) return name.error();
  if (auto st = CheckName("binding", *name); !st.ok()) return st.error();
  const std::string what = "binding " + *name;
  auto m = j.find("match");
  auto a = j.find("auth");
  if (m == j.end() || a == j.end()) return Invalid(what + ": 'match' and 'auth' are required");
  auto match = ParseMatch(*m, what);
  if (!match.ok()) return match.error();
  auto auth = ParseAuth(*a, what);
  if (!auth.ok()) return auth.error();
  auto group = StringField(j, "group", what);
  if (!group.ok()) return group.error();
  if (!group->empty())
    if (auto st = CheckName("binding group", *group); !st.ok()) return st.error().Context(what);
  return Binding{*name, std::move(match).value(), std::move(auth).value(), *group};
}

nlohmann::json BindingToJson(const Binding& b) {
  nlohmann::json m{{"scheme", b.match.scheme},
                   {"host", b.match.host},
                   {"port", b.match.port},
                   {"paths", b.match.paths},
                   {"methods", b.match.methods}};
  nlohmann::json a{{"type", AuthKindName(b.auth.kind)}, {"credential", b.auth.credential}};
  if (b.auth.kind == AuthKind::kHeader) a["header"] = b.auth.name;
  if (b.auth.kind == AuthKind::kQuery) a["param"] = b.auth.name;
  if (b.auth.kind == AuthKind::kBasic && !b.auth.username.empty()) a["username"] = b.auth.username;
  if (b.auth.kind == AuthKind::kBasic && b.auth.encoded) a["encoded"] = true;
  nlohmann::json out{{"name", b.name}, {"match", m}, {"auth", a}};
  if (!b.group.empty()) out["group"] = b.group;
  return out;
}

nlohmann::json Vault::ToViewJson() const {
  nlohmann::json creds = nlohmann::json::array(), binds = nlohmann::json::array();
  for (const auto& [name, c] : credentials) creds.push_back({{"name", name}});
  for (const auto& [name, b] : bindings) binds.push_back(BindingToJson(b));
  return {{"credentials", creds}, {"bindings", binds}};
}

Status CheckBindingCredential(const Vault& v, const Binding& b) {
  if (v.credentials.count(b.auth.credential)) return Status{};
  return Invalid("binding " + b.name + ": no credential named '" + b.auth.credential + "'");
}

Result<Vault> ParseVault(const nlohmann::json& j, const HostSources& sources) {
  if (!j.is_object()) return Invalid("vault must be an object");
  Vault v;
  for (const char* key : {"credentials", "bindings"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_array()) return Invalid(std::string("vault: '") + key + "' must be an array");
    for (const auto& e : *it) {
      if (key[0] == 'c') {
        auto c = ParseCredential(e, sources);
        if (!c.ok()) return c.error();
        if (!v.credentials.emplace(c->name, *c).second)
          return Invalid("vault: credential " + c->name + " is given twice");
      } else {
        auto b = ParseBinding(e);
        if (!b.ok()) return b.error();
        if (!v.bindings.emplace(b->name, *b).second)
          return Invalid("vault: binding " + b->name + " is given twice");
      }
    }
  }
  for (const auto& [name, b] : v.bindings)
    if (auto st = CheckBindingCredential(v, b); !st.ok()) return st.error();
  return v;
}

namespace {

bool RequestMatches(const BindingMatch& m, const RequestFacts& r) {
  if (!SchemePortMatch(m, r.scheme, r.port) || !net::DomainPatternMatches(m.host, r.host))
    return false;
  if (!m.methods.empty() &&
      std::find(m.methods.begin(), m.methods.end(), r.method) == m.methods.end())
    return false;
  return PathMatches(m.paths, r.path);
}

}  // namespace

std::vector<Injection> MatchRequest(const Vault& v, const RequestFacts& r) {
  std::vector<Injection> out;
  const Binding* first = nullptr;
  for (const auto& [name, b] : v.bindings) {
    if (first && (first->group.empty() || b.group != first->group)) continue;
    if (!RequestMatches(b.match, r)) continue;
    auto c = v.credentials.find(b.auth.credential);
    if (c == v.credentials.end()) continue;
    if (!first) first = &b;
    Injection inj;
    inj.query = b.auth.kind == AuthKind::kQuery;
    inj.name = (b.auth.kind == AuthKind::kBearer || b.auth.kind == AuthKind::kBasic)
                   ? "Authorization"
                   : b.auth.name;
    inj.value = InjectedValue(b.auth, c->second.value);
    out.push_back(std::move(inj));
  }
  return out;
}

bool HostIsBound(const Vault& v, const std::string& scheme, const std::string& host, int port) {
  for (const auto& [name, b] : v.bindings)
    if (SchemePortMatch(b.match, scheme, port) && net::DomainPatternMatches(b.match.host, host))
      return true;
  return false;
}

void AddTrustStoreEnv(std::map<std::string, std::string>& env) {
  for (const char* var :
       {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"})
    env.emplace(var, "/etc/ssl/certs/ca-certificates.crt");
}

}  // namespace hutch::vault
