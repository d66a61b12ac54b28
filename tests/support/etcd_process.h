// A real etcd for the cluster tests (Debian's etcd-server, scripts/setup):
// one member on loopback ports picked free, a temp data dir, stopped by
// its PID (SIGTERM, then SIGKILL) and its data dir removed at the end.
#pragma once

#include <sys/types.h>

#include <string>

namespace hutch::testing {

class EtcdProcess {
 public:
  EtcdProcess();
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Whether /usr/bin/etcd exists (tests skip without it).
  static bool Available();
  bool ok() const { return pid_ > 0; }
  // "http://127.0.0.1:PORT", the client URL.
  std::string url() const { return "http://127.0.0.1:" + std::to_string(client_port_); }
  int client_port() const { return client_port_; }
  // Stops it (SIGTERM; its data stays) and starts it again on the same
  // ports and data dir: an etcd restart mid-run.
  void Stop();
  bool Start();

 private:
  std::string dir_;
  int client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace hutch::testing
