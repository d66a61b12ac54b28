// The credential vault's core (issue 26): sealing, the API's JSON, binding
// matching and the VaultBook over a real state store in a temp dir. The
// secret must never be in a read, an error or the database file's bytes.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <openssl/ssl.h>

#include "common/secret_box.h"
#include "core/vault.h"
#include "core/vault_book.h"
#include "net/tls_sni.h"
#include "store/state_store.h"

namespace hutch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kSecret[] = "sk-live-7f3e9a1c5b2d4e6f";

SecretBox Box(char fill = 'k') { return SecretBox::FromKey(std::string(32, fill)).value(); }

// Every byte of the database and its WAL, as a string.
std::string DbBytes(const std::string& path) {
  std::string all;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::ifstream in(path + suffix, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    all += ss.str();
  }
  return all;
}

json ApiVault() {
  return json::parse(R"({
    "credentials": [{"name": "api", "value": "sk-live-7f3e9a1c5b2d4e6f"}],
    "bindings": [{"name": "world",
                  "match": {"scheme": "https", "host": "*.world.test", "port": 443,
                            "paths": ["/v1/*"], "methods": ["get", "POST"]},
                  "auth": {"type": "header", "credential": "api", "header": "x-api-key"}}]
  })");
}

vault::RequestFacts Req(std::string host, std::string path = "/v1/models",
                        std::string method = "GET", int port = 443) {
  return {"https", std::move(host), port, std::move(method), std::move(path)};
}

// The first injection a request gets, if any.
std::optional<vault::Injection> One(const vault::Vault& v, const vault::RequestFacts& r) {
  auto all = vault::MatchRequest(v, r);
  if (all.empty()) return std::nullopt;
  return all.front();
}

TEST(SecretBox, OpensOnlyUnderItsKeyAndContext) {
  auto sealed = Box().Seal(kSecret, "sb_1/api");
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(sealed->find(kSecret), std::string::npos);
  EXPECT_EQ(Box().Open(*sealed, "sb_1/api").value(), kSecret);
  EXPECT_FALSE(Box().Open(*sealed, "sb_2/api").ok());
  EXPECT_FALSE(Box('j').Open(*sealed, "sb_1/api").ok());
  std::string tampered = *sealed;
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(Box().Open(tampered, "sb_1/api").ok());
  // Two seals of one value differ (a fresh nonce each).
  EXPECT_NE(Box().Seal(kSecret, "c").value(), Box().Seal(kSecret, "c").value());
}

TEST(SecretBox, KeyMustBeWhole) {
  EXPECT_FALSE(SecretBox::FromKey("short").ok());
  EXPECT_FALSE(SecretBox::FromHexKey("zz").ok());
  EXPECT_TRUE(SecretBox::FromHexKey(std::string(64, 'a')).ok());
}

TEST(VaultParse, ReadsTheApiFormAndViewsHideValues) {
  auto v = vault::ParseVault(ApiVault(), {});
  ASSERT_TRUE(v.ok()) << v.error().message;
  const std::string view = v->ToViewJson().dump();
  EXPECT_EQ(view.find(kSecret), std::string::npos);
  EXPECT_NE(view.find("\"api\""), std::string::npos);
  EXPECT_NE(view.find("x-api-key"), std::string::npos);
  EXPECT_EQ(v->bindings.at("world").match.methods, (std::vector<std::string>{"GET", "POST"}));
}

