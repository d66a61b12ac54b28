// GET /v1/sandboxes/{id}/pty over a real WebSocket (Beast client) against
// the real hutchd: a shell that answers, resize, the exit message, hangup
// of the whole session when the socket closes, backpressure, and the
// errors an HTTP client sees (bad key, no upgrade).
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "tests/support/test_server.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using hutch::testing::TestServer;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// A WebSocket client whose reads give up after a deadline (asynchronous
// operations driven by run_one_for on a private io_context).
class WsClient {
 public:
  // Connects and performs the upgrade; returns the handshake's HTTP status
  // (101 on success) and the response body in *body.
  int Connect(int port, const std::string& target, const std::string& key,
              std::string* body = nullptr) {
    beast::error_code ec;
    asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"),
                               static_cast<unsigned short>(port));
    beast::get_lowest_layer(ws_).connect(ep, ec);
    if (ec) return -1;
    ws_.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
      if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
    }));
    // The asynchronous handshake: Beast 1.74's synchronous one leaves the
    // response empty when the upgrade is declined.
    websocket::response_type res;
    bool done = false;
    ws_.async_handshake(res, "127.0.0.1", target, [&](beast::error_code e) {
      ec = e;
      done = true;
    });
    io_.restart();
    io_.run_for(std::chrono::seconds(30));
    if (!done) return -1;
    if (body) *body = res.body();
    if (!ec) ws_.binary(true);
    return static_cast<int>(res.result_int());
  }
  void Send(const std::string& bytes) {
    ws_.binary(true);
    beast::error_code ec;
    ws_.write(asio::buffer(bytes), ec);
    EXPECT_FALSE(ec) << ec.message();
  }
  void SendText(const json& j) {
    ws_.text(true);
    beast::error_code ec;
    ws_.write(asio::buffer(j.dump()), ec);
    EXPECT_FALSE(ec) << ec.message();
  }
  // Reads until the terminal output matches `re` (or a text message / the
  // close arrives and nothing more can come). Returns the match or "".
  std::string ReadUntil(const std::regex& re,
                        std::chrono::milliseconds limit = std::chrono::seconds(15)) {
    const auto deadline = Clock::now() + limit;
    std::smatch m;
    while (!std::regex_search(output, m, re)) {
      if (closed) return "";
      // Matches are short: keep the tail only, so a flood of output is not
      // searched again and again.
      if (output.size() > 4096) output.erase(0, output.size() - 512);
      if (!Pump(deadline)) return "";
    }
    std::string hit = m[0];
    output = m.suffix();
    return hit;
  }
  // Reads until the server closes the WebSocket.
  bool ReadUntilClosed(std::chrono::milliseconds limit = std::chrono::seconds(15)) {
    const auto deadline = Clock::now() + limit;
    while (!closed)
      if (!Pump(deadline)) return false;
    return true;
  }
  void Close() {
    beast::error_code ec;
    ws_.close(websocket::close_code::normal, ec);
    // Drain until the server's close answer (or an error) ends the read.
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!closed && Pump(deadline)) {
    }
  }

  std::string output;       // terminal bytes not yet matched
  std::vector<json> texts;  // text messages from the server
  bool closed = false;
  websocket::close_reason close_reason;

 private:
  // Waits for one message; false on timeout.
  bool Pump(Clock::time_point deadline) {
    if (!reading_) {
      reading_ = true;
      ws_.async_read(buf_, [this](beast::error_code ec, size_t) {
        reading_ = false;
        if (ec) {
          closed = true;
          close_reason = ws_.reason();
          return;
        }
        std::string msg = beast::buffers_to_string(buf_.data());
        buf_.consume(buf_.size());
        if (ws_.got_text()) texts.push_back(json::parse(msg, nullptr, false));
        else output += msg;
      });
    }
    while (reading_) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) return false;
      io_.restart();
      io_.run_one_for(std::chrono::duration_cast<std::chrono::milliseconds>(left) +
                      std::chrono::milliseconds(1));
    }
    return true;
  }

  asio::io_context io_;
  websocket::stream<beast::tcp_stream> ws_{io_};
  beast::flat_buffer buf_;
  bool reading_ = false;
};

class ApiPty : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_ && server_->ok());
    id_ = server_->CreateSandbox();
    ASSERT_FALSE(id_.empty());
  }
  void TearDown() override {
    if (server_ && !id_.empty()) {
      auto c = server_->Client();
      EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id_).status, 204);
    }
  }
  TestServer& s() const { return *server_; }
  std::string Target(const std::string& query = "?cols=80&rows=24") const {
    return "/v1/sandboxes/" + id_ + "/pty" + query;
  }
  // Whether `pid` is still a process in the sandbox, seen from an exec.
  bool Alive(int pid) {
    auto r = s().Exec(id_, "ps -o pid= -p " + std::to_string(pid));
    return r["exit_code"] == 0;
  }

  static TestServer* server_;
  std::string id_;
};

