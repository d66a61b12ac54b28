// POST /v1/sandboxes/{id}/exec and /exec/stream against the real hutchd:
// exit codes, argv/env/cwd/user/stdin, timeouts that kill the whole process
// group, SSE event order, cancellation when the client goes away (and
// "detach" opting out of it), long lines, binary and split UTF-8 output, the
// output cap, request validation and concurrent execs (backpressure with a
// slow reader: Exhaustion.*Stdout* in tests/security/).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/hostile.h"
#include "tests/support/test_server.h"

using namespace std::string_literals;
using hutch::client::Base64Decode;
using hutch::client::SseEvent;
using hutch::testing::HostSh;
using hutch::testing::TempDir;
using hutch::testing::TestServer;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One parsed SSE event of an exec stream.
struct Ev {
  std::string name;
  json data;
};

// What a whole exec stream delivered.
struct StreamResult {
  hutch::client::Response resp;
  std::vector<Ev> events;
  std::string out;  // stdout bytes (text and b64 events joined)
  std::string err;  // stderr bytes
  int b64_events = 0;
  int text_events = 0;
};

// Decodes the bytes of one stdout/stderr event.
std::string EventBytes(const json& d) {
  if (d.contains("b64")) return Base64Decode(d["b64"].get<std::string>());
  if (d.contains("text")) return d["text"].get<std::string>();
  ADD_FAILURE() << "output event without text or b64: " << d.dump();
  return {};
}

// Runs an exec stream to the end (or until `on_event` returns false).
StreamResult Stream(TestServer& s, const std::string& id, const json& body,
                    const std::function<bool(const Ev&, StreamResult&)>& on_event = nullptr) {
  StreamResult r;
  auto c = s.Client();
  r.resp = c.Sse("/v1/sandboxes/" + id + "/exec/stream", body, [&](const SseEvent& e) {
    Ev ev{e.event, json::parse(e.data, nullptr, /*allow_exceptions=*/false)};
    if (ev.data.is_discarded())
      ADD_FAILURE() << "event data is not JSON: " << e.data.substr(0, 200);
    if (ev.name == "stdout" || ev.name == "stderr") {
      (ev.data.contains("b64") ? r.b64_events : r.text_events)++;
      (ev.name == "stdout" ? r.out : r.err) += EventBytes(ev.data);
      // Big outputs: keep the event list small, the bytes are in out/err.
      ev.data = json::object();
    }
    r.events.push_back(ev);
    return on_event ? on_event(r.events.back(), r) : true;
  });
  return r;
}

json Post(TestServer& s, const std::string& target, const json& body) {
  auto c = s.Client();
  auto r = c.Json("POST", target, body);
  json j = r.json();
  if (!j.is_object()) j = json::object();
  j["_status"] = r.status;
  j["_content_type"] = r.header("content-type");
  return j;
}

json ExecJ(TestServer& s, const std::string& id, const json& body) {
  return Post(s, "/v1/sandboxes/" + id + "/exec", body);
}

// Number of processes named `sleep` in the sandbox (ps itself is not one).
int CountSleeps(TestServer& s, const std::string& id) {
  auto r = s.Exec(id, "ps -eo comm");
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["exit_code"], 0) << r.dump();
  std::string out = r.value("stdout", "");
  int n = 0;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) nl = out.size();
    if (out.compare(pos, nl - pos, "sleep") == 0) ++n;
    pos = nl + 1;
  }
  return n;
}

