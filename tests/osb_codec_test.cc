// The OpenSandbox dialect's pure parts: FileInfo modes as octal digits,
// passwd/group parsing, the session protocol's sentinel lines, the egress
// policy mapping, the image table's defaults, the Credential Vault's wire
// form onto core/vault. (The SDK itself is driven by
// tests/compat/opensandbox.)
#include <gtest/gtest.h>

#include "api/common/json_fields.h"
#include "api/opensandbox/credential_vault.h"
#include "api/opensandbox/env_file.h"
#include "api/opensandbox/file_info.h"
#include "api/opensandbox/image_table.h"
#include "api/opensandbox/network_policy.h"
#include "api/opensandbox/session_protocol.h"

namespace hutch::api::opensandbox {
namespace {

// The code-interpreter image under the tags the SDKs' READMEs use (the
// 1.1 Python SDK's is v1.1.0), any later tag, and untagged as :latest.
TEST(ImageTableDefaults, CodeInterpreterTagsMapToTheTemplate) {
  const ImageTable t = ImageTable::Defaults();
  for (const char* img :
       {"opensandbox/code-interpreter:latest", "opensandbox/code-interpreter:v1.0.1",
        "opensandbox/code-interpreter:v1.1.0", "opensandbox/code-interpreter",
        "opensandbox/code-interpreter:v9"}) {
    auto r = t.Resolve(img);
    ASSERT_TRUE(r.ok()) << img << ": " << r.error().message;
    EXPECT_EQ(*r, "code-interpreter") << img;
  }
  EXPECT_FALSE(t.Resolve("opensandbox/other:v1").ok());
  EXPECT_FALSE(t.Resolve("someone/code-interpreter:v1").ok());
}

// execd's line-based download: 1-based offset, a line count, line ends
// kept, a last line without one, and nothing past the end.
TEST(SliceLines, OffsetAndLimitCountLines) {
  const std::string t = "l1\nl2\nl3\nl4";
  EXPECT_EQ(SliceLines(t, 2, 2), "l2\nl3\n");
  EXPECT_EQ(SliceLines(t, 1, std::nullopt), t);
  EXPECT_EQ(SliceLines(t, 4, std::nullopt), "l4");
  EXPECT_EQ(SliceLines(t, 3, 10), "l3\nl4");
  EXPECT_EQ(SliceLines(t, 1, 0), "");
  EXPECT_EQ(SliceLines(t, 9, 1), "");
  EXPECT_EQ(SliceLines("", 1, 1), "");
  EXPECT_EQ(SliceLines("a\n\nb\n", 2, 1), "\n");
}

// The env file commands.set_env appends to, in both of the SDKs' forms:
// single quotes literal (a newline inside too), double quotes with
// escapes and no expansion; the last entry of a key wins.
TEST(ParseEnvFile, TheSdksFormsAndTheLastEntryWins) {
  const auto env = ParseEnvFile(
      "A='plain value'\n"
      "B=\"it's \\\"q\\\" \\$HOME\\n\\tx\\\\\"\n"
      "# a comment\n"
      "\n"
      "export C=bare  \r\n"
      "M='two\nlines'\n"
      "A='again'\n"
      "9BAD=x\n"
      "no equals\n"
      "E=\n");
  EXPECT_EQ(env.at("A"), "again");
  EXPECT_EQ(env.at("B"), "it's \"q\" $HOME\n\tx\\");
  EXPECT_EQ(env.at("C"), "bare");
  EXPECT_EQ(env.at("M"), "two\nlines");
  EXPECT_EQ(env.at("E"), "");
  EXPECT_EQ(env.count("9BAD"), 0U);
  EXPECT_EQ(env.size(), 5U);
  EXPECT_TRUE(ParseEnvFile("").empty());
}

TEST(FileInfoMode, OctalDigitsReadAsDecimal) {
  EXPECT_EQ(OctalDigits(0755), 755);
  EXPECT_EQ(OctalDigits(0644), 644);
  EXPECT_EQ(OctalDigits(04755), 4755);
  EXPECT_EQ(OctalDigits(0), 0);
  EXPECT_EQ(OctalDigits(07), 7);
}

TEST(FileInfoMode, DigitsBackToModeAndRejectsNonOctal) {
  EXPECT_EQ(ModeFromOctalDigits(755).value(), 0755);
  EXPECT_EQ(ModeFromOctalDigits(600).value(), 0600);
  EXPECT_EQ(ModeFromOctalDigits(0).value(), 0);
  EXPECT_FALSE(ModeFromOctalDigits(758).ok());
  EXPECT_FALSE(ModeFromOctalDigits(-1).ok());
  EXPECT_FALSE(ModeFromOctalDigits(17777).ok());
}

TEST(IdNames, ParsesPasswdAndResolvesBothWays) {
  IdNames n;
  n.users = IdNames::Parse(
      "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\nbad line\n");
  n.groups = IdNames::Parse("root:x:0:\nusers:x:100:user\n");
  EXPECT_EQ(n.User(0), "root");
  EXPECT_EQ(n.User(1000), "user");
  EXPECT_EQ(n.User(4242), "4242");
  EXPECT_EQ(n.Group(100), "users");
  EXPECT_EQ(n.UserId("user").value(), 1000);
  EXPECT_EQ(n.UserId("77").value(), 77);
  EXPECT_FALSE(n.UserId("nobody-here").ok());
  EXPECT_EQ(n.GroupId("users").value(), 100);
}

TEST(FileInfoJson, MapsAgentEntryToExecdShape) {
  IdNames n;
  n.users = {{0, "root"}};
  n.groups = {{0, "root"}};
  const nlohmann::json e = {{"name", "d"},  {"path", "/tmp/d"}, {"type", "dir"},
                            {"size", 4096}, {"mode", 0755},     {"mtime", "2026-01-02T03:04:05Z"},
                            {"uid", 0},     {"gid", 0}};
  const auto j = FileInfoJson(e, n);
  EXPECT_EQ(j["type"], "directory");
  EXPECT_EQ(j["mode"], 755);
  EXPECT_EQ(j["owner"], "root");
  EXPECT_EQ(j["modified_at"], "2026-01-02T03:04:05Z");
  EXPECT_EQ(j["path"], "/tmp/d");
}

TEST(SessionProtocol, OutputEndsAtSentinelWithStatus) {
  const std::string s = NewSentinel();
  SentinelLines out(s);
  // Output without a final newline: the sentinel's own newline ends it.
  auto a = out.Feed("hello\nwor");
  EXPECT_EQ(a, (std::vector<std::string>{"hello"}));
  auto b = out.Feed("ld\n" + s + ":3\nleftover\n");
  EXPECT_EQ(b, (std::vector<std::string>{"world"}));
  EXPECT_TRUE(out.done());
  EXPECT_EQ(out.status(), 3);
}

TEST(SessionProtocol, EmptyLineBeforeSentinelIsItsNewlineButOthersStay) {
  const std::string s = NewSentinel();
  SentinelLines out(s);
  auto a = out.Feed("x\n\n\n");  // "x", an empty output line, then maybe the sentinel's newline
  EXPECT_EQ(a, (std::vector<std::string>{"x", ""}));
  auto b = out.Feed(s + ":0\n");
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(out.done());
  EXPECT_EQ(out.status(), 0);
  SentinelLines err(s);
  auto c = err.Feed("oops\n\n" + s + "\n");
  EXPECT_EQ(c, (std::vector<std::string>{"oops"}));
  EXPECT_TRUE(err.done());
}

TEST(LineSplitter, LongLineComesOutInPiecesCutBetweenCharacters) {
  // Issue 32 #3: a line without a newline is not held whole.
  LineSplitter l(8);
  auto a = l.FeedPieces(
      "abcdefg\xe2\x82\xac"
      "xyz");  // the euro sign straddles byte 8
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].text, "abcdefg");
  EXPECT_TRUE(a[0].line_start);
  auto b = l.FeedPieces("\nnext\n");
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].text, "\xe2\x82\xacxyz");
  EXPECT_FALSE(b[0].line_start);
  EXPECT_EQ(b[1].text, "next");
  EXPECT_TRUE(b[1].line_start);
  // A megabyte without a newline: pieces of at most 64 KiB as it comes.
  LineSplitter big;
  size_t pieces = 0, bytes = 0;
  for (int i = 0; i < 16; ++i)
    for (auto& p : big.Feed(std::string(65536, '\x01'))) {
      EXPECT_LE(p.size(), LineSplitter::kMaxPiece);
      ++pieces;
      bytes += p.size();
    }
  for (auto& p : big.Flush()) bytes += p.size();
  EXPECT_GE(pieces, 15u);
  EXPECT_EQ(bytes, 16u * 65536);
}