TestServer* ApiPty::server_ = nullptr;

TEST_F(ApiPty, ShellAnswersAndExitIsReported) {
  WsClient ws;
  std::string body;
  ASSERT_EQ(ws.Connect(s().port(), Target(), s().key(), &body), 101) << body;
  ws.Send("echo $((6*7))\n");
  // The terminal echoes the line as typed; the answer is a line of its own.
  EXPECT_NE(ws.ReadUntil(std::regex("[\r\n]42\r\n")), "") << ws.output;
  ws.Send("tty; id -un\n");
  EXPECT_NE(ws.ReadUntil(std::regex("[\r\n]/dev/pts/[0-9]+\r\nroot\r\n")), "") << ws.output;
  ws.Send("exit 3\n");
  ASSERT_TRUE(ws.ReadUntilClosed());
  ASSERT_EQ(ws.texts.size(), 1u) << ws.output;
  EXPECT_EQ(ws.texts[0]["exit"]["exit_code"], 3) << ws.texts[0].dump();
  EXPECT_EQ(ws.close_reason.code, websocket::close_code::normal);
}

TEST_F(ApiPty, ResizeReachesTheTerminal) {
  WsClient ws;
  ASSERT_EQ(ws.Connect(s().port(), Target("?cols=90&rows=30"), s().key()), 101);
  ws.Send("stty size\n");
  EXPECT_NE(ws.ReadUntil(std::regex("[\r\n]30 90\r\n")), "") << ws.output;
  ws.SendText({{"resize", {{"cols", 132}, {"rows", 43}}}});
  ws.SendText({{"something", "else"}});  // ignored
  ws.Send("stty size\n");
  EXPECT_NE(ws.ReadUntil(std::regex("[\r\n]43 132\r\n")), "") << ws.output;
  ws.Close();
}

TEST_F(ApiPty, ClosingTheSocketKillsTheShellAndItsJobs) {
  WsClient ws;
  ASSERT_EQ(ws.Connect(s().port(), Target(), s().key()), 101);
  ws.Send("echo shell=$$\n");
  std::string hit = ws.ReadUntil(std::regex("shell=([0-9]+)\r\n"));
  ASSERT_NE(hit, "") << ws.output;
  const int shell = std::stoi(hit.substr(6));
  // A job of an interactive shell runs in a process group of its own.
  ws.Send("sleep 1000 & echo job=$!\n");
  hit = ws.ReadUntil(std::regex("job=([0-9]+)\r\n"));
  ASSERT_NE(hit, "") << ws.output;
  const int job = std::stoi(hit.substr(4));
  ASSERT_TRUE(Alive(shell));
  ASSERT_TRUE(Alive(job));
  ws.Close();
  EXPECT_TRUE(ws.closed);
  bool gone = false;
  for (auto deadline = Clock::now() + std::chrono::seconds(5); !gone && Clock::now() < deadline;) {
    gone = !Alive(shell) && !Alive(job);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << "shell " << shell << " or its job " << job << " outlived the terminal";
}

TEST_F(ApiPty, DroppedConnectionAlsoHangsUp) {
  int shell = 0;
  {
    WsClient ws;
    ASSERT_EQ(ws.Connect(s().port(), Target(), s().key()), 101);
    ws.Send("echo shell=$$\n");
    std::string hit = ws.ReadUntil(std::regex("shell=([0-9]+)\r\n"));
    ASSERT_NE(hit, "");
    shell = std::stoi(hit.substr(6));
  }  // the TCP connection goes away without a close handshake
  bool gone = false;
  for (auto deadline = Clock::now() + std::chrono::seconds(5); !gone && Clock::now() < deadline;) {
    gone = !Alive(shell);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone);
}

TEST_F(ApiPty, ClientThatStopsReadingDoesNotGrowServerMemory) {
  WsClient ws;
  ASSERT_EQ(ws.Connect(s().port(), Target(), s().key()), 101);
  const size_t before = s().RssBytes();
  ws.Send("yes hutch-flood-line-of-some-length\n");
  // Read nothing for a while: the flood fills the TCP buffers, then the
  // credit window, then stops at the agent.
  size_t peak = before;
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    peak = std::max(peak, s().RssBytes());
  }
  EXPECT_TRUE(hutch::testing::RssWithinBound(before, peak)) << before << " -> " << peak;
  // The terminal still works: interrupt the flood and talk to the shell.
  ws.Send("\x03");
  ws.Send("echo done-$((1+1))\n");
  EXPECT_NE(ws.ReadUntil(std::regex("done-2"), std::chrono::seconds(60)), "");
  ws.Close();
}

