// `hutch mcp`: the MCP stdio transport (newline-delimited JSON-RPC on
// stdin/stdout, what Claude Desktop and most MCP clients launch) bridged to
// hutchd's /mcp Streamable HTTP endpoint, and `hutch mcp config CLIENT`,
// the config snippet each client takes (docs/mcp.md).
#pragma once

#include <string>

namespace hutch::cli {

// Runs until stdin ends; then ends the session and returns the exit code.
// Each request is relayed on its own connection, so a long tools/call
// does not hold up a ping or a notifications/cancelled behind it.
int RunMcpBridge(const std::string& host, int port, const std::string& key);

// The snippet for `client` (claude, cursor, vscode, claude-code); "" for
// an unknown client.
std::string McpConfigSnippet(const std::string& client, const std::string& url,
                             const std::string& key, const std::string& hutch_path);

}  // namespace hutch::cli