TEST(SessionProtocol, SentinelIsOnlySeenAtTheStartOfALine) {
  const std::string s = NewSentinel();
  SentinelLines out(s);
  // A long line whose 64 KiB cut falls just before text that looks like the sentinel.
  std::string line(LineSplitter::kMaxPiece, 'a');
  auto a = out.Feed(line + s + ":9\n");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1], s + ":9");
  EXPECT_FALSE(out.done());
  EXPECT_TRUE(out.Feed(s + ":0\n").empty());
  EXPECT_TRUE(out.done());
  EXPECT_EQ(out.status(), 0);
}

TEST(SessionProtocol, ScriptQuotesCwdAndKeepsCommandInTheShell) {
  const std::string script = SessionScript("cd /tmp; export X=1", "/it's", "__S__");
  EXPECT_EQ(script,
            "{ cd -- '/it'\\''s' && cd /tmp; export X=1\n} </dev/null; printf '\\n%s:%d\\n' "
            "'__S__' \"$?\"; "
            "printf '\\n%s\\n' '__S__' >&2\n");
}

using nlohmann::json;

net::NetworkPolicy Policy(const char* hutch_json) {
  return net::ParseNetworkPolicy(json::parse(hutch_json)).value();
}

json Egress(const net::NetworkPolicy& p, int slot = 3) {
  SandboxRecord r;
  r.network = p;
  r.net_slot = slot;
  return EgressPolicyOf(r);
}

