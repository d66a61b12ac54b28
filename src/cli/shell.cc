#include "cli/shell.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <iostream>

#include <nlohmann/json.hpp>

namespace hutch::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using nlohmann::json;

namespace {

// Raw mode for the local terminal while the remote one owns it; the saved
// settings come back however RunShell returns.
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

struct WinSize {
  int cols = 80, rows = 24;
};

WinSize LocalSize() {
  WinSize s;
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 &&
      ws.ws_row > 0) {
    s.cols = ws.ws_col;
    s.rows = ws.ws_row;
  }
  return s;
}

// The relay: one io_context, stdin -> socket, socket -> stdout, SIGWINCH
// -> resize. Writes to the socket are queued (one in flight at a time, as
// a websocket stream requires).
class Relay {
 public:
  Relay(asio::io_context& io, websocket::stream<beast::tcp_stream>& ws)
      : io_(io), ws_(ws), in_(io, fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)), winch_(io, SIGWINCH) {}

  int Run() {
    ReadSocket();
    struct stat st {};
    if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
      // epoll cannot watch a regular file: send it whole.
      std::string all;
      ssize_t n;
      while ((n = read(STDIN_FILENO, inbuf_.data(), inbuf_.size())) > 0)
        all.append(inbuf_.data(), n);
      if (!all.empty()) Queue(std::move(all), false);
      stdin_eof_ = true;
    } else {
      ReadStdin();
    }
    WatchWinch();
    io_.run();
    return exit_code_;
  }

 private:
  void Queue(std::string bytes, bool text) {
    out_.push_back({std::move(bytes), text});
    if (out_.size() == 1) WriteNext();
  }
  void WriteNext() {
    if (out_.empty() || done_) return;
    ws_.text(out_.front().second);
    ws_.async_write(asio::buffer(out_.front().first), [this](beast::error_code ec, size_t) {
      if (ec) return Finish(1, "send: " + ec.message());
      out_.pop_front();
      WriteNext();
    });
  }
  void ReadStdin() {
    in_.async_read_some(asio::buffer(inbuf_), [this](beast::error_code ec, size_t n) {
      if (done_) return;
      if (ec) {
        stdin_eof_ = true;  // keep reading the socket until the shell exits
        return;
      }
      Queue(std::string(inbuf_.data(), n), false);
      ReadStdin();
    });
  }
  void ReadSocket() {
    ws_.async_read(buf_, [this](beast::error_code ec, size_t) {
      if (done_) return;
      if (ec == websocket::error::closed) return Finish(exit_code_, "");
      if (ec) return Finish(1, "connection lost: " + ec.message());
      std::string data = beast::buffers_to_string(buf_.data());
      buf_.consume(buf_.size());
      if (ws_.got_text()) {
        auto j = json::parse(data, nullptr, false);
        if (j.is_object() && j.contains("exit") && j["exit"].is_object()) {
          exit_code_ = j["exit"].value("exit_code", 0);
        } else if (j.is_object() && j.contains("error") && j["error"].is_object()) {
          std::cerr << "\r\nhutch: " << j["error"].value("code", "") << ": "
                    << j["error"].value("message", "") << "\r\n";
          exit_code_ = 1;
        }
      } else {
        (void)!write(STDOUT_FILENO, data.data(), data.size());
      }
      ReadSocket();
    });
  }
  void WatchWinch() {
    winch_.async_wait([this](beast::error_code ec, int) {
      if (ec || done_) return;
      WinSize s = LocalSize();
      Queue(json{{"resize", {{"cols", s.cols}, {"rows", s.rows}}}}.dump(), true);
      WatchWinch();
    });
  }
  void Finish(int code, const std::string& why) {
    if (done_) return;
    done_ = true;
    exit_code_ = code;
    if (!why.empty()) std::cerr << "\r\nhutch: " << why << "\r\n";
    beast::error_code ignored;
    in_.close(ignored);
    winch_.cancel(ignored);
    beast::get_lowest_layer(ws_).close();
  }

  asio::io_context& io_;
  websocket::stream<beast::tcp_stream>& ws_;
  asio::posix::stream_descriptor in_;
  asio::signal_set winch_;
  beast::flat_buffer buf_;
  std::array<char, 16384> inbuf_{};
  std::deque<std::pair<std::string, bool>> out_;
  bool stdin_eof_ = false, done_ = false;
  int exit_code_ = 0;
};

}  // namespace

int RunShell(const std::string& host, int port, const std::string& key,
             const std::string& sandbox_id) {
  asio::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (!ec) beast::get_lowest_layer(ws).connect(results, ec);
  if (ec) {
    std::cerr << "hutch: cannot reach " << host << ":" << port << ": " << ec.message() << "\n";
    return 1;
  }
  ws.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
    req.set(http::field::authorization, "Bearer " + key);
  }));
  WinSize size = LocalSize();
  const std::string target = "/v1/sandboxes/" + sandbox_id +
                             "/pty?cols=" + std::to_string(size.cols) +
                             "&rows=" + std::to_string(size.rows);
  // Asynchronous handshake: it keeps the server's JSON error when the
  // upgrade is declined (Beast 1.74's synchronous one drops the body).
  websocket::response_type res;
  ws.async_handshake(res, host, target, [&ec](beast::error_code e) { ec = e; });
  io.run();
  io.restart();
  if (ec) {
    auto j = json::parse(res.body(), nullptr, false);
    if (j.is_object() && j.contains("code"))
      std::cerr << "hutch: " << j.value("code", "") << ": " << j.value("message", "") << "\n";
    else std::cerr << "hutch: terminal refused: " << ec.message() << "\n";
    return 1;
  }
  ws.binary(true);
  RawTerminal raw;
  Relay relay(io, ws);
  return relay.Run();
}

}  // namespace hutch::cli
