// One-line diagnostics on stderr, for unexpected errors only: the agent's
// stderr ends up in hutchd's sandbox log.
#pragma once

#include <cstdio>
#include <string>

namespace hutch::agent {

inline void Log(const std::string& msg) { std::fprintf(stderr, "hutch-agent: %s\n", msg.c_str()); }

}  // namespace hutch::agent