TEST(EgressCreate, AbsentPolicyIsOpenWithNetworkingAndNoneWithout) {
  EXPECT_EQ(CreateNetworkPolicy(json(), true)->mode, net::NetMode::kAll);
  EXPECT_EQ(CreateNetworkPolicy(json(), false)->mode, net::NetMode::kNone);
}

TEST(EgressCreate, RulesSplitIntoAllowAndDenyWithDenyAsDefault) {
  auto p = CreateNetworkPolicy(json::parse(R"({"egress":[
      {"action":"allow","target":"Allowed.TEST"},
      {"action":"allow","target":"*.packages.example.com"},
      {"action":"deny","target":"10.9.0.0/16"},
      {"action":"allow","target":"10.1.2.3"},
      {"action":"deny","target":"allowed.test"}]})"),
                               true);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->ToJson(), json::parse(R"({"mode":"policy","default":"deny",
      "allow":["10.1.2.3/32","allowed.test","*.packages.example.com"],"deny":["10.9.0.0/16"]})"));
  auto open = CreateNetworkPolicy(json::parse(R"({"defaultAction":"allow","egress":[]})"), true);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->ToJson(),
            json::parse(R"({"mode":"policy","default":"allow","allow":[],"deny":[]})"));
}

TEST(EgressCreate, DenyAllKeepsAnInterfaceSoItCanBeOpenedLater) {
  auto p = CreateNetworkPolicy(json::parse(R"({"defaultAction":"deny"})"), true);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->mode, net::NetMode::kPolicy);
  EXPECT_FALSE(p->default_allow);
  // Without networking, allowing nothing is what mode none already does;
  // allowing something is left to SandboxManager::Create to refuse.
  auto off = CreateNetworkPolicy(
      json::parse(R"({"defaultAction":"deny","egress":[{"action":"deny","target":"a.test"}]})"),
      false);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->mode, net::NetMode::kNone);
  auto opens = CreateNetworkPolicy(
      json::parse(R"({"egress":[{"action":"allow","target":"a.test"}]})"), false);
  ASSERT_TRUE(opens.ok());
  EXPECT_EQ(opens->mode, net::NetMode::kPolicy);
}

