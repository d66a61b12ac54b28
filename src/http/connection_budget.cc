#include "http/connection_budget.h"

#include <algorithm>

namespace hutch::api {

const char* EvictReasonName(EvictReason r) {
  switch (r) {
    case EvictReason::kSource:
      return "per_address";
    case EvictReason::kBudget:
      return "unauthenticated_budget";
    case EvictReason::kCapacity:
      return "max_connections";
  }
  return "unknown";
}

std::string SourceKey(const boost::asio::ip::address& a) {
  if (a.is_v4()) return a.to_v4().to_string();
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped())
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

ConnectionBudget::ConnectionBudget(ConnectionLimits limits) { set_limits(limits); }

void ConnectionBudget::set_limits(ConnectionLimits limits) {
  // Zero would leave no room for any new connection to send its first
  // request (every connection starts unauthenticated).
  limits.max_connections = std::max<size_t>(limits.max_connections, 1);
  limits.max_unauthenticated = std::max<size_t>(limits.max_unauthenticated, 1);
  limits.max_unauthenticated_per_source =
      std::max<size_t>(limits.max_unauthenticated_per_source, 1);
  limits_ = limits;
}

ConnectionBudget::Admission ConnectionBudget::Admit(const std::string& source) {
  Admission out;
  // Per source first: a flood from one address makes room among its own
  // connections and nobody else's.
  for (auto it = by_source_.find(source);
       it != by_source_.end() && it->second.size() >= limits_.max_unauthenticated_per_source;
       it = by_source_.find(source))
    Evict(it->second.front(), EvictReason::kSource, out);
  while (unauth_.size() >= limits_.max_unauthenticated)
    Evict(unauth_.front(), EvictReason::kBudget, out);
  while (entries_.size() >= limits_.max_connections && !unauth_.empty())
    Evict(unauth_.front(), EvictReason::kCapacity, out);
  if (entries_.size() >= limits_.max_connections) return out;
  out.admitted = true;
  out.id = next_id_++;
  Entry& e = entries_[out.id];
  e.source = source;
  e.in_all = unauth_.insert(unauth_.end(), out.id);
  auto& mine = by_source_[source];
  e.in_source = mine.insert(mine.end(), out.id);
  return out;
}

void ConnectionBudget::Unlist(Entry& e) {
  unauth_.erase(e.in_all);
  auto src = by_source_.find(e.source);
  src->second.erase(e.in_source);
  if (src->second.empty()) by_source_.erase(src);
}

void ConnectionBudget::Evict(Id id, EvictReason why, Admission& out) {
  auto it = entries_.find(id);
  Unlist(it->second);
  entries_.erase(it);
  out.evicted.emplace_back(id, why);
}

void ConnectionBudget::Authenticate(Id id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.authenticated) return;
  Unlist(it->second);
  it->second.authenticated = true;
}

void ConnectionBudget::Remove(Id id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (!it->second.authenticated) Unlist(it->second);
  entries_.erase(it);
}

bool ConnectionBudget::IsAuthenticated(Id id) const {
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.authenticated;
}

size_t ConnectionBudget::UnauthenticatedFrom(const std::string& source) const {
  auto it = by_source_.find(source);
  return it == by_source_.end() ? 0 : it->second.size();
}

}  // namespace hutch::api
