// A real etcd for the cluster tests (Debian's etcd-server, scripts/setup):
// one member (or a cluster of several) on loopback ports picked free, a
// temp data dir, each member stopped by its PID (SIGTERM, then SIGKILL)
// and the data dir removed at the end.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hutch::testing {

class EtcdProcess {
 public:
  // `tls`: clients speak https to it and must present a certificate its
  // CA signed (etcd's --client-cert-auth); a CA, a server and a client
  // certificate are made in its temp dir with the openssl tool.
  explicit EtcdProcess(int members = 1, bool tls = false);
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Whether /usr/bin/etcd exists (tests skip without it).
  static bool Available();
  bool ok() const;
  // The members' client URLs, comma-separated ("http://127.0.0.1:PORT,…").
  std::string url() const;
  // With tls: the PEM files a client needs.
  std::string ca() const { return dir_ + "/ca.pem"; }
  std::string client_cert() const { return dir_ + "/client.pem"; }
  std::string client_key() const { return dir_ + "/client.key"; }
  // Stops every member (SIGTERM; the data stays) and starts them again on
  // the same ports and data dirs: an etcd restart mid-run.
  void Stop();
  bool Start();
  // Stops one member for good (a member of three lost).
  void StopMember(size_t i);

 private:
  struct Member {
    int client_port = 0, peer_port = 0;
    pid_t pid = -1;
  };
  bool StartMember(size_t i);
  bool MakeCerts();
  bool tls_ = false;
  std::string dir_;
  std::vector<Member> members_;
};

}  // namespace hutch::testing