TEST(EgressCreate, BadPoliciesAreInvalidRequestNamingTheField) {
  struct Case {
    const char* body;
    Code code;
    const char* names;
  } cases[] = {
      {R"([])", Code::kInvalidRequest, "networkPolicy"},
      {R"({"defaultAction":"block"})", Code::kInvalidRequest, "networkPolicy.defaultAction"},
      {R"({"egress":{}})", Code::kInvalidRequest, "networkPolicy.egress"},
      {R"({"egress":["a.test"]})", Code::kInvalidRequest, "networkPolicy.egress[0]"},
      {R"({"egress":[{"action":"allow"}]})", Code::kInvalidRequest, "networkPolicy.egress[0]"},
      {R"({"egress":[{"action":"maybe","target":"a.test"}]})", Code::kInvalidRequest,
       "egress[0].action"},
      {R"({"egress":[{"action":"allow","target":"a.test"},{"action":"allow","target":"*.com"}]})",
       Code::kInvalidRequest, "egress[1].target"},
      {R"({"egress":[{"action":"allow","target":"10.0.0.1/8"}]})", Code::kInvalidRequest,
       "egress[0].target"},
      {R"({"egress":[{"action":"allow","target":"2001:db8::/32"}]})", Code::kNotSupported,
       "egress[0].target"},
      {R"({"egress":[{"action":"allow","target":"a.test","port":443}]})", Code::kInvalidRequest,
       "port"},
      {R"({"ingress":[]})", Code::kInvalidRequest, "networkPolicy.ingress"},
  };
  for (const auto& c : cases) {
    auto p = CreateNetworkPolicy(json::parse(c.body), true);
    ASSERT_FALSE(p.ok()) << c.body;
    EXPECT_EQ(p.error().code, c.code) << c.body << ": " << p.error().message;
    EXPECT_NE(p.error().message.find(c.names), std::string::npos) << p.error().message;
  }
}

TEST(EgressPolicy, ReadsBackInTheSidecarShapeDenyRulesFirst) {
  EXPECT_EQ(Egress(Policy(R"({"mode":"none"})"), -1),
            json::parse(R"({"status":"ok","mode":"deny_all",
      "enforcementMode":"loopback-only","policy":{"defaultAction":"deny","egress":[]}})"));
  EXPECT_EQ(Egress(Policy(R"({"mode":"all"})")), json::parse(R"({"status":"ok","mode":"allow_all",
      "enforcementMode":"dns+nft","policy":{"defaultAction":"allow","egress":[]}})"));
  EXPECT_EQ(Egress(Policy(R"({"mode":"policy","default":"deny"})"))["mode"], "deny_all");
  EXPECT_EQ(
      Egress(Policy(
          R"({"mode":"policy","default":"allow","allow":["a.test","10.0.0.0/8"],"deny":["*.b.test"]})")),
      json::parse(R"({"status":"ok","mode":"enforcing","enforcementMode":"dns+nft","policy":{
      "defaultAction":"allow","egress":[{"action":"deny","target":"*.b.test"},
      {"action":"allow","target":"10.0.0.0/8"},{"action":"allow","target":"a.test"}]}})"));
}

TEST(EgressPatch, IncomingRulesReplaceTheSameTargetAndKeepTheDefault) {
  auto cur =
      Policy(R"({"mode":"policy","default":"deny","allow":["a.test"],"deny":["denied.test"]})");
  auto p = PatchEgressRules(cur, json::parse(R"([{"action":"allow","target":"Denied.Test."},
      {"action":"deny","target":"denied.test"},{"action":"allow","target":"10.1.0.0/16"}])"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  // First incoming rule for a target wins; the old rule for it is gone.
  EXPECT_EQ(p->ToJson(), json::parse(R"({"mode":"policy","default":"deny",
      "allow":["10.1.0.0/16","denied.test","a.test"],"deny":[]})"));
  // From mode all: the default stays allow, the rules are added.
  auto all = PatchEgressRules(Policy(R"({"mode":"all"})"),
                              json::parse(R"([{"action":"deny","target":"x.test"}])"));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->ToJson(),
            json::parse(R"({"mode":"policy","default":"allow","allow":[],"deny":["x.test"]})"));
  // A patch that changes nothing leaves the policy as it is (mode none stays none).
  auto none = Policy(R"({"mode":"none"})");
  EXPECT_EQ(PatchEgressRules(none, json::array())->ToJson(), none.ToJson());
  EXPECT_EQ(
      PatchEgressRules(cur, json::parse(R"([{"action":"allow","target":"a.test"}])"))->ToJson(),
      cur.ToJson());
  // ...but opening it asks for a policy (which SetNetworkPolicy refuses
  // for a sandbox without an interface).
  EXPECT_EQ(PatchEgressRules(none, json::parse(R"([{"action":"allow","target":"a.test"}])"))->mode,
            net::NetMode::kPolicy);
}

