#include "tests/support/etcd_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "tests/support/test_server.h"

namespace hutch::testing {

namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

bool Answers(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

}  // namespace

bool EtcdProcess::Available() { return access(kEtcd, X_OK) == 0; }

EtcdProcess::EtcdProcess(int members, bool tls) : tls_(tls) {
  if (!Available()) return;
  dir_ = TempDir("hutch-etcd");
  if (tls_ && !MakeCerts()) return;
  members_.resize(static_cast<size_t>(members));
  for (auto& m : members_) {
    m.client_port = FreeLoopbackPort();
    m.peer_port = FreeLoopbackPort();
  }
  Start();
}

bool EtcdProcess::ok() const {
  if (members_.empty()) return false;
  for (const auto& m : members_)
    if (m.pid <= 0) return false;
  return true;
}

std::string EtcdProcess::url() const {
  std::string out;
  for (const auto& m : members_)
    out += (out.empty() ? "" : ",") + std::string(tls_ ? "https" : "http") +
           "://127.0.0.1:" + std::to_string(m.client_port);
  return out;
}

bool EtcdProcess::MakeCerts() {
  // EC P-256 keys; the server's name is 127.0.0.1 (an IP SAN), a day long.
  const std::string d = dir_;
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd '" + d + "'; exec >openssl.log 2>&1\n" + "openssl req -x509 " + key +
      " -keyout ca.key -out ca.pem -days 1 -subj /CN=hutch-test-ca\n" +
      "printf 'subjectAltName=IP:127.0.0.1\\n' >server.ext\n" +
      "printf 'extendedKeyUsage=clientAuth\\n' >client.ext\n" +
      "for n in server client; do\n"
      "  openssl req " +
      key + " -keyout $n.key -out $n.csr -subj /CN=$n\n" +
      "  openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
      "-extfile $n.ext -out $n.pem\n"
      "done\n";
  return std::system(script.c_str()) == 0;  // NOLINT(cert-env33-c): a fixed script
}

bool EtcdProcess::Start() {
  // Members start at once: each waits for the others to form the cluster.
  for (size_t i = 0; i < members_.size(); ++i)
    if (members_[i].pid <= 0 && !StartMember(i)) return false;
  for (const auto& m : members_) {
    bool up = false;
    for (int i = 0; i < 200 && !(up = Answers(m.client_port)); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!up) return false;
  }
  return true;
}

bool EtcdProcess::StartMember(size_t i) {
  auto peer_url = [](int port) { return "http://127.0.0.1:" + std::to_string(port); };
  std::string initial;
  for (size_t k = 0; k < members_.size(); ++k)
    initial += (k ? "," : "") + std::string("m") + std::to_string(k) + "=" +
               peer_url(members_[k].peer_port);
  const Member& m = members_[i];
  const std::string name = "m" + std::to_string(i);
  const std::string client =
      std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(m.client_port);
  std::vector<std::string> args = {kEtcd,
                                   "--name=" + name,
                                   "--data-dir=" + dir_ + "/" + name,
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer_url(m.peer_port),
                                   "--initial-advertise-peer-urls=" + peer_url(m.peer_port),
                                   "--initial-cluster=" + initial,
                                   "--initial-cluster-token=hutch-test",
                                   "--logger=zap",
                                   "--log-outputs=" + dir_ + "/" + name + ".log"};
  if (tls_) {
    args.push_back("--cert-file=" + dir_ + "/server.pem");
    args.push_back("--key-file=" + dir_ + "/server.key");
    args.push_back("--trusted-ca-file=" + dir_ + "/ca.pem");
    args.push_back("--client-cert-auth");
  }
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(kEtcd, argv.data());
    _exit(127);
  }
  members_[i].pid = pid;
  return pid > 0;
}

void EtcdProcess::StopMember(size_t i) {
  pid_t& pid = members_[i].pid;
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int k = 0; k < 100; ++k) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  pid = -1;
}

void EtcdProcess::Stop() {
  for (size_t i = 0; i < members_.size(); ++i) StopMember(i);
}

EtcdProcess::~EtcdProcess() {
  Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace hutch::testing
