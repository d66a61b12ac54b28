#include "cli/mcp_bridge.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/http_client.h"

namespace hutch::cli {

namespace {

using client::HttpClient;
using nlohmann::json;

class Bridge {
 public:
  Bridge(std::string host, int port, std::string key)
      : host_(std::move(host)), port_(port), key_(std::move(key)) {}

  int Run() {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json msg = json::parse(line, nullptr, false);
      if (msg.is_discarded()) {
        Write(json{{"jsonrpc", "2.0"},
                   {"id", nullptr},
                   {"error", {{"code", -32700}, {"message", "Parse error: a line is not JSON"}}}});
        continue;
      }
      // initialize first and alone: every later message needs its session.
      if (msg.is_object() && msg.value("method", "") == "initialize") {
        Relay(msg);
        continue;
      }
      const bool quick = !(msg.is_object() && msg.value("method", "") == "tools/call");
      if (quick) {
        std::lock_guard<std::mutex> l(mu_);
        ++quick_in_flight_;
      }
      std::thread([this, msg, quick] {
        Relay(msg);
        if (quick) {
          std::lock_guard<std::mutex> l(mu_);
          --quick_in_flight_;
          idle_.notify_all();
        }
      }).detach();
    }
    // The client closed its side. Quick requests (a ping, tools/list
    // sent just before the end) still get their answers; tool calls are
    // not waited for: they end with their connections when this process
    // exits, which is what cancels them in the sandbox. Then the session.
    std::string session;
    {
      std::unique_lock<std::mutex> l(mu_);
      idle_.wait_for(l, std::chrono::seconds(10), [this] { return quick_in_flight_ == 0; });
      session = session_;
    }
    if (!session.empty()) {
      try {
        HttpClient c(host_, port_, key_);
        c.Request("DELETE", "/mcp", "", {{"Mcp-Session-Id", session}});
      } catch (const std::exception&) {
      }
    }
    std::cout.flush();
    // Relays still waiting on hutchd are abandoned on purpose: closing
    // their connections is what cancels their tool calls.
    _exit(0);
  }

 private:
  void Write(const json& j) {
    std::lock_guard<std::mutex> l(out_mu_);
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    std::cout.flush();
  }

  // A JSON-RPC error answering `msg`, if it was a request.
  void Fail(const json& msg, int code, const std::string& why) {
    if (!msg.is_object() || !msg.contains("id") || !msg.contains("method")) return;
    Write(
        json{{"jsonrpc", "2.0"}, {"id", msg["id"]}, {"error", {{"code", code}, {"message", why}}}});
  }

  // Writes each JSON-RPC message of a body (one, or a batch's array).
  void WriteBody(const json& msg, const std::string& body, int status) {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded()) {
      Fail(msg, -32603, "hutchd answered " + std::to_string(status) + ": " + body.substr(0, 300));
      return;
    }
    if (j.is_array()) {
      for (const auto& m : j) Write(m);
      return;
    }
    // A transport-level refusal carries a JSON-RPC error without an id
    // (the server could not tell which request): give it the request's.
    if (j.is_object() && j.contains("error") && j["id"].is_null() && msg.is_object() &&
        msg.contains("id"))
      j["id"] = msg["id"];
    else if (!j.is_object() || !j.contains("jsonrpc")) {
      // hutch's own error JSON (401, 429): said as a JSON-RPC error.
      Fail(msg, -32603, "hutchd answered " + std::to_string(status) + ": " + body.substr(0, 300));
      return;
    }
    Write(j);
  }

  void Relay(const json& msg) {
    std::map<std::string, std::string> h = {{"Content-Type", "application/json"},
                                            {"Accept", "application/json, text/event-stream"}};
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!session_.empty()) h["Mcp-Session-Id"] = session_;
      if (!version_.empty()) h["MCP-Protocol-Version"] = version_;
    }
    const std::string method = msg.is_object() ? msg.value("method", "") : "";
    const std::string body = msg.dump(-1, ' ', false, json::error_handler_t::replace);
    try {
      HttpClient c(host_, port_, key_);
      client::Response r;
      if (method == "tools/call") {
        // Progress notifications, then the result, as events.
        r = c.SseRequest("POST", "/mcp", body, h, [this](const client::SseEvent& e) {
          json m = json::parse(e.data, nullptr, false);
          if (!m.is_discarded()) Write(m);
          return true;
        });
        if (!r.header("x-stream-error").empty())
          Fail(msg, -32603, "the connection to hutchd broke: " + r.header("x-stream-error"));
        if (r.body.empty()) return;
      } else {
        r = c.Request("POST", "/mcp", body, h);
      }
      if (method == "initialize" && r.status == 200) {
        json j = json::parse(r.body, nullptr, false);
        std::lock_guard<std::mutex> l(mu_);
        session_ = r.header("mcp-session-id");
        if (!j.is_discarded() && j.contains("result"))
          version_ = j["result"].value("protocolVersion", "");
      }
      if (r.status == 202 || r.body.empty()) return;
      WriteBody(msg, r.body, r.status);
    } catch (const std::exception& e) {
      Fail(msg, -32603, std::string("cannot reach hutchd: ") + e.what());
    }
  }

  std::string host_;
  int port_;
  std::string key_;
  std::mutex mu_;  // session_, version_, quick_in_flight_
  std::condition_variable idle_;
  int quick_in_flight_ = 0;
  std::mutex out_mu_;  // stdout: one message per line, never interleaved
  std::string session_, version_;
};

}  // namespace

int RunMcpBridge(const std::string& host, int port, const std::string& key) {
  std::ios::sync_with_stdio(false);
  Bridge b(host, port, key);
  return b.Run();
}

std::string McpConfigSnippet(const std::string& client, const std::string& url,
                             const std::string& key, const std::string& hutch_path) {
  const std::string shown_key = key.empty() ? "<your hutch API key>" : key;
  std::string base = url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  json j;
  if (client == "claude") {
    // Claude Desktop (claude_desktop_config.json) launches stdio servers.
    j = {{"mcpServers",
          {{"hutch",
            {{"command", hutch_path},
             {"args", {"mcp"}},
             {"env", {{"HUTCH_URL", base}, {"HUTCH_API_KEY", shown_key}}}}}}}};
  } else if (client == "cursor") {
    // ~/.cursor/mcp.json: Streamable HTTP with a header.
    j = {{"mcpServers",
          {{"hutch",
            {{"url", base + "/mcp"}, {"headers", {{"Authorization", "Bearer " + shown_key}}}}}}}};
  } else if (client == "vscode") {
    // .vscode/mcp.json: the key is asked for once and kept by VS Code.
    j = {{"servers",
          {{"hutch",
            {{"type", "http"},
             {"url", base + "/mcp"},
             {"headers", {{"Authorization", "Bearer ${input:hutch-api-key}"}}}}}}},
         {"inputs",
          {{{"type", "promptString"},
            {"id", "hutch-api-key"},
            {"description", "hutch API key"},
            {"password", true}}}}};
  } else if (client == "claude-code") {
    return "claude mcp add --transport http hutch " + base +
           "/mcp --header \"Authorization: Bearer " + shown_key + "\"\n";
  } else {
    return "";
  }
  return j.dump(2) + "\n";
}

}  // namespace hutch::cli
