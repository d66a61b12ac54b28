// Short-lived, single-use tickets that open a sandbox's terminal
// WebSocket (GET /v1/sandboxes/{id}/pty?ticket=T) without the API key in
// its URL: a browser cannot put an Authorization header on a WebSocket,
// and a URL is what logs, history and Referer keep. An authenticated POST
// (/v1/sandboxes/{id}/pty/ticket) issues one for one sandbox; it is good
// for `ttl` and is spent by its first presentation, whatever the outcome.
//
// Only the tickets' SHA-256 are kept, with the hash of the key that asked
// (the guard then checks that key is still accepted: a revoked key's
// tickets die with it). At most `max_live` are outstanding: the oldest
// gives way. Time is passed in (tests need no sleeps). I/O thread only.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hutch::auth {

class PtyTickets {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PtyTickets(std::chrono::seconds ttl = std::chrono::seconds(30), size_t max_live = 4096)
      : ttl_(ttl), max_live_(max_live) {}

  // A new ticket ("pt_" and 64 hex digits of fresh randomness) for the key
  // whose hash is `key_hash`, on sandbox `sandbox_id`.
  std::string Issue(const std::string& key_hash, const std::string& sandbox_id,
                    Clock::time_point now);
  // The key hash the ticket was issued to, when it is outstanding, not
  // expired at `now` and for `sandbox_id`; nullopt otherwise. A ticket
  // presented once is gone, even for the wrong sandbox.
  std::optional<std::string> Redeem(std::string_view ticket, const std::string& sandbox_id,
                                    Clock::time_point now);
  // Outstanding tickets (expired ones are swept at each Issue).
  size_t outstanding() const { return live_.size(); }
  std::chrono::seconds ttl() const { return ttl_; }

 private:
  struct Entry {
    std::string key_hash;
    std::string sandbox_id;
    Clock::time_point expires;
  };
  void Sweep(Clock::time_point now);

  std::chrono::seconds ttl_;
  size_t max_live_;
  std::unordered_map<std::string, Entry> live_;  // by the ticket's SHA-256
  std::deque<std::string> order_;                // issue order (= expiry order)
};

}  // namespace hutch::auth
