#include "auth/pty_tickets.h"

#include "common/clock.h"
#include "common/sha256.h"

namespace hutch::auth {

void PtyTickets::Sweep(Clock::time_point now) {
  while (!order_.empty()) {
    auto it = live_.find(order_.front());
    // Redeemed already (its hash is still queued), expired, or one too many.
    if (it != live_.end() && it->second.expires > now && live_.size() < max_live_) break;
    if (it != live_.end()) live_.erase(it);
    order_.pop_front();
  }
}

std::string PtyTickets::Issue(const std::string& key_hash, const std::string& sandbox_id,
                              Clock::time_point now) {
  Sweep(now);
  std::string ticket = "pt_" + RandomHex(32);
  std::string hash = Sha256Hex(ticket);
  live_[hash] = Entry{key_hash, sandbox_id, now + ttl_};
  order_.push_back(std::move(hash));
  return ticket;
}

std::optional<std::string> PtyTickets::Redeem(std::string_view ticket,
                                              const std::string& sandbox_id,
                                              Clock::time_point now) {
  if (ticket.empty()) return std::nullopt;
  auto it = live_.find(Sha256Hex(ticket));
  if (it == live_.end()) return std::nullopt;
  Entry e = std::move(it->second);
  live_.erase(it);
  if (e.expires <= now || e.sandbox_id != sandbox_id) return std::nullopt;
  return std::move(e.key_hash);
}

}  // namespace hutch::auth
