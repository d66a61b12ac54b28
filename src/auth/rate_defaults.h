// The per-key request rate hutchd applies when --rate-limit and
// --rate-burst are not given (auth::Credentials charges it).
//
// Why these figures: the limit is there so one key cannot take the one
// I/O thread from every other key, not to pace ordinary clients. An agent
// fleet starts by creating its sandboxes all at once (200 concurrent
// creates from one key is the figure hutch is held to) and then talks to
// each of them, so the bucket holds 1000 requests: a fleet's burst and its
// first round of calls. Sustained, 200 a second from one key is a fleet of
// 200 sandboxes each called once a second, a fraction of what hutchd
// serves on two cores; a client looping as fast as it can is held to it
// and told when to come back (429 with Retry-After).
#pragma once

namespace hutch::auth {

constexpr double kDefaultKeyRate = 200;    // requests a second
constexpr double kDefaultKeyBurst = 1000;  // requests at once after an idle spell

}  // namespace hutch::auth
