// `hutch shell ID`: an interactive terminal in a sandbox over the server's
// PTY WebSocket (GET /v1/sandboxes/{id}/pty).
#pragma once

#include <string>

namespace hutch::cli {

// Connects, puts a terminal stdin in raw mode (restored on every exit
// path), relays bytes both ways and window-size changes (SIGWINCH), and
// returns the remote shell's exit code; 1 with a one-line error on
// failure. Works with a non-terminal stdin too (scripts, tests).
int RunShell(const std::string& host, int port, const std::string& key,
             const std::string& sandbox_id);

}  // namespace hutch::cli