TEST(VaultParse, ErrorsNeverQuoteTheValue) {
  const std::string bad = std::string(kSecret) + "\r\nInjected: 1";
  json j{{"name", "api"}, {"value", bad}};
  auto c = vault::ParseCredential(j, {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message.find(kSecret), std::string::npos) << c.error().message;
  json both{{"name", "api"}, {"value", kSecret}, {"source", "x"}};
  auto c2 = vault::ParseCredential(both, {});
  ASSERT_FALSE(c2.ok());
  EXPECT_EQ(c2.error().message.find(kSecret), std::string::npos);
}

TEST(VaultParse, RefusesBindingsWithoutTheirCredentialAndBadFields) {
  json j = ApiVault();
  j["bindings"][0]["auth"]["credential"] = "other";
  EXPECT_EQ(vault::ParseVault(j, {}).error().code, Code::kInvalidRequest);
  for (const char* patch : {R"({"match": {"host": "a.*.test"}})", R"({"match": {"port": 0}})",
                            R"({"match": {"scheme": "ftp"}})", R"({"match": {"scheme": "http"}})",
                            R"({"match": {"paths": ["v1"]}})", R"({"auth": {"type": "cookie"}})",
                            R"({"auth": {"header": "a b"}})"}) {
    json b = ApiVault()["bindings"][0];
    b.merge_patch(json::parse(patch));
    EXPECT_FALSE(vault::ParseBinding(b).ok()) << patch;
  }
}

TEST(VaultParse, HostSourcesOnlyByTheOperatorsName) {
  const std::string file = ::testing::TempDir() + "/vault_source_" + std::to_string(getpid());
  std::ofstream(file) << kSecret << "\n";
  setenv("HUTCH_VAULT_TEST_SECRET", kSecret, 1);
  vault::HostSources sources;
  sources.insert(vault::ParseHostSource("f=file:" + file).value());
  sources.insert(vault::ParseHostSource("e=env:HUTCH_VAULT_TEST_SECRET").value());
  EXPECT_EQ(vault::ParseCredential({{"name", "a"}, {"source", "f"}}, sources)->value, kSecret);
  EXPECT_EQ(vault::ParseCredential({{"name", "a"}, {"source", "e"}}, sources)->value, kSecret);
  // A path or variable the operator did not name is refused, not read.
  auto named = vault::ParseCredential({{"name", "a"}, {"source", "file:" + file}}, sources);
  EXPECT_EQ(named.error().code, Code::kInvalidRequest);
  EXPECT_FALSE(vault::ParseHostSource("x=http://a").ok());
  fs::remove(file);
}

TEST(VaultMatch, MatchesHostPortPathAndMethod) {
  auto v = vault::ParseVault(ApiVault(), {}).value();
  auto hit = One(v, Req("api.world.test"));
  ASSERT_TRUE(hit.has_value());
  EXPECT_FALSE(hit->query);
  EXPECT_EQ(hit->name, "x-api-key");
  EXPECT_EQ(hit->value, kSecret);
  EXPECT_TRUE(One(v, Req("a.b.world.test", "/v1/a/b", "POST")).has_value());
  EXPECT_FALSE(One(v, Req("world.test")));  // the apex is not below itself
  EXPECT_FALSE(One(v, Req("other.test")));
  EXPECT_FALSE(One(v, Req("api.world.test", "/v2/models")));
  EXPECT_FALSE(One(v, Req("api.world.test", "/v1/x", "DELETE")));
  EXPECT_FALSE(One(v, Req("api.world.test", "/v1/x", "GET", 8443)));
  auto http = Req("api.world.test");
  http.scheme = "http";
  EXPECT_FALSE(One(v, http));
  EXPECT_TRUE(vault::HostIsBound(v, "https", "api.world.test", 443));
  EXPECT_FALSE(vault::HostIsBound(v, "https", "other.test", 443));
  EXPECT_FALSE(vault::HostIsBound(v, "https", "api.world.test", 80));
}

TEST(VaultMatch, FormatsEachAuthKind) {
  auto v = vault::ParseVault(ApiVault(), {}).value();
  auto& a = v.bindings.at("world").auth;
  a.kind = vault::AuthKind::kBearer;
  EXPECT_EQ(One(v, Req("a.world.test"))->value, std::string("Bearer ") + kSecret);
  EXPECT_EQ(One(v, Req("a.world.test"))->name, "Authorization");
  a.kind = vault::AuthKind::kBasic;
  a.username = "bot";
  // base64("bot:sk-live-7f3e9a1c5b2d4e6f")
  EXPECT_EQ(One(v, Req("a.world.test"))->value, "Basic Ym90OnNrLWxpdmUtN2YzZTlhMWM1YjJkNGU2Zg==");
  a.kind = vault::AuthKind::kQuery;
  a.name = "key";
  auto q = One(v, Req("a.world.test"));
  EXPECT_TRUE(q->query);
  EXPECT_EQ(q->name, "key");
  EXPECT_EQ(q->value, kSecret);
  // OpenSandbox's basic: the credential is base64("user:password") already.
  a.kind = vault::AuthKind::kBasic;
  a.username.clear();
  a.encoded = true;
  EXPECT_EQ(One(v, Req("a.world.test"))->value, std::string("Basic ") + kSecret);
  auto round = vault::ParseBinding(vault::BindingToJson(v.bindings.at("world")));
  ASSERT_TRUE(round.ok());
  EXPECT_TRUE(round->auth.encoded);
}

// A group (one OpenSandbox binding expanded to several) adds every
// matching member; a binding outside the first match's group adds nothing.
TEST(VaultMatch, AGroupAddsAllItsHeadersAndOnlyThem) {
  auto v = vault::ParseVault(ApiVault(), {}).value();
  vault::Binding id = v.bindings.at("world"), secret = id, other = id;
  id.name = "g.0";
  id.auth.name = "x-client-id";
  secret.name = "g.1";
  secret.auth.name = "x-client-secret";
  id.group = secret.group = "g";
  other.name = "h";
  other.auth.name = "x-other";
  v.bindings = {{id.name, id}, {secret.name, secret}, {other.name, other}};
  auto all = vault::MatchRequest(v, Req("api.world.test"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "x-client-id");
  EXPECT_EQ(all[1].name, "x-client-secret");
  auto round = vault::ParseBinding(vault::BindingToJson(id));
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->group, "g");
}

// The first flight of a real TLS client (OpenSSL over memory BIOs).
std::string ClientHello(const char* server_name) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  if (server_name) SSL_set_tlsext_host_name(ssl, server_name);
  SSL_connect(ssl);  // wants to read: the hello is written
  char* data = nullptr;
  const long n = BIO_get_mem_data(out, &data);
  std::string hello(data, static_cast<size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

TEST(TlsSni, ReadsTheServerNameOfAClientHello) {
  const std::string hello = ClientHello("Api.Vault.Test");
  auto p = net::PeekSni(hello);
  EXPECT_EQ(p.kind, net::SniPeek::kFound);
  EXPECT_EQ(p.name, "api.vault.test");
  EXPECT_EQ(net::PeekSni(hello.substr(0, hello.size() / 2)).kind, net::SniPeek::kNeedMore);
  EXPECT_EQ(net::PeekSni(hello.substr(0, 3)).kind, net::SniPeek::kNeedMore);
  auto none = net::PeekSni(ClientHello(nullptr));
  EXPECT_EQ(none.kind, net::SniPeek::kFound);
  EXPECT_EQ(none.name, "");
  EXPECT_EQ(net::PeekSni("GET / HTTP/1.1\r\n\r\n").kind, net::SniPeek::kNotTls);
}

class VaultBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/vault_book_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_path_ = dir_ + "/state.db";
    store_ = store::StateStore::Open(db_path_).value();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  std::string dir_, db_path_;
  std::unique_ptr<store::StateStore> store_;
};

TEST_F(VaultBookTest, StoresSealedAndReloadsUnderTheSameKey) {
  VaultBook book(Box(), store_.get());
  ASSERT_TRUE(book.Replace("sb_1", vault::ParseVault(ApiVault(), {}).value()).ok());
  EXPECT_EQ(book.View("sb_1").dump().find(kSecret), std::string::npos);
  EXPECT_EQ(DbBytes(db_path_).find(kSecret), std::string::npos);

  VaultBook again(Box(), store_.get());
  ASSERT_EQ(again.Load([](const std::string&) { return true; }).value(), 1);
  ASSERT_NE(again.Find("sb_1"), nullptr);
  EXPECT_EQ(again.Find("sb_1")->credentials.at("api").value, kSecret);

  // Another key opens nothing: the vault is left unused, not guessed.
  VaultBook other(Box('x'), store_.get());
  EXPECT_EQ(other.Load([](const std::string&) { return true; }).value(), 0);
  EXPECT_EQ(other.Find("sb_1"), nullptr);
}

TEST_F(VaultBookTest, LoadDropsVaultsOfGoneSandboxes) {
  VaultBook book(Box(), store_.get());
  ASSERT_TRUE(book.Replace("sb_1", vault::ParseVault(ApiVault(), {}).value()).ok());
  ASSERT_TRUE(book.Replace("sb_2", vault::ParseVault(ApiVault(), {}).value()).ok());
  VaultBook again(Box(), store_.get());
  EXPECT_EQ(again.Load([](const std::string& id) { return id == "sb_2"; }).value(), 1);
  EXPECT_EQ(store_->LoadVaults()->size(), 1u);
}

TEST_F(VaultBookTest, EditsOneByOneAndForgets) {
  VaultBook book(Box(), store_.get());
  auto binding = vault::ParseBinding(ApiVault()["bindings"][0]).value();
  EXPECT_EQ(book.PutBinding("sb_1", binding).error().code, Code::kInvalidRequest);
  ASSERT_TRUE(book.PutCredential("sb_1", {"api", kSecret}).ok());
  ASSERT_TRUE(book.PutBinding("sb_1", binding).ok());
  EXPECT_TRUE(One(*book.Find("sb_1"), Req("api.world.test")).has_value());
  EXPECT_EQ(book.DeleteCredential("sb_1", "api").error().code, Code::kConflict);
  ASSERT_TRUE(book.DeleteBinding("sb_1", "world").ok());
  EXPECT_FALSE(One(*book.Find("sb_1"), Req("api.world.test")).has_value());
  EXPECT_EQ(book.DeleteBinding("sb_1", "world").error().code, Code::kNotFound);
  // Each stored change counts (OpenSandbox's revision), across a reload.
  EXPECT_EQ(book.Find("sb_1")->revision, 3);
  VaultBook again(Box(), store_.get());
  ASSERT_EQ(again.Load([](const std::string&) { return true; }).value(), 1);
  EXPECT_EQ(again.Find("sb_1")->revision, 3);
  book.Forget("sb_1");
  EXPECT_EQ(book.Find("sb_1"), nullptr);
  EXPECT_TRUE(store_->LoadVaults()->empty());
}

}  // namespace
}  // namespace hutch