TEST(EgressPatch, BadRulesAreInvalidRequest) {
  auto cur = Policy(R"({"mode":"all"})");
  for (const char* body : {R"({})", R"(["a.test"])", R"([{"action":"allow","target":7}])",
                           R"([{"action":"permit","target":"a.test"}])", R"([{"target":"a.test"}])",
                           R"([{"action":"allow","target":"bad..name"}])"}) {
    auto p = PatchEgressRules(cur, json::parse(body));
    ASSERT_FALSE(p.ok()) << body;
    EXPECT_EQ(p.error().code, Code::kInvalidRequest) << body;
  }
}

TEST(EgressDelete, RemovesByTargetIgnoresUnknownAndKeepsTheDefault) {
  auto cur = Policy(
      R"({"mode":"policy","default":"allow","allow":["a.test","10.0.0.1"],"deny":["b.test"]})");
  auto p = DeleteEgressRules(cur, json::parse(R"(["A.test","10.0.0.1","nothing.test"])"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->ToJson(),
            json::parse(R"({"mode":"policy","default":"allow","allow":[],"deny":["b.test"]})"));
  EXPECT_EQ(DeleteEgressRules(cur, json::parse(R"(["nothing.test"])"))->ToJson(), cur.ToJson());
  EXPECT_EQ(DeleteEgressRules(Policy(R"({"mode":"all"})"), json::parse(R"(["x.test"])"))->mode,
            net::NetMode::kAll);
  for (const char* body : {R"({"targets":[]})", R"([1])", R"(["*.com"])"}) {
    auto bad = DeleteEgressRules(cur, json::parse(body));
    ASSERT_FALSE(bad.ok()) << body;
    EXPECT_EQ(bad.error().code, Code::kInvalidRequest) << body;
  }
}

// Shared with /v1 and E2B (their create handlers call it too).
TEST(EnvFields, EnvMapRefusesWhatExecveCannotTake) {
  auto ok = OptEnvMap(json::parse(R"({"env":{"A":"1","B_2":""}})"), "env");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((**ok).at("A"), "1");
  EXPECT_FALSE(OptEnvMap(json::object(), "env")->has_value());
  for (const json& bad : {json{{"env", {{"", "x"}}}}, json{{"env", {{"A=B", "x"}}}},
                          json{{"env", {{std::string("A\0B", 3), "x"}}}},
                          json{{"env", {{"A", std::string("x\0y", 3)}}}}, json{{"env", {{"A", 1}}}},
                          json{{"env", "A=1"}}}) {
    auto r = OptEnvMap(bad, "env");
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.error().code, Code::kInvalidRequest);
  }
}

using Json = nlohmann::json;

// The README's vault: one binding of several hosts and ports becomes a
// group of core bindings; the state folds it back and holds no value.
TEST(CredentialVaultWire, CreateExpandsAndTheStateFoldsBack) {
  auto v = ParseVaultCreate(Json::parse(R"({
    "credentials": [{"name": "api-token", "source": {"type": "inline", "value": "sk-wire-1"}}],
    "bindings": [{"name": "api", "match": {"schemes": ["https"], "ports": [443, 8443],
                  "hosts": ["api.example.com", "*.example.org"], "paths": ["/v1/*"]},
                  "auth": {"type": "apiKey", "name": "x-api-key", "credential": "api-token"}}]})"));
  ASSERT_TRUE(v.ok()) << v.error().message;
  ASSERT_EQ(v->bindings.size(), 4u);
  for (const auto& [name, b] : v->bindings) {
    EXPECT_EQ(b.group, "api");
    EXPECT_EQ(b.match.methods, (std::vector<std::string>{"GET", "POST", "PUT", "PATCH", "DELETE"}));
  }
  const Json state = VaultStateJson(*v);
  EXPECT_EQ(state.dump().find("sk-wire-1"), std::string::npos);
  ASSERT_EQ(state["bindings"].size(), 1u);
  const Json& b = state["bindings"][0];
  EXPECT_EQ(b["name"], "api");
  EXPECT_EQ(b["match"]["hosts"], Json({"api.example.com", "*.example.org"}));
  EXPECT_EQ(b["match"]["ports"], Json({443, 8443}));
  EXPECT_EQ(b["auth"], Json({{"type", "apiKey"}, {"name", "x-api-key"}}));
  EXPECT_EQ(state["credentials"][0]["sourceType"], "inline");
  EXPECT_TRUE(BindingMetadata(*v, "api").has_value());
  EXPECT_FALSE(BindingMetadata(*v, "api.0").has_value());
  EXPECT_FALSE(CredentialMetadata(*v, "nope").has_value());
}