// Polls until no `sleep` runs in the sandbox; false if one is still there
// after `limit`.
bool WaitNoSleep(TestServer& s, const std::string& id, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (true) {
    if (CountSleeps(s, id) == 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Polls until at least one `sleep` runs in the sandbox.
bool WaitSleepRunning(TestServer& s, const std::string& id, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (true) {
    if (CountSleeps(s, id) > 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string Sha256Hex(const std::string& data) {
  std::string dir = TempDir("hutch-exec-test");
  std::string path = dir + "/blob";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  std::string out = HostSh("sha256sum " + path);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return out.substr(0, 64);
}

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Sends `body` to `target` on a fresh raw connection and reads the answer
// until `needle` shows up in it. Returns the still-open socket (the caller
// closes it, which is the point) or -1.
int RawPostUntil(TestServer& s, const std::string& target, const json& body,
                 const std::string& needle, std::string* got) {
  int fd = hutch::testing::RawConnect(s.port());
  if (fd < 0) return -1;
  std::string b = body.dump();
  std::string req =
      "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + s.key() +
      "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: " +
      std::to_string(b.size()) + "\r\n\r\n" + b;
  if (!WriteAll(fd, req)) {
    close(fd);
    return -1;
  }
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (got->find(needle) == std::string::npos) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got->append(buf, static_cast<size_t>(n));
  }
  if (got->find(needle) == std::string::npos) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

// One hutchd for the suite; every test makes its own sandbox so that the
// `ps` checks of one test never see another test's processes.
class ApiExec : public ::testing::Test {
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
  json Exec(const json& body) const { return ExecJ(*server_, id_, body); }

  static TestServer* server_;
  std::string id_;
};

TestServer* ApiExec::server_ = nullptr;

// --- 1. Basics ---------------------------------------------------------

TEST_F(ApiExec, ExitCodesAndSeparateStderr) {
  auto r = Exec({{"cmd", "true"}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["exit_code"], 0);
  EXPECT_EQ(r["timed_out"], false);
  EXPECT_EQ(r["oom_killed"], false);
  EXPECT_EQ(r["truncated"], false);
  EXPECT_TRUE(r["duration_ms"].is_number_integer()) << r.dump();
  EXPECT_TRUE(r["_content_type"].get<std::string>().starts_with("application/json")) << r.dump();

  r = Exec({{"cmd", "exit 3"}});
  EXPECT_EQ(r["_status"], 200) << r.dump();  // a command that ran and failed is still 200
  EXPECT_EQ(r["exit_code"], 3);

  r = Exec({{"cmd", "kill -9 $$"}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["exit_code"], 137) << r.dump();
  EXPECT_EQ(r["timed_out"], false);

  r = Exec({{"cmd", "echo out1; echo err1 >&2; echo out2; printf err2 >&2"}});
  EXPECT_EQ(r["stdout"], "out1\nout2\n");
  EXPECT_EQ(r["stderr"], "err1\nerr2");
  EXPECT_EQ(r["exit_code"], 0);
}

TEST_F(ApiExec, ArgvRunsWithoutShell) {
  auto r = Exec({{"argv", {"printf", "%s|", "a b", "c"}}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["stdout"], "a b|c|");
  EXPECT_EQ(r["exit_code"], 0);
  // No shell: metacharacters are plain bytes of an argument.
  r = Exec({{"argv", {"echo", "$HOME; exit 9"}}});
  EXPECT_EQ(r["stdout"], "$HOME; exit 9\n");
  EXPECT_EQ(r["exit_code"], 0);
}

TEST_F(ApiExec, EnvCwdUserAndStdin) {
  auto r = Exec({{"cmd", "printf '%s|%s' \"$FOO\" \"$LANG\""}, {"env", {{"FOO", "bar baz"}}}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["stdout"], "bar baz|C.UTF-8");

  r = Exec({{"cmd", "pwd"}, {"cwd", "/tmp"}});
  EXPECT_EQ(r["stdout"], "/tmp\n") << r.dump();
  r = Exec({{"argv", {"pwd"}}, {"cwd", "/usr/bin"}});
  EXPECT_EQ(r["stdout"], "/usr/bin\n") << r.dump();

  r = Exec({{"cmd", "whoami"}});
  EXPECT_EQ(r["stdout"], "root\n") << r.dump();
  r = Exec({{"cmd", "id -un; echo $HOME; pwd"}, {"user", "user"}});
  EXPECT_EQ(r["stdout"], "user\n/home/user\n/home/user\n") << r.dump();
  r = Exec({{"argv", {"id", "-u"}}, {"user", "user"}});
  EXPECT_EQ(r["stdout"], "1000\n") << r.dump();

  // stdin is piped in and closed; without "stdin" it is empty (/dev/null),
  // so `cat` ends at once.
  std::string in = "line one\nline two\n\xe2\x82\xac no newline";
  r = Exec({{"cmd", "cat"}, {"stdin", in}});
  EXPECT_EQ(r["stdout"], in) << r.dump();
  EXPECT_EQ(r["exit_code"], 0);
  r = Exec({{"cmd", "cat; echo end"}, {"timeout_seconds", 10}});
  EXPECT_EQ(r["stdout"], "end\n") << r.dump();
  EXPECT_EQ(r["timed_out"], false);
  r = Exec({{"cmd", "wc -c"}, {"stdin", std::string(300000, 'x')}});
  EXPECT_EQ(r["stdout"], "300000\n") << r.dump().substr(0, 300);
}

TEST_F(ApiExec, MissingProgramIs127WithMessage) {
  auto r = Exec({{"argv", {"no-such-program-xyz", "arg"}}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["exit_code"], 127) << r.dump();
  EXPECT_EQ(r["stdout"], "");
  std::string err = r.value("stderr", "");
  EXPECT_NE(err.find("no-such-program-xyz"), std::string::npos) << err;
  // Same through the shell.
  r = Exec({{"cmd", "no-such-program-xyz"}});
  EXPECT_EQ(r["exit_code"], 127) << r.dump();
  EXPECT_FALSE(r.value("stderr", "").empty());
}

// --- 2. Timeouts -------------------------------------------------------

TEST_F(ApiExec, TimeoutKillsCommandAndReturnsPromptly) {
  auto t0 = Clock::now();
  auto r = Exec({{"cmd", "sleep 100"}, {"timeout_seconds", 1}});
  double took = SecondsSince(t0);
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["timed_out"], true) << r.dump();
  EXPECT_EQ(r["exit_code"], 137) << r.dump();
  EXPECT_LT(took, 5.0);
  EXPECT_GE(r.value("duration_ms", 0), 900) << r.dump();
  EXPECT_TRUE(WaitNoSleep(s(), id_, std::chrono::seconds(2))) << "sleep survived the timeout";
}

TEST_F(ApiExec, TimeoutKillsWholeProcessGroup) {
  auto t0 = Clock::now();
  auto r = Exec({{"argv", {"sh", "-c", "sleep 100 & sleep 100"}}, {"timeout_seconds", 1}});
  double took = SecondsSince(t0);
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["timed_out"], true) << r.dump();
  EXPECT_EQ(r["exit_code"], 137) << r.dump();
  EXPECT_LT(took, 5.0);
  EXPECT_TRUE(WaitNoSleep(s(), id_, std::chrono::seconds(2)))
      << "a background sleep survived the timeout";
}

// --- 3. Streaming ------------------------------------------------------

TEST_F(ApiExec, StreamEventsInOrderEndingWithExit) {
  auto r = Stream(s(), id_,
                  {{"cmd", "echo out1; sleep 0.1; echo err1 >&2; sleep 0.1; echo out2; exit 5"}});
  EXPECT_EQ(r.resp.status, 200) << r.resp.body;
  EXPECT_TRUE(r.resp.header("content-type").starts_with("text/event-stream"))
      << r.resp.header("content-type");
  EXPECT_TRUE(r.resp.header("x-stream-error").empty()) << r.resp.header("x-stream-error");
  ASSERT_GE(r.events.size(), 3u);
  EXPECT_EQ(r.events.front().name, "start");
  EXPECT_GT(r.events.front().data.value("pid", 0), 0) << r.events.front().data.dump();
  EXPECT_EQ(r.events.back().name, "exit");
  const json& ex = r.events.back().data;
  EXPECT_EQ(ex["exit_code"], 5) << ex.dump();
  EXPECT_EQ(ex["timed_out"], false);
  EXPECT_EQ(ex["oom_killed"], false);
  EXPECT_TRUE(ex["duration_ms"].is_number_integer()) << ex.dump();
  std::vector<std::string> order;
  for (size_t i = 1; i + 1 < r.events.size(); ++i) {
    const auto& n = r.events[i].name;
    EXPECT_TRUE(n == "stdout" || n == "stderr") << "unexpected event " << n << " at " << i;
    if (order.empty() || order.back() != n) order.push_back(n);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"stdout", "stderr", "stdout"}));
  EXPECT_EQ(r.out, "out1\nout2\n");
  EXPECT_EQ(r.err, "err1\n");
  EXPECT_EQ(r.b64_events, 0);
}

TEST_F(ApiExec, StreamOfSilentCommandStillEndsWithExit) {
  auto r = Stream(s(), id_, {{"cmd", "exit 0"}});
  EXPECT_EQ(r.resp.status, 200);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].name, "start");
  EXPECT_EQ(r.events[1].name, "exit");
  EXPECT_EQ(r.events[1].data["exit_code"], 0);
}

// --- 4. Client going away cancels the command in the sandbox --------------

// The stream is read with a raw socket here (not HttpClient::Sse, see
// SseDeliversEventsAsTheyHappen) so the client can walk away right after the
// first stdout event while the command still runs.
TEST_F(ApiExec, ClosingStreamKillsCommand) {
  std::string got;
  int fd = RawPostUntil(s(), "/v1/sandboxes/" + id_ + "/exec/stream",
                        {{"cmd", "echo started; exec sleep 300"}}, "started", &got);
  ASSERT_GE(fd, 0) << "no stdout event within 10 s: " << got;
  EXPECT_NE(got.find("text/event-stream"), std::string::npos) << got;
  EXPECT_NE(got.find("event: start"), std::string::npos) << got;
  bool running = WaitSleepRunning(s(), id_, std::chrono::seconds(5));
  close(fd);  // the client goes away mid-command
  ASSERT_TRUE(running) << "the command never got to its sleep";
  EXPECT_TRUE(WaitNoSleep(s(), id_, std::chrono::seconds(5)))
      << "closing the stream left the command running";
  EXPECT_EQ(s().Exec(id_, "echo ok")["stdout"], "ok\n");
}

TEST_F(ApiExec, ClosingBlockingExecKillsCommand) {
  int fd = hutch::testing::RawConnect(s().port());
  ASSERT_GE(fd, 0);
  std::string body = json{{"cmd", "sleep 300"}}.dump();
  std::string req = "POST /v1/sandboxes/" + id_ + "/exec HTTP/1.1\r\n" + "Host: 127.0.0.1\r\n" +
                    "Authorization: Bearer " + s().key() + "\r\n" +
                    "Content-Type: application/json\r\n" +
                    "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_TRUE(WriteAll(fd, req));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  bool running = WaitSleepRunning(s(), id_, std::chrono::seconds(5));
  close(fd);
  ASSERT_TRUE(running);
  EXPECT_TRUE(WaitNoSleep(s(), id_, std::chrono::seconds(5)))
      << "closing the connection left the command running";
  // The server is fine afterwards.
  EXPECT_EQ(s().Exec(id_, "echo ok")["stdout"], "ok\n");
}

// --- 5. detach ----------------------------------------------------------

TEST_F(ApiExec, DetachedStreamKeepsRunningAfterClose) {
  std::string got;
  int fd =
      RawPostUntil(s(), "/v1/sandboxes/" + id_ + "/exec/stream",
                   {{"cmd", "echo started; exec sleep 300"}, {"detach", true}}, "started", &got);
  ASSERT_GE(fd, 0) << "no stdout event within 10 s: " << got;
  bool running = WaitSleepRunning(s(), id_, std::chrono::seconds(5));
  close(fd);
  ASSERT_TRUE(running) << "the command never got to its sleep";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(CountSleeps(s(), id_), 1) << "a detached command was killed when its client left";
  auto k = s().Exec(id_, "pkill -x sleep");
  EXPECT_EQ(k["exit_code"], 0) << k.dump();
  EXPECT_TRUE(WaitNoSleep(s(), id_, std::chrono::seconds(5)));
}

// The shared client hands SSE events on as they arrive (http::read_some):
// with http::read() small events waited for a full 64 KiB buffer or the end
// of the command, and "return false to close mid-stream" cancelled nothing.
TEST_F(ApiExec, SseDeliversEventsAsTheyHappen) {
  bool first_seen = false, running_at_first = false;
  auto r = Stream(
      s(), id_, {{"cmd", "echo first; sleep 2; echo second"}}, [&](const Ev& e, StreamResult&) {
        if (e.name == "stdout" && !first_seen) {
          first_seen = true;
          // Delivered while the command runs: its `sleep 2` is still there.
          running_at_first = WaitSleepRunning(s(), id_, std::chrono::milliseconds(1500));
        }
        return true;
      });
  EXPECT_TRUE(first_seen);
  EXPECT_EQ(r.out, "first\nsecond\n");
  EXPECT_TRUE(running_at_first)
      << "the first stdout event reached HttpClient::Sse only after the command ended";
}

// --- 6-8. Output content ----------------------------------------------------

TEST_F(ApiExec, FiveMegabyteLineIntact) {
  const size_t kN = 5000000;
  const std::string cmd = "head -c 5000000 /dev/zero | tr '\\0' a";
  auto r = Exec({{"cmd", cmd}});
  EXPECT_EQ(r["_status"], 200);
  EXPECT_EQ(r["exit_code"], 0);
  EXPECT_EQ(r["truncated"], false);
  std::string out = r.value("stdout", "");
  EXPECT_EQ(out.size(), kN);
  EXPECT_EQ(std::count(out.begin(), out.end(), 'a'), static_cast<long>(kN));

  auto st = Stream(s(), id_, {{"cmd", cmd}});
  EXPECT_EQ(st.resp.status, 200);
  ASSERT_FALSE(st.events.empty());
  EXPECT_EQ(st.events.back().name, "exit");
  EXPECT_EQ(st.events.back().data["exit_code"], 0);
  EXPECT_EQ(st.out.size(), kN);
  EXPECT_EQ(std::count(st.out.begin(), st.out.end(), 'a'), static_cast<long>(kN));
  EXPECT_EQ(st.b64_events, 0);
}

TEST_F(ApiExec, BinaryBlobThroughStream) {
  auto st = Stream(
      s(), id_,
      {{"cmd", "head -c 1000000 /dev/urandom | tee /tmp/b | sha256sum > /tmp/sum; cat /tmp/b"}});
  EXPECT_EQ(st.resp.status, 200);
  ASSERT_FALSE(st.events.empty());
  EXPECT_EQ(st.events.back().name, "exit");
  EXPECT_EQ(st.events.back().data["exit_code"], 0);
  EXPECT_GT(st.b64_events, 0);  // random bytes are not UTF-8
  ASSERT_EQ(st.out.size(), 1000000u);
  auto sum = s().Exec(id_, "cat /tmp/sum");
  std::string want = sum.value("stdout", "").substr(0, 64);
  ASSERT_EQ(want.size(), 64u) << sum.dump();
  EXPECT_EQ(Sha256Hex(st.out), want);
}

TEST_F(ApiExec, InvalidUtf8IsBase64AndSplitCharacterIsJoined) {
  auto st = Stream(s(), id_, {{"cmd", "printf '\\377\\376'"}});
  ASSERT_FALSE(st.events.empty());
  EXPECT_EQ(st.events.back().name, "exit");
  EXPECT_EQ(st.out, "\xff\xfe");
  EXPECT_GE(st.b64_events, 1);
  EXPECT_EQ(st.text_events, 0);

  // The euro sign (e2 82 ac) written in two parts, 200 ms apart: arrives as
  // one text character, not as bytes nor replacement characters.
  st = Stream(s(), id_, {{"cmd", "printf '\\342\\202'; sleep 0.2; printf '\\254\\n'"}});
  ASSERT_FALSE(st.events.empty());
  EXPECT_EQ(st.events.back().name, "exit");
  EXPECT_EQ(st.out, "\xe2\x82\xac\n");
  EXPECT_EQ(st.b64_events, 0);
  EXPECT_GE(st.text_events, 1);

  // An unfinished character at the very end is still delivered (as bytes).
  st = Stream(s(), id_, {{"cmd", "printf 'x\\342\\202'"}});
  ASSERT_FALSE(st.events.empty());
  EXPECT_EQ(st.events.back().name, "exit");
  EXPECT_EQ(st.out, "x\xe2\x82");
}

TEST_F(ApiExec, BlockingExecReturnsNonUtf8AsBase64) {
  // Blocking exec: non-UTF-8 output comes back exactly as base64, and the
  // string field is then empty (not a mangled copy).
  auto r = Exec({{"cmd", "printf 'a\\377\\376'"}});
  EXPECT_EQ(r["_status"], 200);
  ASSERT_TRUE(r.contains("stdout_b64")) << r.dump();
  EXPECT_EQ(Base64Decode(r["stdout_b64"].get<std::string>()), "a\xff\xfe");
  EXPECT_EQ(r["stdout"], "");
  EXPECT_EQ(r["stdout_bytes"], 3);
  EXPECT_EQ(r["stdout_truncated"], false);
  r = Exec({{"cmd", "printf 'plain'"}});
  EXPECT_FALSE(r.contains("stdout_b64")) << r.dump();
  EXPECT_EQ(r["stdout"], "plain");
  EXPECT_EQ(r["stdout_bytes"], 5);
  EXPECT_EQ(r["stderr_bytes"], 0);
}

TEST_F(ApiExec, BlockingExecEncodesControlHeavyOutputAsBase64AndTextAsText) {
  // Mostly control bytes (valid UTF-8, but \u0001 is six bytes each): base64.
  auto r = Exec({{"cmd", "head -c 1000 /dev/zero | tr '\\0' '\\1'"}});
  EXPECT_EQ(r["_status"], 200);
  ASSERT_TRUE(r.contains("stdout_b64")) << r.dump();
  EXPECT_EQ(Base64Decode(r["stdout_b64"].get<std::string>()), std::string(1000, '\x01'));
  EXPECT_EQ(r["stdout"], "");
  // Colored text (a few escapes per line) stays text.
  r = Exec({{"cmd", "for i in 1 2 3; do printf '\\033[1mbold %s\\033[0m \"q\" \\\\\\n' $i; done"}});
  EXPECT_FALSE(r.contains("stdout_b64")) << r.dump();
  EXPECT_EQ(r["stdout"],
            "\x1b[1mbold 1\x1b[0m \"q\" \\\n\x1b[1mbold 2\x1b[0m \"q\" \\\n"
            "\x1b[1mbold 3\x1b[0m \"q\" \\\n");
}

TEST_F(ApiExec, BlockingExecBigAnswersRoundTripExactly) {
  // Over 64 KiB the answer is streamed: text with escapes and multi-byte
  // characters (some split between the agent's frames) parses back exactly,
  // and binary output comes back byte-exact through stdout_b64/stderr_b64.
  std::string line = "\xc3\xa9t\xc3\xa9 \"quoted\" back\\slash\ttab \xe2\x82\xac\n";
  std::string text;
  while (text.size() < 300000) text += line;
  auto c = s().Client();
  ASSERT_EQ(c.Request("PUT", "/v1/sandboxes/" + id_ + "/fs?path=/tmp/text.txt", text).status, 201);
  auto r = Exec({{"cmd", "cat /tmp/text.txt"}});
  EXPECT_EQ(r["_status"], 200);
  EXPECT_FALSE(r.contains("stdout_b64"));
  EXPECT_TRUE(r.value("stdout", "") == text) << "text differs";
  EXPECT_EQ(r["stdout_bytes"], text.size());

  std::string bin;
  uint32_t x = 12345;
  for (int i = 0; i < 700000; ++i) {
    x = x * 1103515245 + 12345;
    bin.push_back(static_cast<char>(x >> 24));
  }
  ASSERT_EQ(c.Request("PUT", "/v1/sandboxes/" + id_ + "/fs?path=/tmp/bin", bin).status, 201);
  r = Exec({{"cmd", "cat /tmp/bin; cat /tmp/bin >&2"}});
  EXPECT_EQ(r["_status"], 200);
  ASSERT_TRUE(r.contains("stdout_b64"));
  ASSERT_TRUE(r.contains("stderr_b64"));
  EXPECT_TRUE(Base64Decode(r["stdout_b64"].get<std::string>()) == bin) << "stdout differs";
  EXPECT_TRUE(Base64Decode(r["stderr_b64"].get<std::string>()) == bin) << "stderr differs";
  EXPECT_EQ(r["truncated"], false);
  // Small binary output (answered whole) too, every byte value.
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  ASSERT_EQ(c.Request("PUT", "/v1/sandboxes/" + id_ + "/fs?path=/tmp/all", all).status, 201);
  r = Exec({{"cmd", "cat /tmp/all"}});
  ASSERT_TRUE(r.contains("stdout_b64")) << r.dump();
  EXPECT_TRUE(Base64Decode(r["stdout_b64"].get<std::string>()) == all);
}

// --- 10. Request validation -----------------------------------------------

TEST_F(ApiExec, BadRequestsAreInvalidRequest) {
  const std::string path = "/v1/sandboxes/" + id_ + "/exec";
  const std::vector<json> bad = {
      {{"cmd", "true"}, {"argv", {"true"}}},
      json::object(),
      {{"timeout_seconds", 5}},
      {{"cmd", 5}},
      {{"argv", "true"}},
      {{"argv", {"echo", 1}}},
      {{"argv", json::array()}},
      {{"cmd", ""}},
      {{"cmd", "true"}, {"bogus", 1}},
      {{"cmd", "true"}, {"timeout_seconds", -1}},
      {{"cmd", "true"}, {"timeout_seconds", "5"}},
      {{"cmd", "true"}, {"timeout_seconds", 1.5}},
      {{"cmd", "true"}, {"env", {{"A", 1}}}},
      {{"cmd", "true"}, {"env", {{"A=B", "x"}}}},
      {{"cmd", "true"}, {"env", "A=B"}},
      {{"cmd", "true"}, {"detach", "yes"}},
      {{"cmd", "true"}, {"stdin", 7}},
      {{"cmd", "true"}, {"user", true}},
      {{"cmd", "true"}, {"cwd", ""}},
  };
  for (const auto& b : bad) {
    auto r = Post(s(), path, b);
    EXPECT_EQ(r["_status"], 400) << b.dump() << " -> " << r.dump();
    EXPECT_EQ(r["code"], "invalid_request") << b.dump() << " -> " << r.dump();
    EXPECT_EQ(r["retryable"], false) << b.dump();
    EXPECT_TRUE(r["message"].is_string()) << b.dump();
    EXPECT_TRUE(r["_content_type"].get<std::string>().starts_with("application/json")) << b.dump();
  }
  // Malformed JSON and a non-object body.
  auto c = s().Client();
  auto raw = c.Request("POST", path, "{\"cmd\":", {{"Content-Type", "application/json"}});
  EXPECT_EQ(raw.status, 400);
  EXPECT_EQ(raw.json()["code"], "invalid_request");
  raw = c.Request("POST", path, "[\"true\"]", {{"Content-Type", "application/json"}});
  EXPECT_EQ(raw.status, 400);
  EXPECT_EQ(raw.json()["code"], "invalid_request");

  // The stream route validates the same way, before any event.
  auto st = Stream(s(), id_, {{"cmd", 5}});
  EXPECT_EQ(st.resp.status, 400);
  EXPECT_TRUE(st.events.empty());
  EXPECT_EQ(json::parse(st.resp.body, nullptr, false).value("code", ""), "invalid_request")
      << st.resp.body;

  // Bad specs the agent rejects (unknown user, missing cwd) are errors,
  // not a 200 with an exit code.
  auto r = Exec({{"cmd", "true"}, {"user", "no-such-user"}});
  EXPECT_GE(r["_status"].get<int>(), 400) << r.dump();
  EXPECT_LT(r["_status"].get<int>(), 500) << r.dump();
  r = Exec({{"cmd", "true"}, {"cwd", "/no/such/dir"}});
  EXPECT_GE(r["_status"].get<int>(), 400) << r.dump();
  EXPECT_LT(r["_status"].get<int>(), 500) << r.dump();

  // Still works after all that.
  EXPECT_EQ(s().Exec(id_, "echo ok")["stdout"], "ok\n");
}

TEST_F(ApiExec, UnknownAndDeletedSandbox) {
  auto r = ExecJ(s(), "sb_doesnotexist", {{"cmd", "true"}});
  EXPECT_EQ(r["_status"], 404) << r.dump();
  EXPECT_EQ(r["code"], "sandbox_not_found");
  auto st = Stream(s(), "sb_doesnotexist", {{"cmd", "true"}});
  EXPECT_EQ(st.resp.status, 404);
  EXPECT_TRUE(st.events.empty());

  auto c = s().Client();
  std::string gone = s().CreateSandbox();
  ASSERT_FALSE(gone.empty());
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + gone).status, 204);
  r = ExecJ(s(), gone, {{"cmd", "true"}});
  EXPECT_EQ(r["_status"], 409) << r.dump();
  EXPECT_EQ(r["code"], "sandbox_not_running");
  st = Stream(s(), gone, {{"cmd", "true"}});
  EXPECT_EQ(st.resp.status, 409);
  EXPECT_EQ(json::parse(st.resp.body, nullptr, false).value("code", ""), "sandbox_not_running")
      << st.resp.body;
}

// --- 12. Concurrency --------------------------------------------------------

TEST_F(ApiExec, ConcurrentExecsGetTheirOwnOutput) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 10; ++t) {
    threads.emplace_back([&, t] {
      auto c = s().Client();  // one connection per thread, kept alive
      for (int i = 0; i < 5; ++i) {
        int n = t * 100 + i;
        auto r = c.Json("POST", "/v1/sandboxes/" + id_ + "/exec",
                        {{"cmd", "echo $N; echo e$N >&2"}, {"env", {{"N", std::to_string(n)}}}});
        auto j = r.json();
        EXPECT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(j["stdout"], std::to_string(n) + "\n") << r.body;
        EXPECT_EQ(j["stderr"], "e" + std::to_string(n) + "\n") << r.body;
        if (r.status == 200 && j["stdout"] == std::to_string(n) + "\n") ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 50);
}

// --- 9. Output cap (its own server) -----------------------------------------

TEST(ApiExecCap, BlockingExecOutputIsCutAtLimit) {
  TestServer s({"--exec-output-limit-mb", "1"});
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  auto r = ExecJ(s, id, {{"cmd", "head -c 3000000 /dev/zero | tr '\\0' b; echo done >&2"}});
  EXPECT_EQ(r["_status"], 200) << r.dump().substr(0, 300);
  EXPECT_EQ(r["truncated"], true);
  EXPECT_EQ(r["stdout_truncated"], true);
  EXPECT_EQ(r["stderr_truncated"], false);
  EXPECT_EQ(r["stdout_bytes"], 3000000);
  EXPECT_EQ(r["exit_code"], 0);
  std::string out = r.value("stdout", "");
  EXPECT_EQ(out.size(), 1048576u);
  EXPECT_EQ(std::count(out.begin(), out.end(), 'b'), 1048576);
  EXPECT_EQ(r["stderr"], "done\n");
  // Under the cap nothing is cut.
  r = ExecJ(s, id, {{"cmd", "head -c 1000000 /dev/zero | tr '\\0' b"}});
  EXPECT_EQ(r["truncated"], false);
  EXPECT_EQ(r.value("stdout", "").size(), 1000000u);
  // The cap counts bytes after encoding: base64 of at most 1 MiB.
  r = ExecJ(s, id, {{"cmd", "head -c 3000000 /dev/zero | tr '\\0' '\\1'"}});
  EXPECT_EQ(r["stdout_truncated"], true);
  ASSERT_TRUE(r.contains("stdout_b64"));
  EXPECT_LE(r["stdout_b64"].get<std::string>().size(), 1048576u);
  const std::string kept = Base64Decode(r["stdout_b64"].get<std::string>());
  EXPECT_EQ(kept, std::string(kept.size(), '\x01'));
  EXPECT_GE(kept.size(), 1048576u / 4 * 3 - 3);
}

TEST(ApiExecCap, ServerWideBudgetCutsBigAnswersAndKeepsSmallOnes) {
  // A budget of 1 MiB: an answer past its first 64 KiB may only use three
  // quarters of it, so one exec printing 2 MiB keeps at most 768 KiB.
  TestServer s({"--exec-buffer-budget-mb", "1"});
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  auto r = ExecJ(s, id, {{"cmd", "head -c 2000000 /dev/zero | tr '\\0' b"}});
  EXPECT_EQ(r["_status"], 200) << r.dump().substr(0, 300);
  EXPECT_EQ(r["stdout_truncated"], true);
  EXPECT_EQ(r["stdout_bytes"], 2000000);
  const std::string out = r.value("stdout", "");
  EXPECT_LE(out.size(), 786432u);
  EXPECT_GT(out.size(), 0u);
  EXPECT_EQ(std::count(out.begin(), out.end(), 'b'), static_cast<long>(out.size()));
  // The budget came back: the next one keeps as much, and small ones all.
  r = ExecJ(s, id, {{"cmd", "head -c 2000000 /dev/zero | tr '\\0' b"}});
  EXPECT_EQ(r.value("stdout", "").size(), out.size());
  EXPECT_EQ(s.Exec(id, "echo ok")["stdout"], "ok\n");
  // Nothing is held once the answers went out.
  const std::string m = s.Client().Request("GET", "/metrics").body;
  const size_t at = m.find("\nhutch_exec_output_held_bytes ");
  ASSERT_NE(at, std::string::npos) << m;
  EXPECT_EQ(std::stod(m.substr(at + 30)), 0.0) << m.substr(at, 60);
}
