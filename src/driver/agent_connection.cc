#include "driver/agent_connection.h"

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

namespace hutch {

namespace {
constexpr size_t kOutqBound = 1 << 20;      // outbound bytes before Send waits
constexpr size_t kCreditBatch = 64 * 1024;  // grant credit in batches

bool IsFinal(wire::Type t) {
  return t == wire::Type::kExit || t == wire::Type::kError || t == wire::Type::kFsResult ||
         t == wire::Type::kProcResult || t == wire::Type::kIdentifyResult;
}
}  // namespace

AgentStream::AgentStream(asio::any_io_executor ex, std::weak_ptr<AgentConnection> conn, uint32_t id)
    : conn_(std::move(conn)), id_(id), wake_(ex) {
  wake_.expires_at(std::chrono::steady_clock::time_point::max());
}

AgentStream::~AgentStream() {
  auto c = conn_.lock();
  if (!c) return;
  if (!ended_ && !lost_ && cancel_on_destroy_ && c->alive())
    c->SendNoWait(wire::Encode(wire::Type::kCancel, id_, {}));
  c->Forget(id_);
}

void AgentStream::Push(wire::Frame f) {
  if (IsFinal(f.type)) ended_ = true;
  q_.push_back(std::move(f));
  wake_.cancel();
}

void AgentStream::Lost() {
  lost_ = true;
  wake_.cancel();
}

void AgentStream::Interrupt() {
  interrupted_ = true;
  wake_.cancel();
}

asio::awaitable<std::optional<wire::Frame>> AgentStream::Next() {
  bool timed_out = false;
  co_return co_await NextFor(std::chrono::milliseconds::max(), &timed_out);
}

asio::awaitable<std::optional<wire::Frame>> AgentStream::NextFor(std::chrono::milliseconds timeout,
                                                                 bool* timed_out) {
  *timed_out = false;
  auto deadline = timeout == std::chrono::milliseconds::max()
                      ? std::chrono::steady_clock::time_point::max()
                      : std::chrono::steady_clock::now() + timeout;
  while (q_.empty() && !lost_ && !interrupted_) {
    if (std::chrono::steady_clock::now() >= deadline) {
      *timed_out = true;
      co_return std::nullopt;
    }
    wake_.expires_at(deadline);
    boost::system::error_code ec;
    co_await wake_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (q_.empty()) co_return std::nullopt;
  wire::Frame f = std::move(q_.front());
  q_.pop_front();
  co_return f;
}

asio::awaitable<Result<std::optional<wire::Frame>>> AgentStream::Answer() {
  bool timed_out = false;
  auto f = co_await NextFor(AgentConnection::answer_timeout(), &timed_out);
  if (timed_out) co_return AgentConnection::AnswerTimeoutError("answer");
  co_return f;
}

asio::awaitable<Status> AgentStream::Send(wire::Type type, std::string_view payload) {
  // The agent drops a connection that sends it a frame over the limit, and
  // with it the sandbox (issue 32): refuse the one request instead.
  if (payload.size() > wire::kMaxPayload)
    co_return MakeError(Code::kInvalidRequest,
                        "request of " + std::to_string(payload.size()) +
                            " bytes exceeds the 1 MiB limit of one message to the sandbox");
  auto c = conn_.lock();
  if (!c || !c->alive()) co_return MakeError(Code::kUnavailable, "sandbox agent connection lost");
  co_return co_await c->Send(wire::Encode(type, id_, payload));
}

void AgentStream::Consumed(size_t n) {
  pending_credit_ += n;
  if (pending_credit_ < kCreditBatch) return;
  auto c = conn_.lock();
  if (c && c->alive())
    c->SendNoWait(wire::EncodeCredit(id_, static_cast<uint32_t>(pending_credit_)));
  pending_credit_ = 0;
}

void AgentStream::Unlimited() {
  auto c = conn_.lock();
  if (c && c->alive()) c->SendNoWait(wire::EncodeCredit(id_, 0xffffffffu));
}

AgentConnection::AgentConnection(asio::any_io_executor ex) : sock_(ex), drained_(ex) {
  drained_.expires_at(std::chrono::steady_clock::time_point::max());
}

AgentConnection::~AgentConnection() = default;

asio::awaitable<Result<std::shared_ptr<AgentConnection>>> AgentConnection::Connect(
    const std::string& socket_path, std::chrono::milliseconds timeout, bool wait_hello) {
  auto ex = co_await asio::this_coro::executor;
  auto conn = std::make_shared<AgentConnection>(ex);
  boost::system::error_code ec;
  co_await conn->sock_.async_connect(asio::local::stream_protocol::endpoint(socket_path),
                                     asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return MakeError(Code::kUnavailable, "connect agent socket: " + ec.message());
  if (!wait_hello) {
    // The kernel queued the connection; the agent accepts it and says
    // hello when it is thawed. ReadLoop drops stream-0 frames.
    asio::co_spawn(
        ex, [c = conn]() -> asio::awaitable<void> { co_await c->ReadLoop(); }, asio::detached);
    co_return conn;
  }
  // The hello is the first frame; read it before starting the loops.
  asio::steady_timer timer(ex);
  timer.expires_after(timeout);
  bool expired = false;
  timer.async_wait([&expired, c = conn.get()](boost::system::error_code e) {
    if (!e) {
      expired = true;
      boost::system::error_code ignored;
      c->sock_.cancel(ignored);
    }
  });
  char buf[4096];
  wire::Frame f;
  while (!conn->reader_.Next(&f)) {
    size_t n = co_await conn->sock_.async_read_some(asio::buffer(buf),
                                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      timer.cancel();
      co_return MakeError(Code::kUnavailable, expired ? "agent did not say hello in time"
                                                      : "read agent hello: " + ec.message());
    }
    if (auto st = conn->reader_.Feed(buf, n); !st.ok()) {
      timer.cancel();
      co_return st.error().Context("agent hello");
    }
  }
  timer.cancel();
  if (auto st = conn->ApplyHello(f); !st.ok()) co_return st.error();
  asio::co_spawn(
      ex, [c = conn]() -> asio::awaitable<void> { co_await c->ReadLoop(); }, asio::detached);
  co_return conn;
}

Status AgentConnection::ApplyHello(const wire::Frame& f) {
  if (f.type != wire::Type::kHello) return MakeError(Code::kInternal, "agent sent no hello");
  try {
    auto j = nlohmann::json::parse(f.payload);
    if (j.value("version", 0u) != wire::kProtocolVersion)
      return MakeError(Code::kInternal,
                       "agent speaks protocol " + j.value("version", std::string("?")));
    agent_pid_ = j.value("pid", 0);
    if (auto it = j.find("features"); it != j.end() && it->is_array())
      for (const auto& feat : *it)
        if (feat.is_string()) features_.insert(feat.get<std::string>());
  } catch (const std::exception& e) {
    return MakeError(Code::kInternal, std::string("bad agent hello: ") + e.what());
  }
  return Status{};
}

std::shared_ptr<AgentStream> AgentConnection::OpenStream() {
  uint32_t id = next_stream_++;
  if (next_stream_ == 0) next_stream_ = 1;
  auto s = std::make_shared<AgentStream>(sock_.get_executor(), weak_from_this(), id);
  if (!alive_) s->Lost();
  streams_[id] = s;
  return s;
}

asio::awaitable<void> AgentConnection::ReadLoop() {
  auto self = shared_from_this();
  std::vector<char> buf(64 * 1024);
  // Frames already parsed together with the hello.
  wire::Frame f;
  while (alive_) {
    while (reader_.Next(&f)) {
      if (f.stream == 0 && f.type == wire::Type::kHello) {
        // A deferred hello (Connect with wait_hello=false).
        if (auto st = ApplyHello(f); !st.ok()) {
          Fail(st.error().message);
          co_return;
        }
        continue;
      }
      auto it = streams_.find(f.stream);
      if (it == streams_.end()) continue;  // stream already dropped by its owner
      auto s = it->second.lock();
      if (!s) {
        streams_.erase(it);
        continue;
      }
      bool final = IsFinal(f.type);
      const uint32_t stream = f.stream;  // f is moved into the stream below
      s->Push(std::move(f));
      if (final) streams_.erase(stream);
    }
    boost::system::error_code ec;
    size_t n = co_await sock_.async_read_some(asio::buffer(buf),
                                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (alive_) Fail("agent connection closed: " + ec.message());
      co_return;
    }
    if (auto st = reader_.Feed(buf.data(), n); !st.ok()) {
      Fail("agent protocol error: " + st.error().message);
      co_return;
    }
  }
}

asio::awaitable<Result<wire::Frame>> AgentConnection::Call(wire::Type type,
                                                           std::string_view payload) {
  auto self = shared_from_this();
  auto stream = OpenStream();
  if (auto st = co_await stream->Send(type, payload); !st.ok()) co_return st.error();
  auto f = co_await stream->Answer();
  if (!f.ok()) co_return f.error();
  if (!*f) co_return MakeError(Code::kUnavailable, "sandbox agent connection lost");
  co_return std::move(**f);
}

Error AgentConnection::AnswerTimeoutError(const std::string& what, const std::string& after) {
  const auto ms = answer_timeout_.count();
  const std::string t =
      ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
  return MakeError(Code::kAgentTimeout, "the sandbox's agent did not " + what + " within " + t +
                                            after + " (the sandbox is stopped or overloaded)");
}

void AgentConnection::SendNoWait(std::string bytes) {
  if (!alive_) return;
  outq_bytes_ += bytes.size();
  outq_.push_back(std::move(bytes));
  if (!writing_) {
    writing_ = true;
    asio::co_spawn(
        sock_.get_executor(),
        [self = shared_from_this()]() -> asio::awaitable<void> { co_await self->WriteLoop(); },
        asio::detached);
  }
}

asio::awaitable<Status> AgentConnection::Send(std::string bytes) {
  if (!alive_) co_return MakeError(Code::kUnavailable, "sandbox agent connection lost");
  SendNoWait(std::move(bytes));
  if (outq_bytes_ <= kOutqBound) co_return Status{};
  auto self = shared_from_this();
  // drained_ never expires: WriteLoop and Fail wake its waiters with
  // cancel(), and so does this sender's own deadline (the others check
  // theirs and wait again). Re-arming it here would cancel the other
  // senders' waits, which would re-arm it in turn: a busy loop.
  const auto deadline = std::chrono::steady_clock::now() + answer_timeout_;
  asio::steady_timer limit(sock_.get_executor());
  limit.expires_at(deadline);
  limit.async_wait([w = weak_from_this()](boost::system::error_code ec) {
    if (auto c = w.lock(); c && !ec) c->drained_.cancel();
  });
  while (alive_ && outq_bytes_ > kOutqBound) {
    if (std::chrono::steady_clock::now() >= deadline)
      co_return AnswerTimeoutError("take the data sent to it");
    boost::system::error_code ec;
    co_await drained_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  limit.cancel();
  if (!alive_) co_return MakeError(Code::kUnavailable, "sandbox agent connection lost");
  co_return Status{};
}

asio::awaitable<void> AgentConnection::WriteLoop() {
  while (alive_ && !outq_.empty()) {
    std::string b = std::move(outq_.front());
    outq_.pop_front();
    boost::system::error_code ec;
    co_await asio::async_write(sock_, asio::buffer(b),
                               asio::redirect_error(asio::use_awaitable, ec));
    outq_bytes_ -= b.size();
    if (outq_bytes_ <= kOutqBound) drained_.cancel();
    if (ec) {
      if (alive_) Fail("write to agent: " + ec.message());
      break;
    }
  }
  writing_ = false;
}

void AgentConnection::Fail(const std::string& why) {
  if (!alive_) return;
  alive_ = false;
  spdlog::warn("agent_lost pid={} reason=\"{}\"", agent_pid_, why);
  boost::system::error_code ec;
  sock_.close(ec);
  drained_.cancel();
  for (auto& [id, w] : streams_)
    if (auto s = w.lock()) s->Lost();
  streams_.clear();
  if (on_lost) {
    auto cb = std::move(on_lost);
    on_lost = nullptr;
    cb(why);
  }
}

void AgentConnection::Close() {
  if (!alive_) return;
  alive_ = false;
  boost::system::error_code ec;
  sock_.close(ec);
  drained_.cancel();
  for (auto& [id, w] : streams_)
    if (auto s = w.lock()) s->Lost();
  streams_.clear();
  on_lost = nullptr;
}

}  // namespace hutch
