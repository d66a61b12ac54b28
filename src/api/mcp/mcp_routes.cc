// The Streamable HTTP transport of /mcp: sessions, content negotiation,
// JSON-RPC dispatch, and the event stream of a tools/call.
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/common/bearer_admit.h"
#include "api/mcp/mcp_api.h"

namespace hutch::api::mcp {

namespace {

constexpr const char* kServerName = "hutch";
constexpr const char* kServerVersion = "0.1.0";
// JSON-RPC error code for an unknown session (implementation-defined range).
constexpr int kSessionNotFound = -32001;

// Tool output is made valid UTF-8 by the tools; replace anything else
// rather than throw mid-stream.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string SseMessage(const json& j) { return "event: message\ndata: " + Dump(j) + "\n\n"; }

bool ToolCallNamed(const Message& m) {
  return m.params.is_object() && m.params.contains("name") && m.params["name"].is_string();
}

bool HeaderHas(const std::string& header, const char* what) {
  return header.find(what) != std::string::npos;
}

const char* kInstructions =
    "hutch runs code in isolated Linux sandboxes. For a one-off, call `run` (code with a "
    "language, or a shell cmd). To keep state, call sandbox_create (template code-interpreter "
    "for run_code), then exec, run_code and the file tools with its id, and sandbox_kill when "
    "done.";

}  // namespace

void McpApi::Register(Router& r) {
  using V = http::verb;
  Mount mount;
  mount.prefix = "/mcp";
  mount.guard = [this](HttpContext& ctx) { return Admit(ctx); };
  r.AddMount(std::move(mount));
  r.Add(V::post, "/mcp", [this](HttpContext& c, const RouteMatch&) { return Post(c); });
  r.Add(V::get, "/mcp", [this](HttpContext& c, const RouteMatch&) { return Get(c); });
  r.Add(V::delete_, "/mcp", [this](HttpContext& c, const RouteMatch&) { return Delete(c); });
}

asio::awaitable<bool> McpApi::Admit(HttpContext& ctx) {
  co_return co_await AdmitBearer(ctx, *creds_, /*challenge=*/true);
}

asio::awaitable<void> McpApi::Refuse(HttpContext& ctx, int status, int code,
                                     const std::string& why) {
  ctx.NoteError(MakeError(status == 404 ? Code::kNotFound : Code::kInvalidRequest, why));
  co_await ctx.SendText(status, "application/json", Dump(ErrorMessage(nullptr, code, why)));
}

asio::awaitable<std::shared_ptr<Session>> McpApi::SessionOf(HttpContext& ctx) {
  const std::string id = ctx.Header("Mcp-Session-Id");
  if (id.empty()) {
    co_await Refuse(ctx, 400, kInvalidRequest,
                    "Bad Request: Mcp-Session-Id header is required (send initialize first)");
    co_return nullptr;
  }
  auto s = sessions_.Find(id, ctx.principal().owner);
  if (!s) {
    co_await Refuse(ctx, 404, kSessionNotFound,
                    "Session not found: it ended or expired; initialize a new one");
    co_return nullptr;
  }
  const std::string v = ctx.Header("MCP-Protocol-Version");
  if (!v.empty() && !SupportedVersion(v)) {
    co_await Refuse(ctx, 400, kInvalidRequest,
                    "Bad Request: unsupported MCP-Protocol-Version " + v);
    co_return nullptr;
  }
  co_return s;
}

ToolCall McpApi::MakeCall(HttpContext& ctx) const {
  ToolCall call;
  call.who = ctx.principal();
  const std::string host = ctx.Header("Host");
  call.base_url = "http://" + (host.empty() ? std::string("127.0.0.1") : host);
  return call;
}

asio::awaitable<void> McpApi::Post(HttpContext& ctx) {
  const std::string ctype = ctx.Header("Content-Type");
  if (!HeaderHas(ctype, "application/json"))
    co_return co_await Refuse(ctx, 415, kInvalidRequest,
                              "Unsupported Media Type: Content-Type must be application/json");
  const std::string accept = ctx.Header("Accept");
  const bool sse_ok =
      accept.empty() || HeaderHas(accept, "text/event-stream") || HeaderHas(accept, "*/*");
  if (!accept.empty() && !sse_ok && !HeaderHas(accept, "application/json"))
    co_return co_await Refuse(ctx, 406, kInvalidRequest,
                              "Not Acceptable: accept application/json and text/event-stream");
  auto body = co_await ctx.ReadBody(cfg_.body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  json parsed = json::parse(*body, nullptr, false);
  if (parsed.is_discarded())
    co_return co_await Refuse(ctx, 400, kParseError, "Parse error: the body is not JSON");
  const bool batch = parsed.is_array();
  std::vector<Message> msgs;
  if (batch) {
    for (const auto& j : parsed) msgs.push_back(Classify(j));
  } else {
    msgs.push_back(Classify(parsed));
  }
  if (msgs.empty())
    co_return co_await Refuse(ctx, 400, kInvalidRequest, "Invalid Request: an empty batch");

  for (const auto& m : msgs) {
    if (m.kind == Message::kRequest && m.method == "initialize") {
      if (batch)
        co_return co_await Refuse(ctx, 400, kInvalidRequest,
                                  "Invalid Request: initialize must not be part of a batch");
      co_return co_await Initialize(ctx, m);
    }
  }
  auto session = co_await SessionOf(ctx);
  if (!session) co_return;
  if (!batch && msgs[0].kind == Message::kInvalid)
    co_return co_await Refuse(ctx, 400, kInvalidRequest, "Invalid Request: " + msgs[0].why);

  bool any_request = false;
  for (const auto& m : msgs) {
    if (m.kind == Message::kNotification) Notify(*session, m);
    any_request |= m.kind == Message::kRequest || m.kind == Message::kInvalid;
  }
  if (!any_request) co_return co_await ctx.SendEmpty(202);
  ctx.AddHeader("Mcp-Session-Id", session->id());
  if (!batch && msgs[0].method == "tools/call" && sse_ok)
    co_return co_await StreamToolCall(ctx, session, msgs[0]);
  json answers = json::array();
  for (const auto& m : msgs) {
    if (m.kind == Message::kInvalid)
      answers.push_back(ErrorMessage(nullptr, kInvalidRequest, m.why));
    if (m.kind == Message::kRequest) {
      json a = co_await Answer(ctx, *session, m);
      answers.push_back(std::move(a));
    }
  }
  const json out = batch ? answers : answers[0];
  co_await ctx.SendText(200, "application/json", Dump(out));
}

asio::awaitable<void> McpApi::Initialize(HttpContext& ctx, const Message& m) {
  const std::string wanted = m.params.is_object() ? m.params.value("protocolVersion", "") : "";
  const std::string version = SupportedVersion(wanted) ? wanted : ProtocolVersions().front();
  auto s = sessions_.Create(ctx.principal().owner, version);
  json result = {
      {"protocolVersion", version},
      {"capabilities", {{"tools", {{"listChanged", false}}}}},
      {"serverInfo",
       {{"name", kServerName}, {"title", "hutch sandboxes"}, {"version", kServerVersion}}},
      {"instructions", kInstructions}};
  ctx.AddHeader("Mcp-Session-Id", s->id());
  co_await ctx.SendText(200, "application/json", Dump(ResultMessage(m.id, std::move(result))));
}

void McpApi::Notify(Session& s, const Message& m) {
  if (m.method == "notifications/cancelled" && m.params.is_object() &&
      m.params.contains("requestId"))
    s.Cancel(m.params["requestId"].dump());
  // notifications/initialized and others need nothing from hutch.
}

asio::awaitable<json> McpApi::Answer(HttpContext& ctx, Session& s, const Message& m) {
  if (m.method == "ping") co_return ResultMessage(m.id, json::object());
  if (m.method == "tools/list") co_return ResultMessage(m.id, tools_.List(ctx.principal()));
  if (m.method == "initialize")
    co_return ErrorMessage(m.id, kInvalidRequest, "this session is initialized already");
  if (m.method == "tools/call") {
    if (!ToolCallNamed(m))
      co_return ErrorMessage(m.id, kInvalidParams, "tools/call needs params.name (a string)");
    ToolCall call = MakeCall(ctx);
    json result = co_await CallTool(ctx, s, m, call);
    co_return ResultMessage(m.id, std::move(result));
  }
  co_return ErrorMessage(m.id, kMethodNotFound, "Method not found: " + m.method);
}

asio::awaitable<void> McpApi::StreamToolCall(HttpContext& ctx, std::shared_ptr<Session> s,
                                             const Message& m) {
  if (!ToolCallNamed(m)) {
    const json err = ErrorMessage(m.id, kInvalidParams, "tools/call needs params.name (a string)");
    co_return co_await ctx.SendText(200, "application/json", Dump(err));
  }
  if (auto st = co_await ctx.BeginSse(); !st.ok()) co_return;
  ToolCall call = MakeCall(ctx);
  auto cancel = call.cancel;
  bool broken = false;
  json token = nullptr;
  if (m.params.contains("_meta") && m.params["_meta"].is_object() &&
      m.params["_meta"].contains("progressToken"))
    token = m.params["_meta"]["progressToken"];
  if (!token.is_null()) {
    call.progress = [&ctx, &broken, cancel, token](double progress,
                                                   std::string message) -> asio::awaitable<void> {
      if (broken) co_return;
      json note = {
          {"jsonrpc", "2.0"},
          {"method", "notifications/progress"},
          {"params",
           {{"progressToken", token}, {"progress", progress}, {"message", std::move(message)}}}};
      if (auto st = co_await ctx.WriteChunk(SseMessage(note)); !st.ok()) {
        broken = true;
        cancel->Fire();
      }
    };
  }
  call.keepalive = [&ctx, &broken, cancel]() -> asio::awaitable<void> {
    if (broken) co_return;
    if (auto st = co_await ctx.WriteChunk(": ping\n\n"); !st.ok()) {
      broken = true;
      cancel->Fire();
    }
  };
  json result = co_await CallTool(ctx, *s, m, call);
  call.progress = nullptr;
  call.keepalive = nullptr;
  if (!broken) {
    if (auto st = co_await ctx.WriteChunk(SseMessage(ResultMessage(m.id, std::move(result))));
        st.ok())
      (void)co_await ctx.EndStream();
  }
}

asio::awaitable<json> McpApi::CallTool(HttpContext& ctx, Session& s, const Message& m,
                                       ToolCall& call) {
  // Cancelled by a notifications/cancelled for its id, the session's end,
  // or the client closing the request's connection.
  auto cancel = call.cancel;
  const std::string key = m.id.dump();
  s.Track(key, [cancel] { cancel->Fire(); });
  ctx.WatchClose([cancel] { cancel->Fire(); });
  json result =
      co_await tools_.Call(m.params["name"], m.params.value("arguments", json::object()), call);
  ctx.StopWatchingClose();
  s.Untrack(key);
  co_return result;
}

asio::awaitable<void> McpApi::Get(HttpContext& ctx) {
  if (!HeaderHas(ctx.Header("Accept"), "text/event-stream"))
    co_return co_await Refuse(ctx, 406, kInvalidRequest,
                              "Not Acceptable: the GET stream is text/event-stream");
  auto s = co_await SessionOf(ctx);
  if (!s) co_return;
  // hutch sends nothing unprompted today (no list changes, no sampling),
  // so the stream carries keep-alives until the session or client ends.
  std::vector<std::pair<std::string, std::string>> session_header = {{"Mcp-Session-Id", s->id()}};
  if (auto st = co_await ctx.BeginSse(std::move(session_header)); !st.ok()) co_return;
  bool gone = false;
  ctx.WatchClose([&gone] { gone = true; });
  asio::steady_timer tick(co_await asio::this_coro::executor);
  auto since_ping = std::chrono::seconds(0);
  while (!gone && !s->closed()) {
    tick.expires_after(std::chrono::seconds(1));
    boost::system::error_code ec;
    co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    since_ping += std::chrono::seconds(1);
    if (since_ping >= cfg_.ping_interval) {
      since_ping = std::chrono::seconds(0);
      if (auto st = co_await ctx.WriteChunk(": ping\n\n"); !st.ok()) break;
    }
  }
  ctx.StopWatchingClose();
  if (!gone) (void)co_await ctx.EndStream();
}

asio::awaitable<void> McpApi::Delete(HttpContext& ctx) {
  auto s = co_await SessionOf(ctx);
  if (!s) co_return;
  sessions_.Remove(s->id(), ctx.principal().owner);
  co_await ctx.SendEmpty(204);
}

}  // namespace hutch::api::mcp
