#include "api/opensandbox/credential_vault.h"

#include <algorithm>
#include <map>
#include <set>

namespace hutch::api::opensandbox {

namespace {

using Json = nlohmann::json;

Error Invalid(const std::string& msg) { return MakeError(Code::kInvalidRequest, msg); }

// OpenSandbox's schemas refuse unknown fields (additionalProperties:
// false); so does hutch, naming the field.
Status OnlyFields(const Json& j, const std::string& what,
                  std::initializer_list<const char*> known) {
  if (!j.is_object()) return Invalid(what + " must be an object");
  for (const auto& item : j.items()) {
    const std::string& k = item.key();
    if (std::none_of(known.begin(), known.end(), [&k](const char* f) { return k == f; }))
      return Invalid("unknown field '" + what + "." + k + "'");
  }
  return Status{};
}

Result<std::vector<Json>> ListOf(const Json& j, const char* key, const std::string& what,
                                 bool required = false) {
  std::vector<Json> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return Invalid(what + "." + key + " is required");
    return out;
  }
  if (!it->is_array()) return Invalid(what + "." + key + " must be an array");
  out.assign(it->begin(), it->end());
  return out;
}

// {"name","source":{"type":"inline","value"}}: the only source OpenSandbox
// has. The value goes through core's checks (size, CR/LF/NUL).
Result<vault::Credential> ParseCredential(const Json& j) {
  if (auto st = OnlyFields(j, "credential", {"name", "source"}); !st.ok()) return st.error();
  auto src = j.find("source");
  if (src == j.end() || !src->is_object())
    return Invalid("credential.source must be an object {type: inline, value}");
  if (auto st = OnlyFields(*src, "credential.source", {"type", "value"}); !st.ok())
    return st.error();
  if (src->value("type", std::string("inline")) != "inline")
    return MakeError(Code::kNotSupported, "credential.source.type: only 'inline' is supported");
  Json core{{"name", j.value("name", Json())}, {"value", src->value("value", Json())}};
  if (!core["name"].is_string() || !core["value"].is_string())
    return Invalid("a credential needs a string 'name' and 'source.value'");
  return vault::ParseCredential(core, {});
}

// CredentialMatch's lists with OpenSandbox's defaults.
struct OsbMatch {
  std::vector<int> ports;
  std::vector<std::string> hosts, methods, paths;
};

Result<std::vector<std::string>> Strings(const Json& m, const char* key, const std::string& what,
                                         std::vector<std::string> dflt) {
  auto list = ListOf(m, key, what);
  if (!list.ok()) return list.error();
  if (list->empty()) return dflt;
  std::vector<std::string> out;
  for (const auto& e : *list) {
    if (!e.is_string() || e.get<std::string>().empty())
      return Invalid(what + "." + key + " must hold non-empty strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Result<OsbMatch> ParseMatch(const Json& m, const std::string& what) {
  if (auto st = OnlyFields(m, what, {"schemes", "ports", "hosts", "methods", "paths"}); !st.ok())
    return st.error();
  auto schemes = Strings(m, "schemes", what, {"https"});
  if (!schemes.ok()) return schemes.error();
  for (const auto& s : *schemes) {
    // Over plain HTTP nothing proves the peer is the bound host (core's
    // rule): hutch injects over verified TLS only.
    if (s == "http")
      return MakeError(Code::kNotSupported,
                       what + ".schemes: hutch injects credentials over https only");
    if (s != "https") return Invalid(what + ".schemes: '" + s + "' is not https or http");
  }
  OsbMatch out;
  auto ports = ListOf(m, "ports", what);
  if (!ports.ok()) return ports.error();
  for (const auto& p : *ports) {
    if (!p.is_number_integer()) return Invalid(what + ".ports must hold integers");
    out.ports.push_back(p.get<int>());
  }
  if (out.ports.empty()) out.ports = {443};
  auto hosts = Strings(m, "hosts", what, {});
  if (!hosts.ok()) return hosts.error();
  if (hosts->empty()) return Invalid(what + ".hosts must name at least one host");
  out.hosts = std::move(hosts).value();
  auto methods = Strings(m, "methods", what, {"GET", "POST", "PUT", "PATCH", "DELETE"});
  if (!methods.ok()) return methods.error();
  out.methods = std::move(methods).value();
  auto paths = Strings(m, "paths", what, {"/*"});
  if (!paths.ok()) return paths.error();
  out.paths = std::move(paths).value();
  return out;
}

// CredentialAuth as core auth objects, one per header it adds.
Result<std::vector<Json>> ParseAuth(const Json& a, const std::string& what) {
  if (!a.is_object() || !a.contains("type") || !a["type"].is_string())
    return Invalid(what + " must be an object with a string 'type'");
  const std::string type = a["type"].get<std::string>();
  auto cred = [&](const Json& from) { return from.value("credential", Json()); };
  if (type == "bearer" || type == "basic") {
    if (auto st = OnlyFields(a, what, {"type", "credential"}); !st.ok()) return st.error();
    Json core{{"type", type}, {"credential", cred(a)}};
    // OpenSandbox's basic credential is base64("user:password") already.
    if (type == "basic") core["encoded"] = true;
    return std::vector<Json>{core};
  }
  if (type == "apiKey") {
    if (auto st = OnlyFields(a, what, {"type", "name", "credential"}); !st.ok()) return st.error();
    return std::vector<Json>{
        {{"type", "header"}, {"credential", cred(a)}, {"header", a.value("name", Json())}}};
  }
  if (type == "customHeaders") {
    if (a.contains("substitutions"))
      return MakeError(Code::kNotSupported, what + ".substitutions are not supported by hutch");
    if (auto st = OnlyFields(a, what, {"type", "headers"}); !st.ok()) return st.error();
    auto headers = ListOf(a, "headers", what, true);
    if (!headers.ok()) return headers.error();
    if (headers->empty()) return Invalid(what + ".headers must name at least one header");
    std::vector<Json> out;
    for (const auto& h : *headers) {
      if (auto st = OnlyFields(h, what + ".headers[]", {"name", "credential"}); !st.ok())
        return st.error();
      out.push_back(
          {{"type", "header"}, {"credential", cred(h)}, {"header", h.value("name", Json())}});
    }
    return out;
  }
  return Invalid(what + ".type must be bearer, basic, apiKey or customHeaders");
}

// One OpenSandbox binding as its group of core bindings.
Result<std::vector<vault::Binding>> ParseBinding(const Json& j) {
  if (auto st = OnlyFields(j, "binding", {"name", "match", "auth"}); !st.ok()) return st.error();
  if (!j.contains("name") || !j["name"].is_string())
    return Invalid("a binding needs a string 'name'");
  const std::string name = j["name"].get<std::string>();
  const std::string what = "binding " + name;
  if (!j.contains("match") || !j.contains("auth"))
    return Invalid(what + ": 'match' and 'auth' are required");
  auto m = ParseMatch(j["match"], what + ".match");
  if (!m.ok()) return m.error();
  auto auths = ParseAuth(j["auth"], what + ".auth");
  if (!auths.ok()) return auths.error();
  const size_t n = m->hosts.size() * m->ports.size() * auths->size();
  std::vector<vault::Binding> out;
  for (const auto& host : m->hosts)
    for (int port : m->ports)
      for (const auto& auth : *auths) {
        const std::string member = n == 1 ? name : name + "." + std::to_string(out.size());
        Json core{{"name", member},
                  {"group", name},
                  {"match",
                   {{"scheme", "https"},
                    {"host", host},
                    {"port", port},
                    {"paths", m->paths},
                    {"methods", m->methods}}},
                  {"auth", auth}};
        auto b = vault::ParseBinding(core);
        if (!b.ok()) return b.error();
        out.push_back(std::move(b).value());
      }
  return out;
}

// The API-level name a core binding is shown under.
const std::string& GroupOf(const vault::Binding& b) { return b.group.empty() ? b.name : b.group; }

bool HasGroup(const vault::Vault& v, const std::string& group) {
  return std::any_of(v.bindings.begin(), v.bindings.end(),
                     [&](const auto& kv) { return GroupOf(kv.second) == group; });
}

void EraseGroup(vault::Vault& v, const std::string& group) {
  std::erase_if(v.bindings, [&](const auto& kv) { return GroupOf(kv.second) == group; });
}

Status AddBinding(vault::Vault& v, const Json& j, bool replace) {
  auto members = ParseBinding(j);
  if (!members.ok()) return members.error();
  const std::string group = members->front().group;
  const bool exists = HasGroup(v, group);
  if (exists && !replace) return MakeError(Code::kConflict, "binding " + group + " exists");
  if (!exists && replace) return MakeError(Code::kNotFound, "no binding " + group);
  EraseGroup(v, group);
  for (auto& b : *members) {
    if (v.bindings.count(b.name))
      return MakeError(Code::kConflict,
                       "binding " + group + ": the name " + b.name + " is another binding's");
    const std::string member = b.name;
    v.bindings.emplace(member, std::move(b));
  }
  return Status{};
}

Status AddCredential(vault::Vault& v, const Json& j, bool replace) {
  auto c = ParseCredential(j);
  if (!c.ok()) return c.error();
  const bool exists = v.credentials.count(c->name) > 0;
  if (exists && !replace) return MakeError(Code::kConflict, "credential " + c->name + " exists");
  if (!exists && replace) return MakeError(Code::kNotFound, "no credential " + c->name);
  const std::string name = c->name;
  v.credentials[name] = std::move(c).value();
  return Status{};
}

Status CheckCredentials(const vault::Vault& v) {
  for (const auto& [name, b] : v.bindings)
    if (!v.credentials.count(b.auth.credential))
      return Invalid("binding " + GroupOf(b) + ": no credential named '" + b.auth.credential + "'");
  return Status{};
}

Result<std::vector<std::string>> Names(const Json& set, const std::string& what) {
  auto list = ListOf(set, "delete", what);
  if (!list.ok()) return list.error();
  std::vector<std::string> out;
  for (const auto& e : *list) {
    if (!e.is_string()) return Invalid(what + ".delete must hold names");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Json CredentialJson(const vault::Vault& v, const std::string& name) {
  return {{"name", name}, {"sourceType", "inline"}, {"revision", v.revision}};
}

// A group folded back into CredentialBindingMetadata.
Json GroupJson(const vault::Vault& v, const std::string& group) {
  Json hosts = Json::array(), ports = Json::array();
  std::set<std::string> header_names;
  const vault::Binding* first = nullptr;
  for (const auto& [name, b] : v.bindings) {
    if (GroupOf(b) != group) continue;
    if (!first) first = &b;
    if (std::find(hosts.begin(), hosts.end(), b.match.host) == hosts.end())
      hosts.push_back(b.match.host);
    if (std::find(ports.begin(), ports.end(), b.match.port) == ports.end())
      ports.push_back(b.match.port);
    header_names.insert(b.auth.name);
  }
  Json auth;
  switch (first->auth.kind) {
    case vault::AuthKind::kBearer:
    case vault::AuthKind::kBasic:
      auth = {{"type", vault::AuthKindName(first->auth.kind)}};
      break;
    case vault::AuthKind::kHeader:
      auth = header_names.size() == 1 ? Json{{"type", "apiKey"}, {"name", first->auth.name}}
                                      : Json{{"type", "customHeaders"}};
      break;
    case vault::AuthKind::kQuery:  // a /v1 binding: no OpenSandbox form
      auth = {{"type", "query"}, {"name", first->auth.name}};
      break;
  }
  return {{"name", group},
          {"revision", v.revision},
          {"match",
           {{"schemes", {"https"}},
            {"ports", ports},
            {"hosts", hosts},
            {"methods", first->match.methods},
            {"paths", first->match.paths}}},
          {"auth", auth}};
}

}  // namespace

Result<vault::Vault> ParseVaultCreate(const Json& j) {
  if (auto st = OnlyFields(j, "request", {"credentials", "bindings"}); !st.ok()) return st.error();
  vault::Vault v;
  auto creds = ListOf(j, "credentials", "request");
  if (!creds.ok()) return creds.error();
  for (const auto& c : *creds)
    if (auto st = AddCredential(v, c, false); !st.ok()) return st.error();
  auto binds = ListOf(j, "bindings", "request");
  if (!binds.ok()) return binds.error();
  for (const auto& b : *binds)
    if (auto st = AddBinding(v, b, false); !st.ok()) return st.error();
  if (auto st = CheckCredentials(v); !st.ok()) return st.error();
  return v;
}

Result<vault::Vault> ApplyVaultPatch(const vault::Vault& cur, const Json& j) {
  if (auto st = OnlyFields(j, "request", {"expectedRevision", "credentials", "bindings"}); !st.ok())
    return st.error();
  if (auto it = j.find("expectedRevision"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return Invalid("expectedRevision must be an integer");
    if (it->get<int64_t>() != cur.revision)
      return MakeError(Code::kConflict, "expectedRevision " + std::to_string(it->get<int64_t>()) +
                                            " is not the vault's revision " +
                                            std::to_string(cur.revision));
  }
  vault::Vault v = cur;
  const Json none = Json::object();
  const Json& creds =
      j.contains("credentials") && !j["credentials"].is_null() ? j["credentials"] : none;
  const Json& binds = j.contains("bindings") && !j["bindings"].is_null() ? j["bindings"] : none;
  for (const auto& [set, what] : {std::pair{&creds, "credentials"}, std::pair{&binds, "bindings"}})
    if (auto st = OnlyFields(*set, what, {"add", "replace", "delete"}); !st.ok()) return st.error();
  // Bindings go first, so one patch can drop a binding and the credential
  // it used, or add a credential and the binding that uses it.
  auto dropped = Names(binds, "bindings");
  if (!dropped.ok()) return dropped.error();
  for (const auto& name : *dropped) {
    if (!HasGroup(v, name)) return MakeError(Code::kNotFound, "no binding " + name);
    EraseGroup(v, name);
  }
  for (const auto& [key, replace] : {std::pair{"add", false}, std::pair{"replace", true}}) {
    auto list = ListOf(creds, key, "credentials");
    if (!list.ok()) return list.error();
    for (const auto& c : *list)
      if (auto st = AddCredential(v, c, replace); !st.ok()) return st.error();
  }
  for (const auto& [key, replace] : {std::pair{"add", false}, std::pair{"replace", true}}) {
    auto list = ListOf(binds, key, "bindings");
    if (!list.ok()) return list.error();
    for (const auto& b : *list)
      if (auto st = AddBinding(v, b, replace); !st.ok()) return st.error();
  }
  auto gone = Names(creds, "credentials");
  if (!gone.ok()) return gone.error();
  for (const auto& name : *gone)
    if (!v.credentials.erase(name)) return MakeError(Code::kNotFound, "no credential " + name);
  if (auto st = CheckCredentials(v); !st.ok()) return st.error();
  return v;
}

Json VaultStateJson(const vault::Vault& v) {
  Json creds = Json::array(), binds = Json::array();
  for (const auto& [name, c] : v.credentials) creds.push_back(CredentialJson(v, name));
  std::set<std::string> seen;
  for (const auto& [name, b] : v.bindings)
    if (seen.insert(GroupOf(b)).second) binds.push_back(GroupJson(v, GroupOf(b)));
  return {{"revision", v.revision}, {"credentials", creds}, {"bindings", binds}};
}

std::optional<Json> CredentialMetadata(const vault::Vault& v, const std::string& name) {
  if (!v.credentials.count(name)) return std::nullopt;
  return CredentialJson(v, name);
}

std::optional<Json> BindingMetadata(const vault::Vault& v, const std::string& name) {
  if (!HasGroup(v, name)) return std::nullopt;
  return GroupJson(v, name);
}

}  // namespace hutch::api::opensandbox