TEST_F(ApiPty, HttpErrors) {
  WsClient bad;
  std::string body;
  EXPECT_EQ(bad.Connect(s().port(), Target(), "wrong-key", &body), 401);
  EXPECT_EQ(json::parse(body, nullptr, false).value("code", ""), "unauthorized") << body;

  auto c = s().Client();
  auto r = c.Request("GET", Target());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["code"], "invalid_request");
  r = c.Request("GET", "/v1/sandboxes/sb_doesnotexist/pty");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["code"], "sandbox_not_found");
  r = c.Request("GET", Target("?cols=0"));
  EXPECT_EQ(r.status, 400);
  r = c.Request("POST", Target(), "{}");
  EXPECT_EQ(r.status, 405);

  WsClient nouser;
  EXPECT_EQ(nouser.Connect(s().port(), Target("?user=no-such-user"), s().key(), &body), 400)
      << body;
}

// A browser cannot send the bearer header on a WebSocket: it asks for a
// single-use ticket and opens /pty with it, the key in no URL.
TEST_F(ApiPty, TicketOpensTheTerminalOnceWithoutTheKey) {
  auto c = s().Client();
  auto r = c.Request("POST", "/v1/sandboxes/" + id_ + "/pty/ticket");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string ticket = r.json().value("ticket", "");
  EXPECT_TRUE(std::regex_match(ticket, std::regex("pt_[0-9a-f]{64}"))) << ticket;
  EXPECT_EQ(r.json()["expires_in"], 30);
  EXPECT_EQ(ticket.find(s().key()), std::string::npos);

  WsClient ws;
  std::string body;
  ASSERT_EQ(ws.Connect(s().port(), Target("?cols=80&rows=24&ticket=" + ticket), "", &body), 101)
      << body;
  ws.Send("echo $((6*7))\n");
  EXPECT_NE(ws.ReadUntil(std::regex("[\r\n]42\r\n")), "") << ws.output;
  ws.Close();

  // Spent by its first use.
  WsClient again;
  EXPECT_EQ(again.Connect(s().port(), Target("?ticket=" + ticket), "", &body), 401);
  EXPECT_EQ(json::parse(body, nullptr, false).value("code", ""), "unauthorized") << body;
}

TEST_F(ApiPty, TicketIsForItsSandboxAndTheTerminalOnly) {
  auto c = s().Client();
  auto issue = [&] {
    auto r = c.Request("POST", "/v1/sandboxes/" + id_ + "/pty/ticket");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json().value("ticket", "");
  };
  // Another sandbox's path: refused, and the ticket is spent all the same.
  std::string t = issue();
  auto anon = s().Client();
  anon.set_api_key("");
  auto r = anon.Request("GET", "/v1/sandboxes/sb_other/pty?ticket=" + t);
  EXPECT_EQ(r.status, 401) << r.body;
  WsClient ws;
  std::string body;
  EXPECT_EQ(ws.Connect(s().port(), Target("?ticket=" + t), "", &body), 401) << body;
  // Any other route ignores it: no key, no access.
  t = issue();
  r = anon.Request("GET", "/v1/sandboxes/" + id_ + "?ticket=" + t);
  EXPECT_EQ(r.status, 401) << r.body;
  r = anon.Request("POST", "/v1/sandboxes/" + id_ + "/pty/ticket?ticket=" + t);
  EXPECT_EQ(r.status, 401) << r.body;
  // Made-up tickets, and none at all.
  WsClient forged;
  EXPECT_EQ(forged.Connect(s().port(), Target("?ticket=pt_00"), "", &body), 401) << body;
  WsClient bare;
  EXPECT_EQ(bare.Connect(s().port(), Target(), "", &body), 401) << body;
  // Only a running sandbox gets one.
  r = c.Request("POST", "/v1/sandboxes/sb_doesnotexist/pty/ticket");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.json()["code"], "sandbox_not_found");
  ASSERT_EQ(c.Request("POST", "/v1/sandboxes/" + id_ + "/pause").status, 200);
  r = c.Request("POST", "/v1/sandboxes/" + id_ + "/pty/ticket");
  EXPECT_EQ(r.status, 409) << r.body;
  ASSERT_EQ(c.Request("POST", "/v1/sandboxes/" + id_ + "/resume").status, 200);
}

TEST_F(ApiPty, CommandAndUserFromQuery) {
  WsClient ws;
  ASSERT_EQ(ws.Connect(s().port(), Target("?user=user&cmd=id%20-un%3B%20pwd"), s().key()), 101);
  EXPECT_NE(ws.ReadUntil(std::regex("user\r\n/home/user\r\n")), "") << ws.output;
  ASSERT_TRUE(ws.ReadUntilClosed());
  ASSERT_EQ(ws.texts.size(), 1u);
  EXPECT_EQ(ws.texts[0]["exit"]["exit_code"], 0);
}

}  // namespace