TEST(CredentialVaultWire, AuthKindsAndRefusals) {
  auto create = [](const std::string& auth) {
    return ParseVaultCreate(Json::parse(
        R"({"credentials": [{"name": "a", "source": {"value": "v1"}},
                            {"name": "b", "source": {"value": "v2"}}],
            "bindings": [{"name": "x", "match": {"hosts": ["h.test"]}, "auth": )" +
        auth + "}]}"));
  };
  auto basic = create(R"({"type": "basic", "credential": "a"})");
  ASSERT_TRUE(basic.ok());
  EXPECT_TRUE(basic->bindings.at("x").auth.encoded);
  auto custom = create(R"({"type": "customHeaders", "headers": [{"name": "x-id", "credential": "a"},
                                                              {"name": "x-key", "credential": "b"}]})");
  ASSERT_TRUE(custom.ok());
  EXPECT_EQ(custom->bindings.size(), 2u);
  EXPECT_EQ(VaultStateJson(*custom)["bindings"][0]["auth"]["type"], "customHeaders");
  EXPECT_EQ(create(R"({"type": "bearer", "credential": "zz"})").error().code,
            Code::kInvalidRequest);  // no such credential
  EXPECT_EQ(create(R"({"type": "oauth", "credential": "a"})").error().code, Code::kInvalidRequest);
  EXPECT_EQ(create(R"({"type": "customHeaders", "headers": [], "substitutions": []})").error().code,
            Code::kNotSupported);
  auto http = ParseVaultCreate(Json::parse(R"({"credentials": [], "bindings": [{"name": "x",
      "match": {"schemes": ["http"], "hosts": ["h.test"]}, "auth": {"type": "bearer", "credential": "a"}}]})"));
  EXPECT_EQ(http.error().code, Code::kNotSupported);
  auto unknown =
      ParseVaultCreate(Json::parse(R"({"credentials": [], "bindings": [], "extra": 1})"));
  EXPECT_EQ(unknown.error().code, Code::kInvalidRequest);
}

TEST(CredentialVaultWire, PatchIsAllOrNothingAndGuardedByTheRevision) {
  auto v = ParseVaultCreate(Json::parse(R"({
    "credentials": [{"name": "a", "source": {"value": "v1"}}],
    "bindings": [{"name": "x", "match": {"hosts": ["h.test"]},
                  "auth": {"type": "bearer", "credential": "a"}}]})"));
  ASSERT_TRUE(v.ok());
  v->revision = 4;
  auto stale = ApplyVaultPatch(*v, Json::parse(R"({"expectedRevision": 3})"));
  EXPECT_EQ(stale.error().code, Code::kConflict);
  // A credential still bound cannot go; with its binding it can.
  EXPECT_EQ(ApplyVaultPatch(*v, Json::parse(R"({"credentials": {"delete": ["a"]}})")).error().code,
            Code::kInvalidRequest);
  auto both = ApplyVaultPatch(*v, Json::parse(R"({"expectedRevision": 4,
      "credentials": {"delete": ["a"]}, "bindings": {"delete": ["x"]}})"));
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_TRUE(both->empty());
  EXPECT_EQ(ApplyVaultPatch(*v, Json::parse(R"({"credentials": {"add": [{"name": "a",
      "source": {"value": "v3"}}]}})"))
                .error()
                .code,
            Code::kConflict);
  EXPECT_EQ(ApplyVaultPatch(*v, Json::parse(R"({"bindings": {"replace": [{"name": "y",
      "match": {"hosts": ["h.test"]}, "auth": {"type": "bearer", "credential": "a"}}]}})"))
                .error()
                .code,
            Code::kNotFound);
  auto replaced = ApplyVaultPatch(*v, Json::parse(R"({"credentials": {"replace": [{"name": "a",
      "source": {"value": "v9"}}]}})"));
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->credentials.at("a").value, "v9");
}

}  // namespace
}  // namespace hutch::api::opensandbox
