// End-to-end tests of the real hutch-agent binary (HUTCH_AGENT_BIN) over its
// wire protocol. The agent runs on the host here (no namespaces), as root,
// with a listening unix socket as fd 3; file paths live in a temp dir.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/output_ring.h"
#include "common/unique_fd.h"
#include "wire/frame.h"

namespace {

using hutch::UniqueFd;
using hutch::wire::Frame;
using hutch::wire::Type;
using nlohmann::json;
namespace fs = std::filesystem;

// --- Reusable helpers -------------------------------------------------------

// One protocol connection to the agent.
class Client {
 public:
  bool Connect(const std::string& sock_path) {
    fd_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock_path.c_str());
    return connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  void Close() { fd_.reset(); }

  void SendRaw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd_.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  void Send(Type t, uint32_t stream, const std::string& payload = "") {
    SendRaw(hutch::wire::Encode(t, stream, payload));
  }
  void SendJson(Type t, uint32_t stream, const json& j) { Send(t, stream, j.dump()); }
  void Credit(uint32_t stream, uint32_t bytes) {
    SendRaw(hutch::wire::EncodeCredit(stream, bytes));
  }

  // Next frame within timeout_ms; nullopt on timeout or EOF (see eof()).
  std::optional<Frame> Next(int timeout_ms = 5000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    Frame f;
    while (!reader_.Next(&f)) {
      if (eof_) return std::nullopt;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_.get(), POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[65536];
      ssize_t n = read(fd_.get(), buf, sizeof(buf));
      if (n <= 0) {
        eof_ = true;
        continue;
      }
      if (!reader_.Feed(buf, static_cast<size_t>(n)).ok()) eof_ = true;
    }
    return f;
  }
  bool eof() const { return eof_; }

 private:
  UniqueFd fd_;
  hutch::wire::FrameReader reader_;
  bool eof_ = false;
};

// Everything a stream produced until its terminal frame.
struct StreamResult {
  std::optional<json> started;
  std::string out, err;  // kStdout / kStderr, or kFsReadData in `out`
  std::optional<json> exit, error, result;
  std::vector<json> dropped;  // kProcDropped
  bool done = false;
};

bool IsTerminal(Type t) {
  return t == Type::kExit || t == Type::kError || t == Type::kFsResult || t == Type::kProcResult;
}

// Reads frames of `stream` until it ends, granting credit for all data.
StreamResult Collect(Client& c, uint32_t stream, int timeout_ms = 20000, StreamResult r = {}) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    auto f = c.Next(timeout_ms);
    if (!f) break;
    if (f->stream != stream) continue;
    switch (f->type) {
      case Type::kStarted:
        r.started = json::parse(f->payload);
        break;
      case Type::kStdout:
      case Type::kFsReadData:
        r.out += f->payload;
        break;
      case Type::kStderr:
        r.err += f->payload;
        break;
      case Type::kExit:
        r.exit = json::parse(f->payload);
        break;
      case Type::kError:
        r.error = json::parse(f->payload);
        break;
      case Type::kFsResult:
      case Type::kProcResult:
        r.result = json::parse(f->payload);
        break;
      case Type::kProcDropped:
        r.dropped.push_back(json::parse(f->payload));
        break;
      default:
        break;
    }
    if (f->type == Type::kStdout || f->type == Type::kStderr || f->type == Type::kFsReadData)
      c.Credit(stream, static_cast<uint32_t>(f->payload.size()));
    if (IsTerminal(f->type)) {
      r.done = true;
      break;
    }
  }
  return r;
}

bool Alive(pid_t pid_or_negative_pgid) { return kill(pid_or_negative_pgid, 0) == 0; }

// Polls until `pred` holds or 3 s pass.
template <typename P>
bool Eventually(P pred) {
  for (int i = 0; i < 300; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& ch : s) ch = static_cast<char>(rng() & 0xff);
  return s;
}

