// The books of hutchd's client connections: which are open, which of them
// have authenticated, and where the unauthenticated ones come from. It
// decides, for each new connection, which unauthenticated connections
// must go so that it can be served; HttpServer closes them.
//
// Why: anyone who can reach the port can open connections without a key.
// Held idle, they used to fill the whole connection cap, and every client
// with a key got 503. So a connection is *unauthenticated* until one of its
// requests passes a dialect's credential check (HttpContext::
// MarkAuthenticated), and unauthenticated connections have a budget of
// their own: at most `max_unauthenticated_per_source` from one source
// (an IPv4 address, an IPv6 /64), at most `max_unauthenticated` in all,
// and when the cap of all connections is reached a new connection takes
// the place of the oldest unauthenticated one instead of being refused.
// Only when every open connection has authenticated is a new one refused.
// The oldest goes first: a client that means to send a request does so at
// once, an idle flood's connections are the ones that waited longest.
//
// I/O thread only, like the HttpServer that owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/ip/address.hpp>

namespace hutch::api {

struct ConnectionLimits {
  size_t max_connections = SIZE_MAX;  // open at once, authenticated or not
  size_t max_unauthenticated = SIZE_MAX;
  size_t max_unauthenticated_per_source = SIZE_MAX;
};

// Why an unauthenticated connection was closed to make room.
enum class EvictReason {
  kSource,    // its source had max_unauthenticated_per_source already
  kBudget,    // max_unauthenticated were open
  kCapacity,  // max_connections were open
};
const char* EvictReasonName(EvictReason r);

// The source a connection is counted under: an IPv4 address (also when
// written as IPv4-mapped IPv6), or the /64 of an IPv6 address, since one
// IPv6 host commonly holds a whole /64.
std::string SourceKey(const boost::asio::ip::address& a);

class ConnectionBudget {
 public:
  using Id = uint64_t;
  struct Admission {
    bool admitted = false;  // false: every open connection has authenticated
    Id id = 0;              // the new connection's, when admitted
    // Unauthenticated connections to close, oldest first (already out of
    // the books: their sessions' Remove is a no-op).
    std::vector<std::pair<Id, EvictReason>> evicted;
  };

  explicit ConnectionBudget(ConnectionLimits limits = {});
  void set_limits(ConnectionLimits limits);
  const ConnectionLimits& limits() const { return limits_; }

  // A new connection from `source` (SourceKey): admitted, unauthenticated.
  Admission Admit(const std::string& source);
  // One of its requests passed a credential check: from now on the
  // connection is not counted against the unauthenticated budget.
  void Authenticate(Id id);
  // The connection closed (no-op when it was evicted).
  void Remove(Id id);

  bool Contains(Id id) const { return entries_.count(id) != 0; }
  bool IsAuthenticated(Id id) const;
  size_t open() const { return entries_.size(); }
  size_t unauthenticated() const { return unauth_.size(); }
  // Unauthenticated connections of one source.
  size_t UnauthenticatedFrom(const std::string& source) const;

 private:
  struct Entry {
    std::string source;
    bool authenticated = false;
    std::list<Id>::iterator in_all;     // in unauth_, while unauthenticated
    std::list<Id>::iterator in_source;  // in by_source_[source], likewise
  };
  // Takes an unauthenticated connection out of the unauthenticated lists.
  void Unlist(Entry& e);
  void Evict(Id id, EvictReason why, Admission& out);

  ConnectionLimits limits_;
  Id next_id_ = 1;
  std::unordered_map<Id, Entry> entries_;
  // Unauthenticated connections in accept order (ids grow), oldest first;
  // the same per source (a source without any has no entry).
  std::list<Id> unauth_;
  std::unordered_map<std::string, std::list<Id>> by_source_;
};

}  // namespace hutch::api
