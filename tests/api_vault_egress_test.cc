// The credential vault at egress (issue 26), end to end: a sandbox with a
// binding reaches a test world HTTPS server that requires
// `x-api-key: <secret>` with curl, Python's urllib, Go's net/http and
// Node's fetch (the last two copied in from the host), none configured by
// the test; an unbound host is passed through untouched and gets nothing;
// a redirect to another host carries nothing; the secret is nowhere the
// sandbox can look (environments, command lines, the memory of what it can
// read, files), nor in hutchd's log or the state database; deleting the
// binding stops the
// injection; a restarted hutchd keeps injecting for the sandbox it adopts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/net_env.h"

namespace hutch::testing {
namespace {

using json = nlohmann::json;
using namespace std::string_literals;

// Split in two inside the sandbox's commands, so a command line that
// searches for it does not hold it whole.
constexpr char kSecretHead[] = "sk-egress-";
constexpr char kSecretTail[] = "9b8c7d6e5f4a31";
const std::string kSecret = std::string(kSecretHead) + kSecretTail;
const std::string kFindSecret = "S="s + kSecretHead + "; S=${S}" + kSecretTail + "; ";

std::string Out(const json& r) { return r.value("stdout", ""s); }

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The world's CA and a certificate for api.vault.test and
// other.vault.test it signs, made with the openssl tool.
std::string MakeWorldCerts(const std::string& dir) {
  return HostSh(
      "cd " + dir +
      " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
      "-subj /CN=vault-world-ca -keyout ca.key -out ca.pem"
      " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
      "-subj /CN=api.vault.test -keyout leaf.key -out leaf.csr"
      " && printf 'subjectAltName=DNS:api.vault.test,DNS:other.vault.test\\n' > ext"
      " && openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile ext -out leaf.pem 2>&1 && echo made");
}

struct VaultEnv {
  NetEnv net;
  std::string dir;
};

VaultEnv MakeVaultEnv() {
  VaultEnv v;
  v.dir = TempDir("hutch-vault-world");
  if (MakeWorldCerts(v.dir).find("made") == std::string::npos) return v;
  v.net = MakeNetEnv({"--vault-upstream-ca", v.dir + "/ca.pem"});
  if (!v.net.world) return v;
  const char* src = getenv("HUTCH_SOURCE_DIR");
  v.net.world->Spawn({"python3", std::string(src ? src : ".") + "/tests/support/world_https.py",
                      v.dir + "/leaf.pem", v.dir + "/leaf.key", kSecret});
  for (int i = 0; i < 100; ++i) {
    if (HostSh("curl -s -m 1 --cacert " + v.dir + "/ca.pem --resolve api.vault.test:443:" +
               v.net.world->Addr(2) + " https://api.vault.test/secret") == "denied\n")
      break;
    usleep(100 * 1000);
  }
  return v;
}

json VaultBody() {
  return json::parse(R"({
    "network": {"mode": "all"},
    "vault": {
      "credentials": [{"name": "world-key", "value": ")" +
                     kSecret + R"("}],
      "bindings": [{"name": "world",
                    "match": {"host": "api.vault.test", "paths": ["/secret", "/redirect"]},
                    "auth": {"type": "header", "credential": "world-key",
                             "header": "x-api-key"}}]}})");
}

// Copies a host file into the sandbox (the files API), executable.
bool CopyIn(TestServer& s, const std::string& id, const std::string& from, const std::string& to) {
  const std::string bytes = FileBytes(from);
  if (bytes.empty()) return false;
  std::string path;  // a query value: '+' would read as a space
  for (char c : to) path += c == '+' ? std::string("%2B") : std::string(1, c);
  auto r =
      s.Client().Request("PUT", "/v1/sandboxes/" + id + "/fs?path=" + path + "&mode=0755", bytes);
  return r.status == 201;
}

// Go's net/http and Node's fetch, which the test template lacks, from the
// host: tests/support/vault_get built static, and the host's node with the
// libstdc++ it needs when the sandbox has none. Returns what it could not
// bring (the test says so instead of passing silently).
std::string BringClients(TestServer& s, const std::string& id, const std::string& dir) {
  std::string missing;
  const char* src = getenv("HUTCH_SOURCE_DIR");
  const std::string built = HostSh("cd " + std::string(src ? src : ".") +
                                   "/tests/support/vault_get && CGO_ENABLED=0 go build -o " + dir +
                                   "/vault-get main.go 2>&1 && echo built");
  if (built.find("built") == std::string::npos ||
      !CopyIn(s, id, dir + "/vault-get", "/usr/local/bin/vault-get"))
    missing += " go(" + built + ")";
  const std::string node = Trim(HostSh("command -v node"));
  if (Out(s.Exec(id, "command -v node || echo none")) == "none\n") {
    if (node.empty() || !CopyIn(s, id, node, "/usr/local/bin/node")) missing += " node";
    // Each library the host's node loads that the sandbox lacks, from the
    // host (libstdc++, libdl, ...: the test template is minimal).
    std::istringstream libs(HostSh("ldd " + node + " | awk '$3 ~ /^\\// {print $1, $3}'"));
    std::string name, path;
    while (libs >> name >> path) {
      const std::string to = "/usr/lib/x86_64-linux-gnu/" + name;
      if (Out(s.Exec(id, "test -e " + to + " || echo none")) == "none\n" &&
          !CopyIn(s, id, path, to))
        missing += " " + name;
    }
  }
  return missing;
}

// The world's CA alone: a connection it verifies was not interposed.
std::string PutWorldCa(const std::string& dir) {
  return "printf '%s' '" + FileBytes(dir + "/ca.pem") + "' > /tmp/world-ca.pem; ";
}

TEST(VaultEgress, BoundHostGetsTheCredentialAndNothingElseDoes) {
  VaultEnv v = MakeVaultEnv();
  ASSERT_TRUE(v.net.server && v.net.server->ok());
  ASSERT_TRUE(v.net.world->ready());
  auto& s = *v.net.server;
  const std::string id = s.CreateSandbox(VaultBody());

  // No configuration in the sandbox: its trust store and variables came
  // with the create.
  auto r = s.Exec(id, "curl -sS https://api.vault.test/secret");
  EXPECT_EQ(Out(r), "granted\n") << r.dump();
  r = s.Exec(id, HttpGet("https://api.vault.test/secret"));
  EXPECT_EQ(Trim(Out(r)), "granted") << r.dump();
  // Go's net/http and Node's fetch (brought from the host: none in the
  // test template), configured by nothing but what the create set.
  const std::string missing = BringClients(s, id, v.dir);
  EXPECT_EQ(missing, "") << "clients not brought into the sandbox";
  r = s.Exec(id, "vault-get https://api.vault.test/secret");
  EXPECT_EQ(Out(r), "granted\n") << r.dump();
  r = s.Exec(id,
             "node -e \"fetch('https://api.vault.test/secret')"
             ".then(r => r.text()).then(t => process.stdout.write(t))\"");
  EXPECT_EQ(Out(r), "granted\n") << r.dump();

  // An unbound host: the world's own certificate reaches the sandbox (no
  // interception) and the request carries nothing.
  r = s.Exec(
      id, PutWorldCa(v.dir) + "curl -sS --cacert /tmp/world-ca.pem https://other.vault.test/echo");
  ASSERT_EQ(r.value("exit_code", -1), 0) << r.dump();
  auto echo = json::parse(Out(r), nullptr, false);
  EXPECT_TRUE(echo.is_object() && echo["x-api-key"].is_null()) << r.dump();
  // A redirect from the bound host to another host carries nothing there.
  r = s.Exec(id,
             "cat /etc/ssl/certs/ca-certificates.crt /tmp/world-ca.pem > /tmp/both.pem; "
             "curl -sS -L --cacert /tmp/both.pem https://api.vault.test/redirect");
  echo = json::parse(Out(r), nullptr, false);
  EXPECT_TRUE(echo.is_object() && echo["x-api-key"].is_null() && echo["host"] == "other.vault.test")
      << r.dump();

  // The secret is nowhere the sandbox can read.
  // (Python reads /proc, not grep: a grep's own command line would hold the
  // pattern.)
  const std::string proc_scan =
      "python3 -c \"import glob\ns = '"s + kSecretHead + "' + '" + kSecretTail +
      "'\nn = 0\nfor p in glob.glob('/proc/[0-9]*/environ') + "
      "glob.glob('/proc/[0-9]*/cmdline'):\n try:\n  n += s.encode() in open(p, 'rb').read()\n"
      " except OSError:\n  pass\nprint(n)\"; ";
  r = s.Exec(id,
             proc_scan + kFindSecret +
                 "env | grep -c \"$S\"; "
                 "grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev \"$S\" / "
                 "2>/dev/null | head -3",
             180);
  EXPECT_EQ(Out(r), "0\n0\n") << r.dump();
  // The memory of every process the sandbox can read (a child it starts
  // for the purpose at least; not the scanner itself, which builds the
  // pattern): the secret never entered the sandbox, so it is in none.
  const std::string mem_scan =
      "python3 -c \"import glob, os, subprocess\ns = ('"s + kSecretHead + "' + '" + kSecretTail +
      "').encode()\nchild = subprocess.Popen(['sleep', '30'])\nhits = read = 0\n"
      "for d in glob.glob('/proc/[0-9]*'):\n"
      " if d == '/proc/%d' % os.getpid():\n  continue\n"
      " try:\n  maps = open(d + '/maps').read().splitlines()\n  mem = open(d + '/mem', 'rb', 0)\n"
      " except OSError:\n  continue\n"
      " for line in maps:\n  f = line.split()\n"
      "  if 'r' not in f[1] or f[-1] in ('[vvar]', '[vsyscall]'):\n   continue\n"
      "  a, b = (int(x, 16) for x in f[0].split('-'))\n"
      "  try:\n   mem.seek(a)\n   chunk = mem.read(min(b - a, 1 << 26))\n"
      "  except (OSError, ValueError, OverflowError):\n   continue\n"
      "  read += 1\n  hits += s in chunk\n"
      "child.kill()\nprint(hits, read > 0)\"";
  r = s.Exec(id, mem_scan, 180);
  EXPECT_EQ(Out(r), "0 True\n") << r.dump();
  auto c = s.Client();
  for (const std::string& path : {"/v1/sandboxes/" + id, "/v1/sandboxes/" + id + "/vault"}) {
    auto g = c.Request("GET", path);
    EXPECT_EQ(g.status, 200);
    EXPECT_EQ(g.body.find(kSecret), std::string::npos) << path;
  }

  // E2B's form: network.rules adding the header to requests for the host
  // (a second sandbox); its reads hold no value; an update without rules
  // clears them at once.
  const json e2b_body = json::parse(R"({"templateID": "base", "network": {"rules": {
      "api.vault.test": [{"transform": {"headers": {"x-api-key": ")" +
                                    kSecret + R"("}}}],
      "*.vault.test": [{"transform": {"headers": {"x-wide": "no"}}}]}}})");
  const std::map<std::string, std::string> e2b_auth = {{"X-API-Key", s.key()},
                                                       {"Content-Type", "application/json"}};
  auto e2b = c.Request("POST", "/e2b/sandboxes", e2b_body.dump(), e2b_auth);
  ASSERT_EQ(e2b.status, 201) << e2b.body;
  EXPECT_EQ(e2b.body.find(kSecret), std::string::npos);
  const std::string e2b_id = e2b.json().value("sandboxID", "");
  r = s.Exec(e2b_id, "curl -sS https://api.vault.test/secret");
  EXPECT_EQ(Out(r), "granted\n") << r.dump();
  // The exact name's rules win over the wildcard's: not merged.
  r = s.Exec(e2b_id, "curl -sS https://api.vault.test/echo");
  echo = json::parse(Out(r), nullptr, false);
  EXPECT_TRUE(echo.is_object() && echo["x-api-key"] == kSecret) << r.dump();
  auto e2b_get = c.Request("GET", "/e2b/sandboxes/" + e2b_id, "", e2b_auth);
  EXPECT_EQ(e2b_get.body.find(kSecret), std::string::npos);
  auto cleared = c.Request("PUT", "/e2b/sandboxes/" + e2b_id + "/network", "{}", e2b_auth);
  ASSERT_EQ(cleared.status, 204) << cleared.body;
  r = s.Exec(e2b_id, "curl -sS -k https://api.vault.test/secret");
  EXPECT_EQ(Out(r), "denied\n") << r.dump();

  // Deleting the binding stops injection at once: the same request now
  // reaches the host untouched (so only the world's CA verifies it).
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id + "/vault/bindings/world").status, 204);
  r = s.Exec(id, "curl -sS --cacert /tmp/both.pem https://api.vault.test/secret");
  EXPECT_EQ(Out(r), "denied\n") << r.dump();

  EXPECT_EQ(s.Log().find(kSecret), std::string::npos);
  EXPECT_EQ((FileBytes(s.state_dir() + "/state/state.db") +
             FileBytes(s.state_dir() + "/state/state.db-wal"))
                .find(kSecret),
            std::string::npos);
}

TEST(VaultEgress, RestartedServerKeepsInjectingForAdoptedSandboxes) {
  VaultEnv v = MakeVaultEnv();
  ASSERT_TRUE(v.net.server && v.net.server->ok());
  ASSERT_TRUE(v.net.world->ready());
  auto& s = *v.net.server;
  const std::string id = s.CreateSandbox(VaultBody());
  EXPECT_EQ(Out(s.Exec(id, "curl -sS https://api.vault.test/secret")), "granted\n");
  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto r = s.Exec(id, "curl -sS https://api.vault.test/secret");
  EXPECT_EQ(Out(r), "granted\n") << r.dump() << s.Log();
  ASSERT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  // The sandbox's CA goes with it (just after the answer).
  const std::string ca = s.state_dir() + "/state/vault-ca/" + id + ".pem";
  for (int i = 0; i < 50 && std::filesystem::exists(ca); ++i) usleep(100 * 1000);
  EXPECT_FALSE(std::filesystem::exists(ca));
}

}  // namespace
}  // namespace hutch::testing