// --- Fixture: one agent process per test -----------------------------------

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("HUTCH_AGENT_BIN");
    if (bin == nullptr || *bin == '\0') GTEST_SKIP() << "HUTCH_AGENT_BIN not set";
    char tmpl[] = "/tmp/hutch-agent-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    sock_ = dir_ + "/agent.sock";
    UniqueFd lfd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock_.c_str());
    ASSERT_EQ(bind(lfd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(lfd.get(), 16), 0);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      // lfd is >= 3 and CLOEXEC; dup2 to 3 yields a non-CLOEXEC copy
      // (when it already is 3, clear the flag instead).
      if (lfd.get() == 3) fcntl(3, F_SETFD, 0);
      else dup2(lfd.get(), 3);
      execl(bin, bin, static_cast<char*>(nullptr));
      _exit(127);
    }
    ASSERT_TRUE(Connect(client_));
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  // Connects and consumes kHello.
  bool Connect(Client& c) {
    if (!c.Connect(sock_)) return false;
    auto hello = c.Next();
    if (!hello || hello->type != Type::kHello || hello->stream != 0) return false;
    auto j = json::parse(hello->payload);
    return j["version"] == 1 && j["pid"] == pid_;
  }

  StreamResult Exec(json spec, uint32_t stream = 0) {
    if (stream == 0) stream = next_stream_++;
    client_.SendJson(Type::kExecStart, stream, spec);
    return Collect(client_, stream);
  }

  StreamResult FsOp(json req) {
    const uint32_t s = next_stream_++;
    client_.SendJson(Type::kFsRequest, s, req);
    return Collect(client_, s);
  }

  StreamResult WriteFile(const std::string& path, const std::string& data, int mode = 0644) {
    const uint32_t s = next_stream_++;
    client_.SendJson(Type::kFsRequest, s, {{"op", "write"}, {"path", path}, {"mode", mode}});
    auto f = client_.Next();
    if (!f || f->type != Type::kStarted) {
      StreamResult r;
      if (f && f->type == Type::kError) r.error = json::parse(f->payload);
      return r;
    }
    for (size_t off = 0; off < data.size(); off += 256 * 1024)
      client_.Send(Type::kFsWriteData, s, data.substr(off, 256 * 1024));
    client_.Send(Type::kFsWriteEnd, s);
    return Collect(client_, s);
  }

  // One kProc* request answered by kProcResult or kError.
  StreamResult Proc(Type t, const json& req) {
    const uint32_t s = next_stream_++;
    client_.SendJson(t, s, req);
    return Collect(client_, s);
  }
  StreamResult ProcStdin(pid_t pid, const std::string& bytes, bool close) {
    const uint32_t s = next_stream_++;
    client_.Send(Type::kProcStdin, s,
                 hutch::wire::EncodeProcStdin(static_cast<uint32_t>(pid), close, bytes));
    return Collect(client_, s);
  }
  // Starts a background process; returns its pid (0 on failure).
  pid_t StartProc(json spec) {
    auto r = Proc(Type::kProcStart, spec);
    EXPECT_TRUE(r.result) << (r.error ? r.error->dump() : "no answer");
    return r.result ? (*r.result)["pid"].get<pid_t>() : 0;
  }
  // Polls kProcStatus until the process ended; its status then.
  json WaitEnded(pid_t pid) {
    json st;
    Eventually([&] {
      auto r = Proc(Type::kProcStatus, {{"pid", pid}});
      if (r.result) st = *r.result;
      return r.result && !(*r.result)["running"].get<bool>();
    });
    return st;
  }

  std::string dir_, sock_;
  pid_t pid_ = -1;
  Client client_;
  uint32_t next_stream_ = 1;
};

// --- Exec -----------------------------------------------------------------

// kIdentify is for a restored vm guest (it sets the hostname and the
// clock): here only its validation runs, which fails before any change.
TEST_F(AgentTest, IdentifyRejectsBadEntropyBeforeChangingAnything) {
  client_.SendJson(Type::kIdentify, 5,
                   {{"hostname", "sb_x"}, {"realtime_ns", 1}, {"entropy", "zz"}});
  auto r = Collect(client_, 5);
  ASSERT_TRUE(r.error) << "no kError";
  EXPECT_EQ((*r.error)["code"], "invalid_request") << r.error->dump();
}

TEST_F(AgentTest, EchoExitCode) {
  auto r = Exec({{"argv", {"echo", "hi"}}});
  ASSERT_TRUE(r.done);
  ASSERT_TRUE(r.started);
  EXPECT_GT((*r.started)["pid"].get<int>(), 0);
  EXPECT_EQ(r.out, "hi\n");
  ASSERT_TRUE(r.exit);
  EXPECT_EQ((*r.exit)["exit_code"], 0);
  EXPECT_EQ((*r.exit)["signal"], 0);
  EXPECT_EQ((*r.exit)["timed_out"], false);
  EXPECT_TRUE((*r.exit).contains("duration_ms"));
}

TEST_F(AgentTest, StderrAndExitCode3) {
  auto r = Exec({{"argv", {"/bin/sh", "-c", "echo oops >&2; exit 3"}}});
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ((*r.exit)["exit_code"], 3);
}

TEST_F(AgentTest, ArgvIsNotShellInterpreted) {
  auto r = Exec({{"argv", {"printf", "%s|", "a b", "$HOME", "*", "'q'"}}});
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.out, "a b|$HOME|*|'q'|");
}

TEST_F(AgentTest, EnvAndCwd) {
  auto r = Exec({{"argv", {"sh", "-c", "echo $FOO; pwd; echo $HOME $LANG $USER"}},
                 {"env", {{"FOO", "bar baz"}}},
                 {"cwd", dir_}});
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.out, "bar baz\n" + dir_ + "\n/root C.UTF-8 root\n");
}

TEST_F(AgentTest, StdinPipe) {
  client_.SendJson(Type::kExecStart, 7, {{"argv", {"cat"}}, {"stdin", true}});
  client_.Send(Type::kStdin, 7, "hello ");
  client_.Send(Type::kStdin, 7, "world");
  client_.Send(Type::kStdinClose, 7);
  auto r = Collect(client_, 7);
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.out, "hello world");
  EXPECT_EQ((*r.exit)["exit_code"], 0);
}

TEST_F(AgentTest, NoStdinIsDevNull) {
  auto r = Exec({{"argv", {"cat"}}, {"timeout_ms", 5000}});
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ((*r.exit)["timed_out"], false);
}

TEST_F(AgentTest, TimeoutKillsProcessGroup) {
  auto r = Exec({{"argv", {"sh", "-c", "sleep 100 & sleep 100"}}, {"timeout_ms", 300}});
  ASSERT_TRUE(r.exit);
  EXPECT_EQ((*r.exit)["timed_out"], true);
  EXPECT_EQ((*r.exit)["signal"], SIGKILL);
  EXPECT_EQ((*r.exit)["exit_code"], 128 + SIGKILL);
  EXPECT_GE((*r.exit)["duration_ms"].get<int>(), 250);
  const pid_t pgid = (*r.started)["pid"];
  EXPECT_TRUE(Eventually([&] { return !Alive(-pgid); })) << "background sleep survived";
}

