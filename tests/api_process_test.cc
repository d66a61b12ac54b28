// /v1/sandboxes/{id}/processes against the real hutchd: background
// processes that keep running when their client goes, reattaching to their
// output from any offset (with a marker when it was dropped), list and
// status, stdin with EOF, signals, and request validation.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_server.h"

using hutch::client::Base64Decode;
using hutch::client::SseEvent;
using hutch::testing::TestServer;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// One parsed event of a process stream.
struct Ev {
  std::string name;
  std::string id;
  json data;
};

struct StreamResult {
  hutch::client::Response resp;
  std::vector<Ev> events;
  std::string out, err;  // bytes of the stdout / stderr events
};

std::string EventBytes(const json& d) {
  if (d.contains("b64")) return Base64Decode(d["b64"].get<std::string>());
  if (d.contains("text")) return d["text"].get<std::string>();
  ADD_FAILURE() << "output event without text or b64: " << d.dump();
  return {};
}

std::string Lines(int from, int to) {
  std::string s;
  for (int i = from; i <= to; ++i) s += std::to_string(i) + "\n";
  return s;
}

class ApiProcess : public ::testing::Test {
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
  std::string Base() const { return "/v1/sandboxes/" + id_ + "/processes"; }

  json Call(const std::string& method, const std::string& target, const json& body = nullptr) {
    auto c = s().Client();
    auto r = body.is_null() ? c.Request(method, target) : c.Json(method, target, body);
    json j = r.json();
    if (!j.is_object()) j = json::object();
    j["_status"] = r.status;
    j["_content_type"] = r.header("content-type");
    return j;
  }
  // Starts a background process; returns its pid (0 on failure).
  int Start(const json& body) {
    auto r = Call("POST", Base(), body);
    EXPECT_EQ(r["_status"], 201) << r.dump();
    return r.value("pid", 0);
  }
  json Status(int pid) { return Call("GET", Base() + "/" + std::to_string(pid)); }
  // Polls the status until the process ended (or 20 s passed).
  json WaitEnded(int pid) {
    json st;
    auto deadline = Clock::now() + std::chrono::seconds(20);
    do {
      st = Status(pid);
      if (st["_status"] != 200 || st["running"] == false) return st;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (Clock::now() < deadline);
    ADD_FAILURE() << "process " << pid << " still running: " << st.dump();
    return st;
  }
  // Reads a process's event stream until it ends or `on_event` says stop.
  StreamResult Stream(
      int pid, const std::string& query = "",
      const std::map<std::string, std::string>& headers = {},
      const std::function<bool(const Ev&, const StreamResult&)>& on_event = nullptr) {
    StreamResult r;
    auto c = s().Client();
    r.resp = c.SseRequest("GET", Base() + "/" + std::to_string(pid) + "/stream" + query, "",
                          headers, [&](const SseEvent& e) {
                            Ev ev{e.event, e.id, json::parse(e.data, nullptr, false)};
                            if (ev.data.is_discarded())
                              ADD_FAILURE() << "event data is not JSON: " << e.data;
                            if (ev.name == "stdout") r.out += EventBytes(ev.data);
                            if (ev.name == "stderr") r.err += EventBytes(ev.data);
                            r.events.push_back(ev);
                            return on_event ? on_event(r.events.back(), r) : true;
                          });
    return r;
  }
  // Whether a process with this pid is alive, as another exec sees it.
  bool SeenByPs(int pid) {
    auto r = s().Exec(id_, "ps -o pid= -p " + std::to_string(pid));
    return r["exit_code"] == 0 &&
           r.value("stdout", "").find(std::to_string(pid)) != std::string::npos;
  }

  static TestServer* server_;
  std::string id_;
};

TestServer* ApiProcess::server_ = nullptr;

// The acceptance scenario: start, follow a little, disconnect, reattach
// from 0 and get everything in order, then the exit.
TEST_F(ApiProcess, ReattachAfterDisconnectReplaysEverything) {
  const int pid = Start({{"cmd", "for i in $(seq 1 50); do echo $i; sleep 0.1; done"}});
  ASSERT_GT(pid, 0);

  std::string last_id;
  auto first = Stream(pid, "", {}, [&](const Ev& e, const StreamResult& r) {
    if (e.name == "stdout") last_id = e.id;
    return r.out.size() < Lines(1, 3).size();  // a few lines, then hang up
  });
  EXPECT_EQ(first.resp.status, 200) << first.resp.body;
  EXPECT_TRUE(first.resp.header("content-type").starts_with("text/event-stream"));
  ASSERT_FALSE(first.events.empty());
  EXPECT_EQ(first.events[0].name, "start");
  EXPECT_EQ(first.events[0].data["pid"], pid);
  EXPECT_EQ(first.out, Lines(1, 3));
  EXPECT_EQ(last_id, std::to_string(Lines(1, 3).size()));
  for (const auto& e : first.events) EXPECT_NE(e.name, "exit");

  // Still running without anyone attached.
  auto st = Status(pid);
  EXPECT_EQ(st["_status"], 200) << st.dump();
  EXPECT_EQ(st["running"], true) << st.dump();

  // Resume where the first stream stopped: no duplicates, no gap.
  auto rest = Stream(pid, "?from=" + last_id);
  ASSERT_FALSE(rest.events.empty());
  EXPECT_EQ(rest.events.back().name, "exit");
  EXPECT_EQ(first.out + rest.out, Lines(1, 50));

  // And from the beginning: all 50 lines in order, then the exit event.
  auto all = Stream(pid, "?from=0");
  EXPECT_EQ(all.resp.status, 200);
  ASSERT_GE(all.events.size(), 3u);
  EXPECT_EQ(all.events.front().name, "start");
  EXPECT_EQ(all.out, Lines(1, 50));
  const Ev& ex = all.events.back();
  EXPECT_EQ(ex.name, "exit");
  EXPECT_EQ(ex.data["exit_code"], 0) << ex.data.dump();
  EXPECT_EQ(ex.data["timed_out"], false);
  EXPECT_EQ(ex.data["oom_killed"], false);
  EXPECT_TRUE(ex.data["duration_ms"].is_number_integer());
  // Every output event's id is the offset just past its bytes.
  size_t off = 0;
  for (const auto& e : all.events) {
    if (e.name != "stdout") continue;
    off += EventBytes(e.data).size();
    EXPECT_EQ(e.id, std::to_string(off));
  }
}

TEST_F(ApiProcess, ListAndStatusFollowTheProcess) {
  const int pid = Start({{"cmd", "read x; echo bye; exit 4"}, {"env", {{"A", "1"}}}});
  ASSERT_GT(pid, 0);
  auto st = Status(pid);
  EXPECT_EQ(st["_status"], 200) << st.dump();
  EXPECT_EQ(st["pid"], pid);
  EXPECT_EQ(st["cmd"], "read x; echo bye; exit 4");
  EXPECT_EQ(st["argv"], json({"/bin/sh", "-c", "read x; echo bye; exit 4"}));
  EXPECT_EQ(st["background"], true);
  EXPECT_EQ(st["running"], true);
  EXPECT_TRUE(st["exit_code"].is_null()) << st.dump();
  EXPECT_TRUE(st["ended_at"].is_null());
  EXPECT_EQ(st["stdin_open"], true);
  EXPECT_EQ(st["user"], "root");
  EXPECT_TRUE(st["started_at"].is_string() && st["started_at"].get<std::string>().ends_with("Z"))
      << st.dump();

  auto list = Call("GET", Base());
  ASSERT_EQ(list["_status"], 200) << list.dump();
  ASSERT_TRUE(list["items"].is_array());
  bool found = false;
  for (const auto& p : list["items"]) {
    if (p["pid"] != pid) continue;
    found = true;
    EXPECT_EQ(p["running"], true);
    EXPECT_EQ(p["background"], true);
    EXPECT_EQ(p["cmd"], "read x; echo bye; exit 4");
  }
  EXPECT_TRUE(found) << list.dump();

  auto in = Call("POST", Base() + "/" + std::to_string(pid) + "/stdin", {{"text", "go\n"}});
  EXPECT_EQ(in["_status"], 200) << in.dump();
  st = WaitEnded(pid);
  EXPECT_EQ(st["running"], false);
  EXPECT_EQ(st["exit_code"], 4) << st.dump();
  EXPECT_TRUE(st["signal"].is_null());
  EXPECT_EQ(st["timed_out"], false);
  EXPECT_TRUE(st["ended_at"].is_string());
  EXPECT_TRUE(st["duration_ms"].is_number_integer());
  EXPECT_EQ(st["output_bytes"], 4);
  EXPECT_EQ(st["output_oldest"], 0);

  list = Call("GET", Base());
  found = false;
  for (const auto& p : list["items"])
    if (p["pid"] == pid) {
      found = true;
      EXPECT_EQ(p["running"], false);
      EXPECT_EQ(p["exit_code"], 4);
    }
  EXPECT_TRUE(found) << "an ended process left the list: " << list.dump();
}

TEST_F(ApiProcess, StdinTextBase64AndEof) {
  const int pid = Start({{"argv", {"cat"}}});
  ASSERT_GT(pid, 0);
  const std::string in = Base() + "/" + std::to_string(pid) + "/stdin";
  auto r = Call("POST", in, {{"text", "hello\n"}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["bytes"], 6);
  EXPECT_EQ(r["stdin_open"], true);
  r = Call("POST", in, {{"b64", "/wBh"}});  // ff 00 61
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["bytes"], 3);
  EXPECT_EQ(Status(pid)["running"], true);  // cat waits for more
  r = Call("POST", in, {{"eof", true}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["stdin_open"], false);
  auto st = WaitEnded(pid);
  EXPECT_EQ(st["exit_code"], 0) << st.dump();
  auto out = Stream(pid);
  EXPECT_EQ(out.out, std::string("hello\n\xff\x00"
                                 "a",
                                 9));
  ASSERT_FALSE(out.events.empty());
  EXPECT_EQ(out.events.back().name, "exit");
  // Writing to it now is a conflict.
  r = Call("POST", in, {{"text", "late"}});
  EXPECT_EQ(r["_status"], 409) << r.dump();
  EXPECT_EQ(r["code"], "conflict");

  // With `stdin` in the start body, that is the whole input.
  const int wc = Start({{"cmd", "wc -c"}, {"stdin", "12345"}});
  WaitEnded(wc);
  EXPECT_EQ(Stream(wc).out, "5\n");
}

TEST_F(ApiProcess, SignalEndsProcessAndIsReported) {
  const int pid = Start({{"cmd", "sleep 1000"}});
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(SeenByPs(pid));
  auto r = Call("POST", Base() + "/" + std::to_string(pid) + "/signal", {{"signal", "SIGTERM"}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(r["signal"], 15);
  auto st = WaitEnded(pid);
  EXPECT_EQ(st["running"], false);
  EXPECT_EQ(st["signal"], 15) << st.dump();
  EXPECT_EQ(st["exit_code"], 143);
  auto ev = Stream(pid);
  ASSERT_FALSE(ev.events.empty());
  EXPECT_EQ(ev.events.back().name, "exit");
  EXPECT_EQ(ev.events.back().data["exit_code"], 143);
  // Signalling what has ended is a conflict.
  r = Call("POST", Base() + "/" + std::to_string(pid) + "/signal", {{"signal", "TERM"}});
  EXPECT_EQ(r["_status"], 409) << r.dump();

  // Names without SIG and numbers work too.
  const int p2 = Start({{"argv", {"sleep", "1000"}}});
  r = Call("POST", Base() + "/" + std::to_string(p2) + "/signal", {{"signal", 9}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(WaitEnded(p2)["signal"], 9);
  const int p3 = Start({{"argv", {"sleep", "1000"}}});
  r = Call("POST", Base() + "/" + std::to_string(p3) + "/signal", {{"signal", "int"}});
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_EQ(WaitEnded(p3)["signal"], 2);
}

TEST_F(ApiProcess, OutputBeyondTheBufferIsMarkedDroppedThenTail) {
  const int pid = Start({{"argv", {"seq", "1", "400000"}}});  // ~2.7 MB, over the 1 MiB buffer
  ASSERT_GT(pid, 0);
  auto st = WaitEnded(pid);
  ASSERT_EQ(st["exit_code"], 0) << st.dump();
  const std::string all = Lines(1, 400000);
  EXPECT_EQ(st["output_bytes"], all.size());
  const uint64_t oldest = st["output_oldest"];
  EXPECT_GT(oldest, 0u);
  EXPECT_GE(oldest, all.size() - (1u << 20));

  auto r = Stream(pid, "?from=0");
  ASSERT_GE(r.events.size(), 3u);
  EXPECT_EQ(r.events[0].name, "start");
  EXPECT_EQ(r.events[1].name, "dropped");
  EXPECT_EQ(r.events[1].data["from"], 0);
  EXPECT_EQ(r.events[1].data["oldest"], oldest);
  EXPECT_EQ(r.events[1].data["dropped_bytes"], oldest);
  EXPECT_EQ(r.events[1].id, std::to_string(oldest));
  EXPECT_EQ(r.events.back().name, "exit");
  EXPECT_TRUE(r.out == all.substr(oldest)) << "tail of " << r.out.size() << " bytes differs";

  // Past the end is a bad request; exactly the end gives just the exit.
  auto past = Stream(pid, "?from=" + std::to_string(all.size() + 1));
  EXPECT_EQ(past.resp.status, 400) << past.resp.body;
  auto end = Stream(pid, "?from=" + std::to_string(all.size()));
  ASSERT_EQ(end.events.size(), 2u);
  EXPECT_EQ(end.events[1].name, "exit");
}

TEST_F(ApiProcess, ResumeFromAnEventIdHasNoDuplicates) {
  const int pid = Start({{"cmd", "for i in $(seq 1 300); do echo line$i; echo err$i >&2; done"}});
  ASSERT_GT(pid, 0);
  WaitEnded(pid);
  auto full = Stream(pid);
  ASSERT_FALSE(full.events.empty());
  ASSERT_EQ(full.events.back().name, "exit");
  // Stop after a few events, then resume from the last id, once with
  // ?from= and once the way EventSource does (Last-Event-ID wins over the
  // original URL's from=0).
  for (bool header : {false, true}) {
    std::string id;
    std::string got;
    int n = 0;
    auto part = Stream(pid, "", {}, [&](const Ev& e, const StreamResult&) {
      if (e.name == "stdout" || e.name == "stderr") {
        got += EventBytes(e.data);
        id = e.id;
        ++n;
      }
      return n < 3;
    });
    ASSERT_FALSE(id.empty());
    auto rest =
        header ? Stream(pid, "?from=0", {{"Last-Event-ID", id}}) : Stream(pid, "?from=" + id);
    ASSERT_FALSE(rest.events.empty());
    EXPECT_EQ(rest.events.back().name, "exit");
    std::string rest_bytes;
    for (const auto& e : rest.events)
      if (e.name == "stdout" || e.name == "stderr") rest_bytes += EventBytes(e.data);
    std::string whole;
    for (const auto& e : full.events)
      if (e.name == "stdout" || e.name == "stderr") whole += EventBytes(e.data);
    EXPECT_EQ(got + rest_bytes, whole) << (header ? "Last-Event-ID" : "from");
  }
  EXPECT_EQ(Stream(pid, "", {{"Last-Event-ID", "x"}}).resp.status, 400);
  EXPECT_EQ(Stream(pid, "?from=-1").resp.status, 400);
}

TEST_F(ApiProcess, KeepsRunningAfterEveryClientLeft) {
  int pid = 0;
  {
    auto c = s().Client();
    auto r = c.Json("POST", Base(), {{"cmd", "echo started; exec sleep 1000"}});
    ASSERT_EQ(r.status, 201) << r.body;
    pid = r.json()["pid"];
    // Follow it, then walk away mid-stream; the connection closes too.
    auto st = c.SseRequest("GET", Base() + "/" + std::to_string(pid) + "/stream", "", {},
                           [](const SseEvent& e) { return e.event != "stdout"; });
    EXPECT_EQ(st.status, 200);
  }
  // A different client, through an ordinary exec, still sees it.
  auto deadline = Clock::now() + std::chrono::seconds(2);
  bool seen = true;
  while (Clock::now() < deadline && seen) {
    seen = SeenByPs(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(seen) << "the background process died when its clients left";
  EXPECT_EQ(Status(pid)["running"], true);
  EXPECT_EQ(
      Call("POST", Base() + "/" + std::to_string(pid) + "/signal", {{"signal", "KILL"}})["_status"],
      200);
  EXPECT_EQ(WaitEnded(pid)["signal"], 9);
}

TEST_F(ApiProcess, TimeoutOnlyWhenAskedFor) {
  const int pid = Start({{"cmd", "sleep 1000"}, {"timeout_seconds", 1}});
  auto st = WaitEnded(pid);
  EXPECT_EQ(st["timed_out"], true) << st.dump();
  EXPECT_EQ(st["exit_code"], 137);
}

TEST_F(ApiProcess, UnknownProcessIs404) {
  const std::string p = Base() + "/999999";
  for (auto [method, target, body] : std::vector<std::tuple<std::string, std::string, json>>{
           {"GET", p, nullptr},
           {"POST", p + "/stdin", {{"text", "x"}}},
           {"POST", p + "/signal", {{"signal", "TERM"}}}}) {
    auto r = Call(method, target, body);
    EXPECT_EQ(r["_status"], 404) << target << " " << r.dump();
    EXPECT_EQ(r["code"], "process_not_found") << target;
    EXPECT_EQ(r["retryable"], false);
  }
  auto st = Stream(999999);
  EXPECT_EQ(st.resp.status, 404);
  EXPECT_EQ(json::parse(st.resp.body, nullptr, false).value("code", ""), "process_not_found")
      << st.resp.body;
  EXPECT_TRUE(st.events.empty());

  auto r = Call("GET", "/v1/sandboxes/sb_doesnotexist/processes/1");
  EXPECT_EQ(r["_status"], 404);
  EXPECT_EQ(r["code"], "sandbox_not_found");
  r = Call("GET", Base() + "/abc");
  EXPECT_EQ(r["_status"], 400) << r.dump();
  r = Call("GET", Base() + "/1/nope");
  EXPECT_EQ(r["_status"], 404) << r.dump();
  r = Call("DELETE", Base() + "/1");
  EXPECT_EQ(r["_status"], 405) << r.dump();
}

TEST_F(ApiProcess, BadBodiesAre400) {
  const int pid = Start({{"cmd", "sleep 1000"}});
  ASSERT_GT(pid, 0);
  const std::string p = Base() + "/" + std::to_string(pid);
  const std::vector<std::pair<std::string, json>> bad = {
      {Base(), json::object()},
      {Base(), {{"cmd", 5}}},
      {Base(), {{"cmd", "true"}, {"argv", {"true"}}}},
      {Base(), {{"cmd", "true"}, {"bogus", 1}}},
      {Base(), {{"cmd", "true"}, {"timeout_seconds", -1}}},
      {p + "/stdin", json::object()},
      {p + "/stdin", {{"text", 1}}},
      {p + "/stdin", {{"text", "a"}, {"b64", "YQ=="}}},
      {p + "/stdin", {{"b64", "!!!"}}},
      {p + "/stdin", {{"eof", "yes"}}},
      {p + "/stdin", {{"data", "x"}}},
      {p + "/signal", json::object()},
      {p + "/signal", {{"signal", "SIGFOO"}}},
      {p + "/signal", {{"signal", 0}}},
      {p + "/signal", {{"signal", 65}}},
      {p + "/signal", {{"signal", true}}},
  };
  for (const auto& [target, body] : bad) {
    auto r = Call("POST", target, body);
    EXPECT_EQ(r["_status"], 400) << target << " " << body.dump() << " -> " << r.dump();
    EXPECT_EQ(r["code"], "invalid_request") << target << " " << body.dump();
    EXPECT_TRUE(r["message"].is_string());
    EXPECT_TRUE(r["_content_type"].get<std::string>().starts_with("application/json"));
  }
  auto c = s().Client();
  auto raw =
      c.Request("POST", p + "/signal", "{\"signal\":", {{"Content-Type", "application/json"}});
  EXPECT_EQ(raw.status, 400);
  EXPECT_EQ(raw.json()["code"], "invalid_request");
  // The process was not disturbed by any of it.
  EXPECT_EQ(Status(pid)["running"], true);
  Call("POST", p + "/signal", {{"signal", "KILL"}});
}

}  // namespace
