// /v1/sandboxes/{id}/pty: an interactive terminal over a WebSocket, and
// /pty/ticket, which issues the single-use ticket a browser opens it with
// (auth/pty_tickets.h; the /v1 guard redeems it).
//
// Binary messages carry terminal bytes both ways; a text message
// {"resize":{"cols":N,"rows":N}} resizes. When the shell exits the server
// sends a text message {"exit":{...}} and closes (1000); when the sandbox
// goes away, {"error":{...}} and close 1011. When the client closes (or
// vanishes), the terminal's whole session is hung up inside the sandbox.
//
// Two coroutines share the socket, as Beast allows (one read and one write
// in flight): the reader turns client messages into keystrokes/resizes,
// this handler writes output. Output is written before its credit is
// returned to the agent, so a client that stops reading stops the shell's
// output at the agent (256 KiB in flight at most), not in hutchd's memory.
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

#include "api/common/exec_body.h"
#include "api/common/json_fields.h"
#include "api/v1/v1_api.h"
#include "core/pty_session.h"

namespace hutch::api {

namespace websocket = beast::websocket;
using nlohmann::json;

namespace {

// Largest message a client may send (keystrokes, pastes).
constexpr size_t kMaxClientMessage = 1 << 20;
// How long a client gets to answer our close before it is cut off.
constexpr auto kCloseGrace = std::chrono::seconds(5);

struct ReaderState {
  explicit ReaderState(asio::any_io_executor ex) : wake(ex) {}
  bool done = false;
  asio::steady_timer wake;
};

// Applies a text message; anything but a well-formed resize is ignored
// (a terminal has nowhere to report it).
asio::awaitable<Status> OnText(PtySession& s, const std::string& msg) {
  json j = json::parse(msg, nullptr, false);
  if (!j.is_object() || !j.contains("resize") || !j["resize"].is_object()) co_return Status{};
  const json& r = j["resize"];
  if (!r.contains("cols") || !r.contains("rows") || !r["cols"].is_number_integer() ||
      !r["rows"].is_number_integer())
    co_return Status{};
  const int64_t cols = r["cols"].get<int64_t>(), rows = r["rows"].get<int64_t>();
  if (cols < 1 || cols > 10000 || rows < 1 || rows > 10000) co_return Status{};
  co_return co_await s.Resize(static_cast<int>(cols), static_cast<int>(rows));
}

}  // namespace

asio::awaitable<void> V1Api::Pty(HttpContext& ctx, const std::string& id) {
  if (ctx.method() != http::verb::get)
    co_return co_await ctx.SendError(
        MakeError(Code::kMethodNotAllowed,
                  "method " + std::string(http::to_string(ctx.method())) + " not allowed here"));
  PtyRequest req;
  HUTCH_FIELD(cols, QueryInt(ctx.Query("cols"), "cols", 1, 10000));
  HUTCH_FIELD(rows, QueryInt(ctx.Query("rows"), "rows", 1, 10000));
  req.cols = static_cast<int>(cols->value_or(80));
  req.rows = static_cast<int>(rows->value_or(24));
  if (auto u = ctx.Query("user")) req.user = *u;
  if (auto c = ctx.Query("cwd")) {
    if (auto st = CheckPath(*c, "cwd"); !st.ok()) co_return co_await ctx.SendError(st.error());
    req.cwd = *c;
  }
  if (auto c = ctx.Query("cmd")) {
    if (c->empty())
      co_return co_await ctx.SendError(MakeError(Code::kInvalidRequest, "'cmd' is empty"));
    req.argv = {"/bin/sh", "-c", *c};
  }
  HUTCH_FIELD(sb, mgr_->GetRunning(id));
  auto upgrade = ctx.RequestHeader();
  if (!websocket::is_upgrade(upgrade))
    co_return co_await ctx.SendError(MakeError(
        Code::kInvalidRequest,
        "/pty is a WebSocket: send the upgrade headers (Connection: Upgrade, Upgrade: websocket)"));
  // The shell starts before the upgrade is accepted, so a bad user or cwd
  // is still an ordinary JSON error.
  HUTCH_FIELD(started, co_await PtySession::Start(*sb, req));
  std::shared_ptr<PtySession> session = std::move(started).value();
  ++metrics_.execs;
  GaugeHold open_stream{metrics_.open_streams};

  websocket::stream<HttpStream&> ws(ctx.TakeStream(101));
  // The HTTP timeouts no longer apply; the WebSocket's own (handshake,
  // idle with pings) do.
  beast::get_lowest_layer(ws).expires_never();
  ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws.set_option(
      websocket::stream_base::decorator([rid = ctx.request_id()](websocket::response_type& res) {
        res.set(http::field::server, "hutchd");
        res.set("X-Request-Id", rid);
      }));
  ws.read_message_max(kMaxClientMessage);
  boost::system::error_code ec;
  co_await ws.async_accept(upgrade, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return;  // dropping the session hangs up the terminal
  ws.binary(true);

  auto ex = co_await asio::this_coro::executor;
  auto reader = std::make_shared<ReaderState>(ex);
  // The reader borrows `ws`: this frame outlives it (see the wait below).
  asio::co_spawn(
      ex,
      [&ws, session, reader]() -> asio::awaitable<void> {
        beast::flat_buffer buf;
        for (;;) {
          boost::system::error_code rec;
          co_await ws.async_read(buf, asio::redirect_error(asio::use_awaitable, rec));
          if (rec) break;
          std::string msg = beast::buffers_to_string(buf.data());
          buf.consume(buf.size());
          // (Not `c ? co_await a : co_await b`: GCC 12 mis-destroys the
          // temporaries of a conditional with co_await in both arms.)
          Status st;
          if (ws.got_text()) st = co_await OnText(*session, msg);
          else st = co_await session->Write(msg);
          if (!st.ok()) break;
        }
        reader->done = true;
        session->Interrupt();
        reader->wake.cancel();
      },
      asio::detached);

  bool closing = false;
  for (;;) {
    PtyEvent ev = co_await session->Next();
    if (ev.kind == PtyEvent::kOutput) {
      co_await ws.async_write(asio::buffer(ev.data), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      session->Consumed(ev.data.size());
      continue;
    }
    if (ev.kind == PtyEvent::kError && reader->done) break;  // the client left
    json last = ev.kind == PtyEvent::kExit ? json{{"exit", ExitJson(ev.exit)}}
                                           : json{{"error",
                                                   {{"code", CodeName(ev.error.code)},
                                                    {"message", ev.error.message},
                                                    {"request_id", ctx.request_id()}}}};
    ws.text(true);
    std::string text = last.dump(-1, ' ', false, json::error_handler_t::replace);
    co_await ws.async_write(asio::buffer(text), asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
      const auto code = ev.kind == PtyEvent::kExit ? websocket::close_code::normal
                                                   : websocket::close_code::internal_error;
      co_await ws.async_close(websocket::close_reason(code),
                              asio::redirect_error(asio::use_awaitable, ec));
      closing = !ec;
    }
    break;
  }
  // Wait for the reader: after our close, the client's answer ends its
  // read; a client that does not answer (or any other case) is cut off.
  if (!reader->done) {
    if (closing) {
      reader->wake.expires_after(kCloseGrace);
      co_await reader->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    if (!reader->done) beast::get_lowest_layer(ws).cancel();
    while (!reader->done) {
      reader->wake.expires_after(std::chrono::seconds(1));
      co_await reader->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  spdlog::info("pty_closed sandbox={} pid={} request_id={}", id, session->pid(), ctx.request_id());
}

asio::awaitable<void> V1Api::PtyTicket(HttpContext& ctx, const std::string& id) {
  // No body is needed (read, so the connection can carry the WebSocket
  // that follows). Only a running sandbox has a terminal to open: refused
  // here as /pty would refuse it.
  // (Written out: with HUTCH_FIELD for these two, GCC 12's build hit
  // "unreachable program point" in std::variant under UBSan here.)
  auto body = co_await ctx.ReadBody(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  const std::string ticket =
      pty_tickets_.Issue(ctx.principal().key_hash, id, auth::PtyTickets::Clock::now());
  const json answer = {{"ticket", ticket}, {"expires_in", pty_tickets_.ttl().count()}};
  co_await ctx.SendJson(201, answer);
}

}  // namespace hutch::api