TEST_F(AgentTest, Cancel) {
  client_.SendJson(Type::kExecStart, 3, {{"argv", {"sleep", "100"}}});
  auto started = client_.Next();
  ASSERT_TRUE(started && started->type == Type::kStarted);
  client_.Send(Type::kCancel, 3);
  auto r = Collect(client_, 3);
  ASSERT_TRUE(r.exit);
  EXPECT_EQ((*r.exit)["signal"], SIGKILL);
  EXPECT_EQ((*r.exit)["timed_out"], false);
}

TEST_F(AgentTest, SignalGoesToGroup) {
  client_.SendJson(Type::kExecStart, 3, {{"argv", {"sleep", "100"}}});
  ASSERT_TRUE(client_.Next());
  client_.SendJson(Type::kSignal, 3, {{"signal", SIGTERM}});
  auto r = Collect(client_, 3);
  ASSERT_TRUE(r.exit);
  EXPECT_EQ((*r.exit)["exit_code"], 128 + SIGTERM);
}

TEST_F(AgentTest, ConnectionCloseKillsUnlessDetached) {
  Client c2;
  ASSERT_TRUE(Connect(c2));
  c2.SendJson(Type::kExecStart, 1, {{"argv", {"sleep", "100"}}});
  c2.SendJson(Type::kExecStart, 2, {{"argv", {"sleep", "100"}}, {"detach", true}});
  auto s1 = c2.Next();
  auto s2 = c2.Next();
  ASSERT_TRUE(s1 && s2);
  const pid_t attached = json::parse(s1->payload)["pid"];
  const pid_t detached = json::parse(s2->payload)["pid"];
  c2.Close();
  EXPECT_TRUE(Eventually([&] { return !Alive(attached); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(Alive(detached));
  kill(-detached, SIGKILL);
  EXPECT_TRUE(Eventually([&] { return !Alive(detached); }));  // and reaped by the agent
}

TEST_F(AgentTest, ExecFailures) {
  auto r = Exec({{"argv", {"no-such-program-hutch"}}});
  ASSERT_TRUE(r.exit);
  EXPECT_EQ((*r.exit)["exit_code"], 127);
  EXPECT_NE(r.err.find("no-such-program-hutch"), std::string::npos) << r.err;

  auto r2 = Exec({{"argv", {"true"}}, {"user", "no-such-user-hutch"}});
  ASSERT_TRUE(r2.error);
  EXPECT_FALSE(r2.started);
  EXPECT_EQ((*r2.error)["code"], "invalid_request");

  auto r3 = Exec({{"argv", {"true"}}, {"cwd", dir_ + "/missing"}});
  ASSERT_TRUE(r3.error);
  EXPECT_EQ((*r3.error)["code"], "invalid_request");

  auto r4 = Exec({{"argv", {"id", "-u"}}, {"user", "65534"}, {"cwd", "/"}});
  ASSERT_TRUE(r4.exit);
  EXPECT_EQ(r4.out, "65534\n");
}

// --- Output flow control ------------------------------------------------------

TEST_F(AgentTest, CreditBlocksProducer) {
  // ~10.9 MB of deterministic output.
  std::string expected;
  for (int i = 1; i <= 1500000; ++i) expected += std::to_string(i) + "\n";
  client_.SendJson(Type::kExecStart, 5, {{"argv", {"seq", "1", "1500000"}}});
  auto started = client_.Next();
  ASSERT_TRUE(started && started->type == Type::kStarted);
  const pid_t pid = json::parse(started->payload)["pid"];

  // Phase 1: grant nothing. The agent may send at most the initial window.
  std::string got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
  while (std::chrono::steady_clock::now() < until) {
    auto f = client_.Next(100);
    if (!f) continue;
    ASSERT_EQ(f->type, Type::kStdout) << "stream ended while blocked";
    got += f->payload;
  }
  EXPECT_GT(got.size(), 0u);
  EXPECT_LE(got.size(), hutch::wire::kInitialCredit);
  EXPECT_TRUE(Alive(pid)) << "producer should be blocked on a full pipe";

  // Phase 2: pay back what we consumed, then keep granting as we go.
  client_.Credit(5, static_cast<uint32_t>(got.size()));
  auto r = Collect(client_, 5, 60000);
  ASSERT_TRUE(r.exit);
  EXPECT_EQ((*r.exit)["exit_code"], 0);
  got += r.out;
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

TEST_F(AgentTest, LongSingleLineIntact) {
  auto r = Exec({{"argv", {"sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' a; echo"}}});
  ASSERT_TRUE(r.exit);
  ASSERT_EQ(r.out.size(), 5000001u);
  EXPECT_EQ(r.out.find_first_not_of('a'), 5000000u);
  EXPECT_EQ(r.out.back(), '\n');
}

TEST_F(AgentTest, BinaryOutputIntact) {
  std::string all;
  for (int rep = 0; rep < 1000; ++rep)
    for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string path = dir_ + "/bin.dat";
  auto w = WriteFile(path, all);
  ASSERT_TRUE(w.result) << (w.error ? w.error->dump() : "");
  auto r = Exec({{"argv", {"cat", path}}});
  ASSERT_TRUE(r.exit);
  EXPECT_TRUE(r.out == all);
}

// --- Files --------------------------------------------------------------------

TEST_F(AgentTest, WriteReadRoundTrip) {
  const std::string data = RandomBytes(3 * 1024 * 1024 + 123, 42);
  const std::string path = dir_ + "/deep/er/file.bin";
  auto w = WriteFile(path, data, 0600);
  ASSERT_TRUE(w.result) << (w.error ? w.error->dump() : "");
  const json& e = (*w.result)["entry"];
  EXPECT_EQ(e["name"], "file.bin");
  EXPECT_EQ(e["path"], path);
  EXPECT_EQ(e["type"], "file");
  EXPECT_EQ(e["size"], data.size());
  EXPECT_EQ(e["mode"], 0600);
  EXPECT_GT(e["mtime"].get<int64_t>(), 1600000000);
  // No temp file left beside it.
  int n = 0;
  for (auto& de : fs::directory_iterator(dir_ + "/deep/er")) n += de.is_regular_file();
  EXPECT_EQ(n, 1);

  auto r = FsOp({{"op", "read"}, {"path", path}});
  ASSERT_TRUE(r.result) << (r.error ? r.error->dump() : "");
  EXPECT_EQ((*r.started)["size"], data.size());
  EXPECT_EQ((*r.result)["bytes"], data.size());
  EXPECT_TRUE(r.out == data);

  auto part = FsOp({{"op", "read"}, {"path", path}, {"offset", 1000}, {"length", 70000}});
  ASSERT_TRUE(part.result);
  EXPECT_EQ((*part.started)["offset"], 1000);
  EXPECT_EQ((*part.started)["length"], 70000);
  EXPECT_TRUE(part.out == data.substr(1000, 70000));

  auto tail = FsOp({{"op", "read"}, {"path", path}, {"offset", data.size() - 10}, {"length", 100}});
  ASSERT_TRUE(tail.result);
  EXPECT_EQ((*tail.result)["bytes"], 10);

  // Overwrite replaces atomically.
  auto w2 = WriteFile(path, "short");
  ASSERT_TRUE(w2.result);
  auto r2 = FsOp({{"op", "read"}, {"path", path}});
  EXPECT_EQ(r2.out, "short");
}

TEST_F(AgentTest, ReadRespectsCredit) {
  const std::string data = RandomBytes(1024 * 1024, 7);
  const std::string path = dir_ + "/credit.bin";
  ASSERT_TRUE(WriteFile(path, data).result);
  client_.SendJson(Type::kFsRequest, 9, {{"op", "read"}, {"path", path}});
  size_t got = 0;
  for (;;) {
    auto f = client_.Next(500);
    if (!f) break;
    ASSERT_NE(f->type, Type::kFsResult);
    if (f->type == Type::kFsReadData) got += f->payload.size();
  }
  EXPECT_EQ(got, hutch::wire::kInitialCredit);
  client_.Credit(9, static_cast<uint32_t>(got));
  auto r = Collect(client_, 9);
  ASSERT_TRUE(r.result);
  EXPECT_EQ(got + r.out.size(), data.size());
}

TEST_F(AgentTest, StatListMkdirMoveRemove) {
  const std::string base = dir_ + "/tree";
  auto mk = FsOp({{"op", "mkdir"}, {"path", base + "/a/b/c"}});
  ASSERT_TRUE(mk.result) << (mk.error ? mk.error->dump() : "");
  EXPECT_EQ((*mk.result)["entry"]["type"], "dir");
  auto again = FsOp({{"op", "mkdir"}, {"path", base + "/a/b/c"}});
  EXPECT_TRUE(again.result);
  ASSERT_TRUE(WriteFile(base + "/a/f.txt", "12345").result);
  ASSERT_EQ(symlink("f.txt", (base + "/a/link").c_str()), 0);

  auto st = FsOp({{"op", "stat"}, {"path", base + "/a/f.txt"}});
  ASSERT_TRUE(st.result);
  EXPECT_EQ((*st.result)["entry"]["size"], 5);
  EXPECT_EQ((*st.result)["entry"]["mode"], 0644);
  auto sl = FsOp({{"op", "stat"}, {"path", base + "/a/link"}});
  ASSERT_TRUE(sl.result);
  EXPECT_EQ((*sl.result)["entry"]["type"], "symlink");
  EXPECT_EQ((*sl.result)["entry"]["symlink_target"], "f.txt");

  auto ls = FsOp({{"op", "list"}, {"path", base}, {"depth", 2}});
  ASSERT_TRUE(ls.result);
  std::vector<std::string> paths;
  for (auto& e : (*ls.result)["entries"]) paths.push_back(e["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{base + "/a", base + "/a/b", base + "/a/f.txt",
                                             base + "/a/link"}));
  auto ls1 = FsOp({{"op", "list"}, {"path", base}});
  ASSERT_TRUE(ls1.result);
  EXPECT_EQ((*ls1.result)["entries"].size(), 1u);

  auto mv = FsOp({{"op", "move"}, {"path", base + "/a/f.txt"}, {"to", base + "/x/y/g.txt"}});
  ASSERT_TRUE(mv.result) << (mv.error ? mv.error->dump() : "");
  EXPECT_EQ((*mv.result)["entry"]["path"], base + "/x/y/g.txt");
  EXPECT_FALSE(fs::exists(base + "/a/f.txt"));

  auto rm_nonrec = FsOp({{"op", "remove"}, {"path", base + "/a"}});
  ASSERT_TRUE(rm_nonrec.error);
  EXPECT_EQ((*rm_nonrec.error)["code"], "conflict");
  auto rm = FsOp({{"op", "remove"}, {"path", base}, {"recursive", true}});
  ASSERT_TRUE(rm.result) << (rm.error ? rm.error->dump() : "");
  EXPECT_FALSE(fs::exists(base));
}

TEST_F(AgentTest, RemoveDoesNotFollowSymlinks) {
  const std::string outside = dir_ + "/outside";
  ASSERT_TRUE(WriteFile(outside + "/keep", "k").result);
  ASSERT_TRUE(FsOp({{"op", "mkdir"}, {"path", dir_ + "/victim"}}).result);
  ASSERT_EQ(symlink(outside.c_str(), (dir_ + "/victim/ln").c_str()), 0);
  ASSERT_TRUE(FsOp({{"op", "remove"}, {"path", dir_ + "/victim"}, {"recursive", true}}).result);
  EXPECT_TRUE(fs::exists(outside + "/keep"));
}

TEST_F(AgentTest, FsErrors) {
  auto missing = FsOp({{"op", "read"}, {"path", dir_ + "/nope"}});
  ASSERT_TRUE(missing.error);
  EXPECT_EQ((*missing.error)["code"], "file_not_found");
  EXPECT_EQ((*missing.error)["errno"], ENOENT);
  auto isdir = FsOp({{"op", "read"}, {"path", dir_}});
  ASSERT_TRUE(isdir.error);
  EXPECT_EQ((*isdir.error)["code"], "is_a_directory");
  auto notdir = FsOp({{"op", "list"}, {"path", sock_}});
  ASSERT_TRUE(notdir.error);
  EXPECT_EQ((*notdir.error)["code"], "not_a_directory");
  auto badop = FsOp({{"op", "frobnicate"}, {"path", "/"}});
  ASSERT_TRUE(badop.error);
  EXPECT_EQ((*badop.error)["code"], "invalid_request");
  auto nul = FsOp({{"op", "stat"}, {"path", std::string("/tmp/a\0b", 8)}});
  ASSERT_TRUE(nul.error);
  EXPECT_EQ((*nul.error)["code"], "invalid_request");
}

TEST_F(AgentTest, CancelledWriteLeavesNothing) {
  client_.SendJson(Type::kFsRequest, 4, {{"op", "write"}, {"path", dir_ + "/partial"}});
  auto f = client_.Next();
  ASSERT_TRUE(f && f->type == Type::kStarted);
  client_.Send(Type::kFsWriteData, 4, "half");
  client_.Send(Type::kCancel, 4);
  auto r = Collect(client_, 4);
  ASSERT_TRUE(r.error);
  EXPECT_EQ((*r.error)["code"], "cancelled");
  int files = 0;
  for (auto& de : fs::directory_iterator(dir_))
    files += de.path().filename().string().find("partial") != std::string::npos;
  EXPECT_EQ(files, 0);
}

TEST_F(AgentTest, FsOpsRunAsRequestedUser) {
  auto denied = FsOp({{"op", "write"}, {"path", dir_ + "/x"}, {"user", "65534"}});
  ASSERT_TRUE(denied.error);
  EXPECT_EQ((*denied.error)["code"], "permission_denied");
  fs::permissions(dir_, fs::perms::all);
  const uint32_t s = next_stream_++;
  client_.SendJson(Type::kFsRequest, s,
                   {{"op", "write"}, {"path", dir_ + "/sub/f"}, {"user", 65534}});
  ASSERT_EQ(client_.Next()->type, Type::kStarted);
  client_.Send(Type::kFsWriteEnd, s);
  auto r = Collect(client_, s);
  ASSERT_TRUE(r.result) << (r.error ? r.error->dump() : "");
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/sub/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  ASSERT_EQ(stat((dir_ + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
}

TEST_F(AgentTest, NoAgentFdLeaksIntoProcesses) {
  auto r = Exec({{"argv", {"ls", "/proc/self/fd"}}});
  ASSERT_TRUE(r.exit);
  // 0-2 plus the directory fd ls itself opens.
  EXPECT_EQ(r.out, "0\n1\n2\n3\n");
}

// --- Robustness ---------------------------------------------------------------

TEST_F(AgentTest, MalformedRequestEndsOnlyThatStream) {
  client_.Send(Type::kExecStart, 11, "{not json");
  auto r = Collect(client_, 11);
  ASSERT_TRUE(r.error);
  EXPECT_EQ((*r.error)["code"], "invalid_request");
  client_.Send(Type::kExecStart, 12, R"({"argv":"echo"})");
  auto r2 = Collect(client_, 12);
  ASSERT_TRUE(r2.error);
  EXPECT_EQ((*r2.error)["code"], "invalid_request");
  client_.Send(Type::kFsRequest, 13, "[1,2]");
  auto r3 = Collect(client_, 13);
  ASSERT_TRUE(r3.error);
  EXPECT_EQ((*r3.error)["code"], "invalid_request");
  auto ok = Exec({{"argv", {"echo", "still here"}}});
  EXPECT_EQ(ok.out, "still here\n");
}

TEST_F(AgentTest, OversizedFrameDropsOnlyThatConnection) {
  std::string header = hutch::wire::Encode(Type::kExecStart, 1, "");
  const uint32_t len = 2u << 20;
  std::memcpy(header.data(), &len, 4);  // little-endian host
  client_.SendRaw(header);
  EXPECT_FALSE(client_.Next(3000));
  EXPECT_TRUE(client_.eof());
  Client c2;
  ASSERT_TRUE(Connect(c2));
  c2.SendJson(Type::kExecStart, 1, {{"argv", {"echo", "ok"}}});
  auto r = Collect(c2, 1);
  EXPECT_EQ(r.out, "ok\n");
}

TEST_F(AgentTest, ConcurrentStreamsOnOneConnection) {
  client_.SendJson(Type::kExecStart, 21, {{"argv", {"sh", "-c", "sleep 0.3; echo slow"}}});
  client_.SendJson(Type::kExecStart, 22, {{"argv", {"echo", "fast"}}});
  std::map<uint32_t, std::string> out;
  int exits = 0;
  while (exits < 2) {
    auto f = client_.Next();
    ASSERT_TRUE(f);
    if (f->type == Type::kStdout) out[f->stream] += f->payload;
    if (f->type == Type::kExit) {
      ++exits;
      if (exits == 1) {
        EXPECT_EQ(f->stream, 22u);
      }
    }
  }
  EXPECT_EQ(out[21], "slow\n");
  EXPECT_EQ(out[22], "fast\n");
}

TEST_F(AgentTest, BackgroundChildHoldingPipeDoesNotHang) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = Exec({{"argv", {"sh", "-c", "sleep 30 & echo done"}}});
  ASSERT_TRUE(r.exit);
  EXPECT_EQ(r.out, "done\n");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  kill(-(*r.started)["pid"].get<pid_t>(), SIGKILL);
}

// --- Output ring -------------------------------------------------------------

using hutch::agent::OutputRing;

TEST(OutputRing, ReadsBackByOffsetKeepingKindsApart) {
  OutputRing r(1 << 20);
  r.Append(false, "abc");
  r.Append(false, "de");  // joins the stdout chunk
  r.Append(true, "XY");
  r.Append(false, "f");
  EXPECT_EQ(r.oldest(), 0u);
  EXPECT_EQ(r.end(), 8u);
  auto p = r.Read(0, 100);
  EXPECT_FALSE(p.is_err);
  EXPECT_EQ(p.bytes, "abcde");
  p = r.Read(2, 2);
  EXPECT_EQ(p.bytes, "cd");
  p = r.Read(5, 100);
  EXPECT_TRUE(p.is_err);
  EXPECT_EQ(p.bytes, "XY");
  p = r.Read(7, 100);
  EXPECT_FALSE(p.is_err);
  EXPECT_EQ(p.bytes, "f");
  EXPECT_TRUE(r.Read(8, 100).bytes.empty());
}

TEST(OutputRing, DropsOldestBytesBeyondCapacity) {
  OutputRing r(4096);
  std::string all;
  for (int i = 0; i < 3000; ++i) {
    std::string line = std::to_string(i) + "\n";
    r.Append(false, line);
    all += line;
    ASSERT_LE(r.charged(), r.capacity());
  }
  EXPECT_EQ(r.end(), all.size());
  EXPECT_GT(r.oldest(), 0u);
  // What is retained is exactly the tail of what was written.
  std::string tail;
  for (uint64_t off = r.oldest(); off < r.end();) {
    auto p = r.Read(off, 1000);
    ASSERT_FALSE(p.bytes.empty());
    tail += p.bytes;
    off += p.bytes.size();
  }
  EXPECT_EQ(tail, all.substr(static_cast<size_t>(r.oldest())));
  EXPECT_GT(tail.size(), 3000u);  // most of the budget holds bytes, not bookkeeping
  EXPECT_TRUE(r.Read(r.oldest() - 1, 10).bytes.empty());
}

TEST(OutputRing, AlternatingTinyWritesStayWithinBudget) {
  OutputRing r(8192);
  for (int i = 0; i < 100000; ++i) r.Append(i % 2 == 1, "x");
  EXPECT_LE(r.charged(), r.capacity());
  EXPECT_EQ(r.end(), 100000u);
  // One-byte chunks: the overhead is charged, so few of them are kept.
  EXPECT_LE(r.end() - r.oldest(), 8192u / OutputRing::kChunkOverhead);
}

// --- Background processes ---------------------------------------------------------

TEST_F(AgentTest, BackgroundProcessOutputStatusAndExit) {
  const pid_t pid = StartProc({{"argv", {"sh", "-c", "echo out; echo err >&2; exit 3"}},
                               {"stdin", true},
                               {"meta", {{"cmd", "the command"}}}});
  ASSERT_GT(pid, 0);
  json st = WaitEnded(pid);
  EXPECT_EQ(st["running"], false) << st.dump();
  EXPECT_EQ(st["background"], true);
  EXPECT_EQ(st["exit"]["exit_code"], 3) << st.dump();
  EXPECT_EQ(st["meta"]["cmd"], "the command");
  EXPECT_EQ(st["output_end"], 8);
  EXPECT_EQ(st["output_oldest"], 0);
  EXPECT_EQ(st["argv"], json({"sh", "-c", "echo out; echo err >&2; exit 3"}));

  // Attaching after the end still replays everything, then the exit.
  const uint32_t s = next_stream_++;
  client_.SendJson(Type::kProcAttach, s, {{"pid", pid}, {"from", 0}});
  auto r = Collect(client_, s);
  ASSERT_TRUE(r.started) << (r.error ? r.error->dump() : "");
  EXPECT_EQ((*r.started)["pid"], pid);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  ASSERT_TRUE(r.exit);
  EXPECT_EQ((*r.exit)["exit_code"], 3);
  EXPECT_TRUE(r.dropped.empty());

  // From an offset in the middle: the rest only.
  const uint32_t s2 = next_stream_++;
  client_.SendJson(Type::kProcAttach, s2, {{"pid", pid}, {"from", 2}});
  auto r2 = Collect(client_, s2);
  EXPECT_EQ(r2.out + r2.err, "t\nerr\n");

  auto list = Proc(Type::kProcList, json::object());
  ASSERT_TRUE(list.result);
  ASSERT_EQ((*list.result)["processes"].size(), 1u);
  EXPECT_EQ((*list.result)["processes"][0]["pid"], pid);
}

TEST_F(AgentTest, BackgroundProcessOutlivesItsConnection) {
  Client c2;
  ASSERT_TRUE(Connect(c2));
  c2.SendJson(Type::kProcStart, 1,
              {{"argv", {"sh", "-c", "echo first; sleep 0.5; echo second"}}, {"stdin", true}});
  auto started = Collect(c2, 1);
  ASSERT_TRUE(started.result);
  const pid_t pid = (*started.result)["pid"];
  // Follow it on that connection too, then drop the connection mid-way.
  c2.SendJson(Type::kProcAttach, 2, {{"pid", pid}});
  auto first = c2.Next();
  ASSERT_TRUE(first && first->type == Type::kStarted);
  c2.Close();
  json st = WaitEnded(pid);
  EXPECT_EQ(st["exit"]["exit_code"], 0) << st.dump();
  EXPECT_EQ(st["exit"]["signal"], 0) << st.dump();
  const uint32_t s = next_stream_++;
  client_.SendJson(Type::kProcAttach, s, {{"pid", pid}});
  auto r = Collect(client_, s);
  EXPECT_EQ(r.out, "first\nsecond\n");
}

TEST_F(AgentTest, StalledFollowerDoesNotStallProcessAndLearnsWhatItMissed) {
  // ~1.3 MB into a 64 KiB ring, followed by a stream that grants no credit.
  const pid_t pid = StartProc({{"argv", {"seq", "1", "200000"}}, {"buffer_bytes", 65536}});
  ASSERT_GT(pid, 0);
  // The follower has a connection of its own (Collect on client_ skips
  // frames of other streams).
  Client fc;
  ASSERT_TRUE(Connect(fc));
  const uint32_t s = 1;
  fc.SendJson(Type::kProcAttach, s, {{"pid", pid}});
  // The process ends although its follower is stuck at the initial window.
  json st = WaitEnded(pid);
  ASSERT_EQ(st["running"], false);
  EXPECT_EQ(st["exit"]["exit_code"], 0);
  std::string expected;
  for (int i = 1; i <= 200000; ++i) expected += std::to_string(i) + "\n";
  EXPECT_EQ(st["output_end"], expected.size());
  // Now read on, granting credit as we go. Every byte received is the byte
  // at its offset, and every gap is announced exactly.
  uint64_t pos = 0;
  int drops = 0;
  for (;;) {
    auto f = fc.Next(5000);
    ASSERT_TRUE(f) << "stalled at " << pos;
    if (f->type == Type::kStarted) continue;
    if (f->type == Type::kProcDropped) {
      auto d = json::parse(f->payload);
      EXPECT_EQ(d["from"], pos);
      const uint64_t oldest = d["oldest"];
      EXPECT_GT(oldest, pos);
      EXPECT_EQ(d["dropped_bytes"], oldest - pos);
      pos = oldest;
      ++drops;
      continue;
    }
    if (f->type == Type::kStdout) {
      ASSERT_EQ(f->payload, expected.substr(static_cast<size_t>(pos), f->payload.size()))
          << "at " << pos;
      pos += f->payload.size();
      fc.Credit(s, static_cast<uint32_t>(f->payload.size()));
      continue;
    }
    ASSERT_EQ(f->type, Type::kExit);
    break;
  }
  EXPECT_EQ(pos, expected.size());
  EXPECT_GE(drops, 1);
}

TEST_F(AgentTest, BackgroundStdinAndEof) {
  const pid_t pid = StartProc({{"argv", {"cat"}}, {"stdin", true}});
  ASSERT_GT(pid, 0);
  auto w = ProcStdin(pid, "hello ", false);
  ASSERT_TRUE(w.result) << (w.error ? w.error->dump() : "");
  EXPECT_EQ((*w.result)["stdin_open"], true);
  w = ProcStdin(pid, std::string("wor\0ld", 6), true);
  ASSERT_TRUE(w.result);
  json st = WaitEnded(pid);
  EXPECT_EQ(st["exit"]["exit_code"], 0);
  const uint32_t s = next_stream_++;
  client_.SendJson(Type::kProcAttach, s, {{"pid", pid}});
  EXPECT_EQ(Collect(client_, s).out, std::string("hello wor\0ld", 12));
  auto late = ProcStdin(pid, "x", false);
  ASSERT_TRUE(late.error);
  EXPECT_EQ((*late.error)["code"], "conflict");

  // stdin_data: the whole input, then EOF.
  const pid_t p2 = StartProc({{"argv", {"wc", "-c"}}, {"stdin", true}, {"stdin_data", "12345"}});
  WaitEnded(p2);
  const uint32_t s2 = next_stream_++;
  client_.SendJson(Type::kProcAttach, s2, {{"pid", p2}});
  EXPECT_EQ(Collect(client_, s2).out, "5\n");
}

TEST_F(AgentTest, BackgroundSignalTimeoutAndUnknownPid) {
  const pid_t pid = StartProc({{"argv", {"sleep", "100"}}});
  auto sig = Proc(Type::kProcSignal, {{"pid", pid}, {"signal", SIGTERM}});
  ASSERT_TRUE(sig.result) << (sig.error ? sig.error->dump() : "");
  json st = WaitEnded(pid);
  EXPECT_EQ(st["exit"]["signal"], SIGTERM);
  EXPECT_EQ(st["exit"]["exit_code"], 128 + SIGTERM);
  auto again = Proc(Type::kProcSignal, {{"pid", pid}, {"signal", SIGTERM}});
  ASSERT_TRUE(again.error);
  EXPECT_EQ((*again.error)["code"], "conflict");

  const pid_t t = StartProc({{"argv", {"sleep", "100"}}, {"timeout_ms", 200}});
  json ts = WaitEnded(t);
  EXPECT_EQ(ts["exit"]["timed_out"], true);
  EXPECT_EQ(ts["exit"]["signal"], SIGKILL);

  for (Type ty : {Type::kProcStatus, Type::kProcSignal, Type::kProcAttach}) {
    auto r = Proc(ty, {{"pid", 999999}, {"signal", 15}});
    ASSERT_TRUE(r.error) << static_cast<int>(ty);
    EXPECT_EQ((*r.error)["code"], "process_not_found");
  }
  auto in = ProcStdin(999999, "x", false);
  ASSERT_TRUE(in.error);
  EXPECT_EQ((*in.error)["code"], "process_not_found");
  auto bad = Proc(Type::kProcStatus, {{"pid", "x"}});
  ASSERT_TRUE(bad.error);
  EXPECT_EQ((*bad.error)["code"], "invalid_request");
  auto past = Proc(Type::kProcAttach, {{"pid", pid}, {"from", 1000}});
  ASSERT_TRUE(past.error);
  EXPECT_EQ((*past.error)["code"], "invalid_request");
}

TEST_F(AgentTest, ForegroundCommandsAreListedAndSignallable) {
  client_.SendJson(Type::kExecStart, 50, {{"argv", {"sleep", "100"}}});
  auto started = client_.Next();
  ASSERT_TRUE(started && started->type == Type::kStarted);
  const pid_t pid = json::parse(started->payload)["pid"];
  auto list = Proc(Type::kProcList, json::object());
  ASSERT_TRUE(list.result);
  ASSERT_EQ((*list.result)["processes"].size(), 1u);
  EXPECT_EQ((*list.result)["processes"][0]["pid"], pid);
  EXPECT_EQ((*list.result)["processes"][0]["background"], false);
  auto attach = Proc(Type::kProcAttach, {{"pid", pid}});
  ASSERT_TRUE(attach.error);
  EXPECT_EQ((*attach.error)["code"], "conflict");
  ASSERT_TRUE(Proc(Type::kProcSignal, {{"pid", pid}, {"signal", SIGKILL}}).result);
  auto r = Collect(client_, 50);
  ASSERT_TRUE(r.exit);
  EXPECT_EQ((*r.exit)["signal"], SIGKILL);
}

// --- Terminals --------------------------------------------------------------------

TEST_F(AgentTest, PtyHasSizeResizeAndTerminal) {
  client_.SendJson(Type::kPtyStart, 60,
                   {{"argv", {"sh", "-c", "stty size; read x; stty size; test -t 0 && echo tty"}},
                    {"cols", 100},
                    {"rows", 30}});
  std::string out;
  auto read_until = [&](const std::string& needle) {
    for (int i = 0; i < 100 && out.find(needle) == std::string::npos; ++i) {
      auto f = client_.Next(5000);
      if (!f) return false;
      if (f->type == Type::kStdout) out += f->payload;
      if (f->type == Type::kExit || f->type == Type::kError)
        return out.find(needle) != std::string::npos;
    }
    return out.find(needle) != std::string::npos;
  };
  ASSERT_TRUE(read_until("30 100")) << out;
  client_.SendJson(Type::kPtyResize, 60, {{"cols", 132}, {"rows", 43}});
  client_.Send(Type::kStdin, 60, "go\n");
  ASSERT_TRUE(read_until("43 132")) << out;
  ASSERT_TRUE(read_until("tty")) << out;
}

TEST_F(AgentTest, PtyCancelHangsUpTheWholeSession) {
  // Job control puts the background sleep in a process group of its own:
  // only a hangup of the session reaches it.
  client_.SendJson(Type::kPtyStart, 61,
                   {{"argv", {"sh", "-c", "set -m; sleep 100 & echo bg=$!; wait"}}});
  std::string out;
  pid_t bg = 0;
  for (int i = 0; i < 50 && bg == 0; ++i) {
    auto f = client_.Next(5000);
    ASSERT_TRUE(f);
    if (f->type == Type::kStdout) out += f->payload;
    size_t at = out.find("bg=");
    if (at != std::string::npos && out.find('\n', at) != std::string::npos)
      bg = std::atoi(out.c_str() + at + 3);
  }
  ASSERT_GT(bg, 0) << out;
  ASSERT_TRUE(Alive(bg));
  client_.Send(Type::kCancel, 61);
  EXPECT_TRUE(Eventually([&] { return !Alive(bg); })) << "a job of the closed terminal survived";
  auto r = Collect(client_, 61);
  EXPECT_TRUE(r.exit);
}

}  // namespace
