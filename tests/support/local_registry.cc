#include "tests/support/local_registry.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/test_server.h"

namespace hutch::testing {

LocalRegistry::LocalRegistry() {
  dir_ = TempDir("hutch-registry");
  port_ = FreeLoopbackPort();
  const std::string conf = dir_ + "/config.yml";
  std::ofstream(conf) << "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                      << "    rootdirectory: " << dir_ << "/data\n  delete:\n    enabled: true\n"
                      << "http:\n  addr: 127.0.0.1:" << port_ << "\n  secret: hutch-test\n";
  pid_ = fork();
  if (pid_ == 0) {
    const std::string log = dir_ + "/registry.log";
    FILE* f = freopen(log.c_str(), "w", stdout);
    (void)f;
    dup2(STDOUT_FILENO, STDERR_FILENO);
    execl("/usr/bin/docker-registry", "docker-registry", "serve", conf.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100 && !Up(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

LocalRegistry::~LocalRegistry() {
  Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool LocalRegistry::Up() const {
  return HostSh("curl -s -o /dev/null -w '%{http_code}' http://" + addr() + "/v2/") == "200";
}

void LocalRegistry::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

namespace {

std::string Script() {
  const char* src = getenv("HUTCH_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/support/oci_test_image.sh";
}

}  // namespace

std::string LocalRegistry::PushBig(const std::string& ref, int mb) const {
  const std::string out =
      HostSh("OCI_TEST_BIG_MB=" + std::to_string(mb) + " bash " + Script() + " " + dir_ + " " +
             addr() + " " + ref + " big 2>&1 && echo PUSHED");
  return out.find("PUSHED") != std::string::npos ? "" : out;
}

std::string LocalRegistry::Push(const std::string& ref, const std::string& mark,
                                const std::string& top) const {
  const std::string out = HostSh("bash " + Script() + " " + dir_ + " " + addr() + " " + ref + " " +
                                 mark + " " + top + " 2>&1 && echo PUSHED");
  return out.find("PUSHED") != std::string::npos ? "" : out;
}

std::string LocalRegistry::BlobFile(const std::string& digest_hex) const {
  return dir_ + "/data/docker/registry/v2/blobs/sha256/" + digest_hex.substr(0, 2) + "/" +
         digest_hex + "/data";
}

std::vector<std::string> LocalRegistry::Layers(const std::string& repo,
                                               const std::string& tag) const {
  const std::string m =
      HostSh("curl -s -H 'Accept: application/vnd.oci.image.manifest.v1+json' http://" + addr() +
             "/v2/" + repo + "/manifests/" + tag);
  std::vector<std::string> out;
  const auto j = nlohmann::json::parse(m, nullptr, false);
  if (j.is_object() && j.contains("layers"))
    for (const auto& l : j["layers"]) out.push_back(l.value("digest", "").substr(7));
  return out;
}

}  // namespace hutch::testing
