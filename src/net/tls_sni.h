// The server name a TLS client asks for (SNI), read from its first bytes
// without consuming them: the vault's egress proxy peeks at a sandbox's
// ClientHello to decide whether to interpose (a bound host) or to pass the
// connection through untouched. Pure functions, any thread.
#pragma once

#include <string>
#include <string_view>

namespace hutch::net {

struct SniPeek {
  enum Kind {
    kNeedMore,  // the first record is not complete yet
    kNotTls,    // not a TLS handshake record holding a ClientHello
    kFound,     // `name` is set (lower case); "" when the hello names none
  } kind = kNeedMore;
  std::string name;
};

// Reads the first TLS record of `bytes` (only the first: a ClientHello
// split over records is treated as naming no server).
SniPeek PeekSni(std::string_view bytes);

}  // namespace hutch::net
