// NetSlots: what core needs from sandbox networking (a slot per sandbox:
// its namespace, interface, rules and DNS listener). The seam between
// SandboxManager and net::NetworkManager, which needs root; unit tests of
// core give the manager a fake that only counts leases.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "common/result.h"
#include "net/net_policy.h"
#include "net/network_manager.h"

namespace hutch {

namespace asio = boost::asio;

class NetSlots {
 public:
  virtual ~NetSlots() = default;
  virtual asio::awaitable<Result<net::NetLease>> Acquire(const net::NetworkPolicy& policy) = 0;
  virtual asio::awaitable<Status> SetPolicy(int slot, const net::NetworkPolicy& policy) = 0;
  virtual asio::awaitable<void> Release(int slot) = 0;
  // After a restart: takes back the slot a running sandbox still uses.
  virtual asio::awaitable<Result<net::NetLease>> Adopt(int slot,
                                                       const net::NetworkPolicy& policy) = 0;
  // Removes the slots no adopted sandbox took back; returns how many.
  virtual asio::awaitable<int> ReconcileAtStart() = 0;
};

// The real one: forwards to a NetworkManager.
class ManagedNetSlots : public NetSlots {
 public:
  explicit ManagedNetSlots(net::NetworkManager* n) : n_(n) {}
  asio::awaitable<Result<net::NetLease>> Acquire(const net::NetworkPolicy& p) override {
    return n_->Acquire(p);
  }
  asio::awaitable<Status> SetPolicy(int slot, const net::NetworkPolicy& p) override {
    return n_->SetPolicy(slot, p);
  }
  asio::awaitable<void> Release(int slot) override { return n_->Release(slot); }
  asio::awaitable<Result<net::NetLease>> Adopt(int slot, const net::NetworkPolicy& p) override {
    return n_->Adopt(slot, p);
  }
  asio::awaitable<int> ReconcileAtStart() override { return n_->ReconcileAtStart(); }

 private:
  net::NetworkManager* n_;
};

}  // namespace hutch
