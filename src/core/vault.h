// A sandbox's credential vault (issue 26; docs/security.md "Credential
// vault"): credentials (a name and a secret value) and bindings (which
// outbound requests get which credential, and how). A plain value with its
// parsing and matching rules; VaultBook (vault_book.h) keeps one per
// sandbox, sealed at rest, and the egress proxy asks it what to add.
//
// The secret travels one way: in through the API (or from a host source
// the operator named), out only to the bound host on the wire. Nothing
// here formats a value into an error, a log line or a read: ToViewJson
// shows names and bindings only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hutch::vault {

struct Credential {
  std::string name;
  std::string value;  // the secret: never in a read, a log or an error
};

enum class AuthKind { kBearer, kBasic, kHeader, kQuery };
const char* AuthKindName(AuthKind k);

// How a matching request carries the credential.
struct BindingAuth {
  AuthKind kind = AuthKind::kBearer;
  std::string credential;  // a Credential's name
  std::string name;        // kHeader: the header; kQuery: the parameter
  std::string username;    // kBasic: user (the credential is the password);
                           // empty: the credential is "user:password"
  bool encoded = false;    // kBasic: the credential is already
                           // base64("user:password") (OpenSandbox's form)
};

// Which requests a binding applies to. Empty lists match anything.
struct BindingMatch {
  std::string scheme = "https";  // the only one (see ParseBinding)
  std::string host;              // normalized; "*.example.com": below it
  int port = 443;
  std::vector<std::string> paths;    // fnmatch globs ('*' crosses '/')
  std::vector<std::string> methods;  // upper case
};

struct Binding {
  std::string name;
  BindingMatch match;
  BindingAuth auth;
  // The API-level binding this one was expanded from, when a dialect's
  // binding names several hosts, ports or headers (OpenSandbox's lists,
  // customHeaders): a request gets every matching binding of the group of
  // the first binding it matches. Empty: a group of its own.
  std::string group;
};

struct Vault {
  std::map<std::string, Credential> credentials;  // by name
  std::map<std::string, Binding> bindings;        // by name
  // Counts the stored changes (VaultBook sets it): OpenSandbox's revision
  // and its expectedRevision guard.
  int64_t revision = 0;
  bool empty() const { return credentials.empty() && bindings.empty(); }
  // Names and bindings, never values: what every read API answers.
  nlohmann::json ToViewJson() const;
};

// What an operator lets API callers name instead of a value
// (`--vault-source NAME=file:/path` or `NAME=env:VAR`): the only way a
// credential comes from the host, so a caller cannot read an arbitrary
// host file or variable through the vault.
struct HostSource {
  enum Kind { kFile, kEnv } kind = kFile;
  std::string where;  // the path or the variable
};
using HostSources = std::map<std::string, HostSource>;
// "NAME=file:/path" or "NAME=env:VAR".
Result<std::pair<std::string, HostSource>> ParseHostSource(const std::string& spec);
// Reads the source's value now. The error names the source, not its value.
Result<std::string> ReadHostSource(const std::string& name, const HostSource& src);

// Strict readers of the API's JSON. A credential is {"name","value"} or
// {"name","source"} (a HostSources name); errors never quote a value.
Result<Credential> ParseCredential(const nlohmann::json& j, const HostSources& sources);
// {"name","match":{scheme,host,port,paths,methods},"auth":{type,credential,
// header|param,username}}. The scheme is https (http is not_supported:
// nothing would prove the peer is the bound host); the port 443 unless
// given.
Result<Binding> ParseBinding(const nlohmann::json& j);
nlohmann::json BindingToJson(const Binding& b);
// {"credentials":[...],"bindings":[...]}: every binding must name a
// credential of the same vault.
Result<Vault> ParseVault(const nlohmann::json& j, const HostSources& sources);
// A binding's credential exists in `v` (invalid_request otherwise).
Status CheckBindingCredential(const Vault& v, const Binding& b);

// One outbound request as the egress proxy sees it.
struct RequestFacts {
  std::string scheme;  // "http" or "https"
  std::string host;    // normalized
  int port = 0;
  std::string method;
  std::string path;  // without the query
};

// What to add to a matching request: a header (replacing any the sandbox
// sent under that name) or a query parameter.
struct Injection {
  bool query = false;
  std::string name;
  std::string value;  // the secret, formatted for its place
};

// What the first binding (in name order) that matches `r` and whose
// credential exists adds, with every other matching binding of its group;
// empty when none matches.
std::vector<Injection> MatchRequest(const Vault& v, const RequestFacts& r);
// Whether any binding could match a request to host:port under `scheme`:
// the egress proxy interposes on a TLS connection only then, and splices
// every other one through untouched.
bool HostIsBound(const Vault& v, const std::string& scheme, const std::string& host, int port);

// The egress proxy's CA goes into the sandbox's system bundle; these
// variables point the runtimes with a store of their own (Python requests,
// Node, OpenSSL, curl) at it. Set at the create of a sandbox that will
// have a vault; a variable the caller set wins.
void AddTrustStoreEnv(std::map<std::string, std::string>& env);

}  // namespace hutch::vault
