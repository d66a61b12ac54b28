// Sandbox lifecycle tools, ports and templates: each the /v1 call of the
// same name, onto SandboxManager.
#include "api/common/json_fields.h"
#include "api/mcp/mcp_tools.h"
#include "net/net_policy.h"

namespace hutch::api::mcp {

namespace {

ToolOutput Structured(json j, std::string text) {
  ToolOutput o;
  o.text = std::move(text);
  o.structured = std::move(j);
  return o;
}

std::string SandboxLine(const json& r) {
  return r.value("id", "") + " (" + r.value("template", "") + ", " + r.value("status", "") + ")";
}

}  // namespace

asio::awaitable<Result<ToolOutput>> Tools::SandboxCreate(const json& a, ToolCall& call) {
  MCP_FIELD(tpl, OptString(a, "template"));
  MCP_FIELD(ttl, OptInt(a, "ttl_seconds", 1, INT32_MAX));
  MCP_FIELD(env, OptEnvMap(a, "env"));
  MCP_FIELD(meta, OptStringMap(a, "metadata"));
  CreateOptions o;
  if (*tpl) o.template_name = **tpl;
  if (*ttl) o.ttl_seconds = **ttl;
  if (*env) o.env = **env;
  if (*meta) o.metadata = **meta;
  if (auto it = a.find("network"); it != a.end() && !it->is_null()) {
    auto p = net::ParseNetworkPolicy(*it);
    if (!p.ok()) co_return p.error();
    o.network = std::move(p).value();
  }
  o.owner_key = call.who.owner;
  o.scope = call.who.Scope();
  auto rec = co_await mgr_->Create(std::move(o));
  if (!rec.ok()) co_return rec.error();
  json j = rec->ToJson();
  co_return Structured(j, "Created sandbox " + SandboxLine(j) + ":\n" + j.dump(2));
}

asio::awaitable<Result<ToolOutput>> Tools::SandboxList(const json& a, ToolCall& call) {
  ListFilter f;
  MCP_FIELD(status, OptString(a, "status"));
  if (*status) {
    SandboxStatus st;
    if (!ParseStatus(**status, &st))
      co_return MakeError(Code::kInvalidRequest, "unknown status '" + **status + "'");
    f.status = st;
  }
  f.owner = call.who.Scope();
  f.limit = 1000;
  json list = json::array();
  std::string text;
  while (true) {
    auto page = mgr_->List(f);
    for (const auto& r : page.items) {
      list.push_back(r.ToJson());
      text += SandboxLine(list.back()) + "\n";
    }
    if (page.next_cursor.empty()) break;
    f.cursor = page.next_cursor;
  }
  if (list.empty()) text = "No sandboxes.\n";
  co_return Structured(json{{"sandboxes", list}}, text);
}

asio::awaitable<Result<ToolOutput>> Tools::SandboxGet(const json& a, ToolCall& call) {
  MCP_FIELD(id, RequiredString(a, "sandbox_id"));
  if (auto st = Visible(*id, call); !st.ok()) co_return st.error();
  auto rec = mgr_->Get(*id);
  if (!rec.ok()) co_return rec.error();
  json j = rec->ToJson();
  co_return Structured(j, j.dump(2));
}

asio::awaitable<Result<ToolOutput>> Tools::SandboxKill(const json& a, ToolCall& call) {
  MCP_FIELD(id, RequiredString(a, "sandbox_id"));
  if (auto st = Visible(*id, call); !st.ok()) co_return st.error();
  if (auto st = co_await mgr_->Delete(*id); !st.ok()) co_return st.error();
  co_return Structured(json{{"sandbox_id", *id}, {"killed", true}},
                       "Sandbox " + *id + " is killed and removed.");
}

asio::awaitable<Result<ToolOutput>> Tools::SandboxPause(const json& a, ToolCall& call) {
  MCP_FIELD(id, RequiredString(a, "sandbox_id"));
  if (auto st = Visible(*id, call); !st.ok()) co_return st.error();
  auto rec = mgr_->Pause(*id);
  if (!rec.ok()) co_return rec.error();
  json j = rec->ToJson();
  co_return Structured(j, "Sandbox " + SandboxLine(j));
}

asio::awaitable<Result<ToolOutput>> Tools::SandboxResume(const json& a, ToolCall& call) {
  MCP_FIELD(id, RequiredString(a, "sandbox_id"));
  if (auto st = Visible(*id, call); !st.ok()) co_return st.error();
  auto rec = mgr_->Resume(*id);
  if (!rec.ok()) co_return rec.error();
  json j = rec->ToJson();
  co_return Structured(j, "Sandbox " + SandboxLine(j));
}

asio::awaitable<Result<ToolOutput>> Tools::SandboxSnapshot(const json& a, ToolCall& call) {
  MCP_FIELD(id, RequiredString(a, "sandbox_id"));
  if (auto st = Visible(*id, call); !st.ok()) co_return st.error();
  auto snap = co_await mgr_->Snapshot(*id, !call.who.admin());
  if (!snap.ok()) co_return snap.error();
  json j = snap->ToJson();
  co_return Structured(j, "Snapshot " + j.value("id", "") + " of " + *id + ":\n" + j.dump(2));
}

asio::awaitable<Result<ToolOutput>> Tools::SandboxFork(const json& a, ToolCall& call) {
  MCP_FIELD(id, RequiredString(a, "sandbox_id"));
  MCP_FIELD(count, OptInt(a, "count", 1, 100));
  if (auto st = Visible(*id, call); !st.ok()) co_return st.error();
  auto kids = co_await mgr_->Fork(*id, static_cast<int>(count->value_or(1)), call.who.owner,
                                  !call.who.admin());
  if (!kids.ok()) co_return kids.error();
  json list = json::array();
  std::string text = "Forked " + *id + " into:\n";
  for (const auto& r : *kids) {
    list.push_back(r.ToJson());
    text += SandboxLine(list.back()) + "\n";
  }
  co_return Structured(json{{"sandboxes", list}}, text);
}

asio::awaitable<Result<ToolOutput>> Tools::PortUrl(const json& a, ToolCall& call) {
  MCP_FIELD(id, RequiredString(a, "sandbox_id"));
  MCP_FIELD(port, OptInt(a, "port", 1, 65535));
  if (auto st = Visible(*id, call); !st.ok()) co_return st.error();
  auto rec = mgr_->Get(*id);
  if (!rec.ok()) co_return rec.error();
  const std::string url =
      call.base_url + "/v1/sandboxes/" + *id + "/ports/" + std::to_string(**port) + "/";
  co_return Structured(json{{"url", url},
                            {"sandbox_id", *id},
                            {"port", **port},
                            {"auth", "Authorization: Bearer <the same API key>"}},
                       url + "\n(send the same API key: Authorization: Bearer <key>)");
}

asio::awaitable<Result<ToolOutput>> Tools::TemplateList(const json&, ToolCall& call) {
  json items = json::array();
  std::string text;
  for (const auto& r : mgr_->templates()->List()) {
    if (!r.owner.empty() && !call.who.Owns(r.owner)) continue;
    items.push_back(r.ToJson());
    const json& t = items.back();
    text += t.value("name", "");
    if (t.contains("description") && t["description"].is_string())
      text += ": " + t["description"].get<std::string>();
    text += "\n";
  }
  co_return Structured(json{{"templates", items}}, text);
}

}  // namespace hutch::api::mcp
