// hutch_load: the load figures of design/security-and-reliability.md
// ("Load"): bursts of concurrent creates, and a mixed soak reporting p50/p99
// per operation with hutchd's RSS and fd count over time. Starts its own
// hutchd (port 0, temp state dir). A measurement, not a test: it prints a
// table and exits non-zero only when the server misbehaved in a way the
// contract forbids (a create answered neither 201 nor 503, or hung; a soak
// operation failed with a 5xx).
//
//   hutch_load [--burst 50,200] [--soak-seconds 600] [--soak-workers 6]
//              [--soak-rate CYCLES_PER_S] [--idle N] [--idle-memory-mb 128]
//              [--default-flags] [--json FILE]
//   --idle N: a fleet of N idle sandboxes (after the bursts, before the
//   soak): every create must answer 201; then exec on one of them, hutchd's
//   RSS and the host memory the fleet took (MemAvailable before and after).
//   --default-flags: hutchd with its own per-key rate limit (else off).
//   --soak-rate paces the soak: cycle k starts no earlier than k/rate s
//   after the start (0, the default: each worker goes as fast as it can).
//   Latencies of two servers compare fairly only at the same rate: an
//   unpaced soak drives a faster server harder.
//   env: HUTCHD_BIN, HUTCH_TEMPLATES_DIR, HUTCH_AGENT_BIN (as hutch_bench)
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_support.h"
#include "client/http_client.h"

namespace {

using json = nlohmann::json;
using namespace hutch::bench;

struct BurstResult {
  int n = 0, created = 0, refused = 0, other = 0;
  bool hung = false;
  double wall_ms = 0;
  Stats latency;                // of the 201s
  std::map<int, int> statuses;  // every status seen
};

// N clients each send one create at the same moment. Every answer must be
// 201 or 503 (capacity); none may hang. Deletes what was made afterwards.
BurstResult Burst(const Hutchd& server, int n) {
  BurstResult r;
  r.n = n;
  std::vector<int> status(n, 0);
  std::vector<double> ms(n, 0);
  std::vector<std::string> ids(n);
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto c = server.Client();
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return go; });
      }
      auto t0 = Clock::now();
      try {
        auto resp = c.Json("POST", "/v1/sandboxes", json{{"ttl_seconds", 600}});
        status[i] = resp.status;
        if (resp.status == 201) ids[i] = resp.json().value("id", "");
      } catch (const std::exception&) {
        status[i] = -1;  // transport failure
      }
      ms[i] = MsSince(t0);
      ++done;
    });
  }
  auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> l(mu);
    go = true;
  }
  cv.notify_all();
  // A create that takes minutes is a hang for this purpose.
  while (done < n && MsSince(t0) < 300000)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  r.wall_ms = MsSince(t0);
  if (done < n) {
    r.hung = true;
    for (auto& t : threads) t.detach();
    return r;
  }
  for (auto& t : threads) t.join();
  std::vector<double> ok_ms;
  for (int i = 0; i < n; ++i) {
    ++r.statuses[status[i]];
    if (status[i] == 201) {
      ++r.created;
      ok_ms.push_back(ms[i]);
    } else if (status[i] == 503) {
      ++r.refused;
    } else {
      ++r.other;
    }
  }
  r.latency = Summarize(ok_ms);
  // Clean up with a few parallel deleters.
  std::atomic<size_t> next{0};
  std::vector<std::thread> del;
  for (int w = 0; w < 8; ++w) {
    del.emplace_back([&] {
      auto c = server.Client();
      for (size_t i; (i = next++) < ids.size();)
        if (!ids[i].empty()) c.Request("DELETE", "/v1/sandboxes/" + ids[i]);
    });
  }
  for (auto& t : del) t.join();
  return r;
}

struct OpSamples {
  std::vector<double> ms;
  int errors = 0, server_errors = 0;
  std::string last_error;
};

struct Sample {
  double t_s;
  uint64_t rss;
  size_t fds;
};

struct SoakResult {
  std::map<std::string, OpSamples> ops;
  std::vector<Sample> samples;
  int cycles = 0;
};

// Workers loop create -> exec -> exec/stream -> upload -> download ->
// delete until the deadline; a sampler records hutchd's RSS and fds.
SoakResult Soak(const Hutchd& server, int seconds, int workers, double rate) {
  SoakResult res;
  std::atomic<long> ticket{0};
  std::mutex mu;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(seconds);
  std::atomic<bool> stop{false};
  auto record = [&](const std::string& op, double ms, int status, const std::string& body) {
    std::lock_guard<std::mutex> l(mu);
    auto& s = res.ops[op];
    if (status >= 200 && status < 300) {
      s.ms.push_back(ms);
    } else {
      ++s.errors;
      if (status >= 500 && status != 503) ++s.server_errors;
      s.last_error = std::to_string(status) + " " + body.substr(0, 200);
    }
  };
  std::thread sampler([&] {
    while (!stop) {
      res.samples.push_back({MsSince(start) / 1000, ProcStatusBytes(server.pid(), "VmRSS"),
                             OpenFdCount(server.pid())});
      for (int i = 0; i < 50 && !stop; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const std::string blob(256 * 1024, 'x');
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      auto c = server.Client();
      while (Clock::now() < deadline) {
        if (rate > 0) {
          const long k = ticket++;
          const auto slot = start + std::chrono::microseconds(static_cast<long>(k * 1e6 / rate));
          if (slot >= deadline) break;
          std::this_thread::sleep_until(slot);
        }
        try {
          auto t0 = Clock::now();
          auto cr = c.Json("POST", "/v1/sandboxes", json{{"ttl_seconds", 300}});
          record("create", MsSince(t0), cr.status, cr.body);
          if (cr.status != 201) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            continue;
          }
          std::string id = cr.json().value("id", "");
          const std::string base = "/v1/sandboxes/" + id;
          t0 = Clock::now();
          auto ex = c.Json("POST", base + "/exec", json{{"cmd", "echo hi"}});
          record("exec", MsSince(t0), ex.status, ex.body);
          t0 = Clock::now();
          auto st = c.Sse(base + "/exec/stream", json{{"cmd", "for i in 1 2 3; do echo $i; done"}},
                          [](const hutch::client::SseEvent&) { return true; });
          record("exec_stream", MsSince(t0), st.status, st.body);
          t0 = Clock::now();
          auto up = c.Request("PUT", base + "/fs?path=/tmp/blob", blob);
          record("upload_256k", MsSince(t0), up.status, up.body);
          t0 = Clock::now();
          auto down = c.Request("GET", base + "/fs?path=/tmp/blob");
          record("download_256k", MsSince(t0),
                 down.status == 200 && down.body.size() == blob.size() ? 200 : 599, down.body);
          t0 = Clock::now();
          auto del = c.Request("DELETE", base);
          record("delete", MsSince(t0), del.status, del.body);
          std::lock_guard<std::mutex> l(mu);
          ++res.cycles;
        } catch (const std::exception& e) {
          record("transport", 0, -1, e.what());
          c.Close();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  sampler.join();
  res.samples.push_back(
      {MsSince(start) / 1000, ProcStatusBytes(server.pid(), "VmRSS"), OpenFdCount(server.pid())});
  return res;
}

int64_t MemAvailableKb() {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  int64_t kb = 0;
  while (in >> name >> kb >> unit)
    if (name == "MemAvailable:") return kb;
  return 0;
}

struct IdleResult {
  int n = 0, created = 0;
  std::map<int, int> statuses;  // of the creates
  std::string last_error;
  double create_wall_s = 0;
  Stats create, exec;
  uint64_t rss_before = 0, rss_after = 0;
  int64_t avail_before_kb = 0, avail_after_kb = 0;
};

// N sandboxes of `memory_mb` created by 8 clients and left idle; then 200
// blocking execs of `true` on one of them, one after another.
IdleResult IdleFleet(const Hutchd& server, int n, int memory_mb) {
  IdleResult r;
  r.n = n;
  r.rss_before = ProcStatusBytes(server.pid(), "VmRSS");
  r.avail_before_kb = MemAvailableKb();
  std::vector<std::string> ids(n);
  std::vector<int> status(n, 0);
  std::vector<double> ms(n, 0);
  std::atomic<int> next{0};
  std::mutex mu;
  auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&] {
      auto c = server.Client();
      for (int i; (i = next++) < n;) {
        auto t = Clock::now();
        try {
          auto resp = c.Json("POST", "/v1/sandboxes",
                             json{{"ttl_seconds", 3600}, {"memory_mb", memory_mb}});
          status[i] = resp.status;
          if (resp.status == 201) {
            ids[i] = resp.json().value("id", "");
          } else {
            std::lock_guard<std::mutex> l(mu);
            r.last_error = std::to_string(resp.status) + " " + resp.body.substr(0, 300);
          }
        } catch (const std::exception& e) {
          status[i] = -1;
          c.Close();
        }
        ms[i] = MsSince(t);
      }
    });
  }
  for (auto& t : workers) t.join();
  r.create_wall_s = MsSince(t0) / 1000;
  std::vector<double> ok_ms;
  std::string one;
  for (int i = 0; i < n; ++i) {
    ++r.statuses[status[i]];
    if (status[i] == 201) {
      ++r.created;
      ok_ms.push_back(ms[i]);
      if (one.empty()) one = ids[i];
    }
  }
  r.create = Summarize(ok_ms);
  // Let the fleet settle (agents started, pools refilled) before measuring.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  r.rss_after = ProcStatusBytes(server.pid(), "VmRSS");
  r.avail_after_kb = MemAvailableKb();
  if (!one.empty()) {
    auto c = server.Client();
    std::vector<double> ex;
    for (int i = 0; i < 220; ++i) {
      auto t = Clock::now();
      auto resp = c.Json("POST", "/v1/sandboxes/" + one + "/exec", json{{"cmd", "true"}});
      if (resp.status != 200) continue;
      if (i >= 20) ex.push_back(MsSince(t));  // the first 20 warm the connection up
    }
    r.exec = Summarize(ex);
  }
  next = 0;
  std::vector<std::thread> del;
  for (int w = 0; w < 8; ++w) {
    del.emplace_back([&] {
      auto c = server.Client();
      for (int i; (i = next++) < n;)
        if (!ids[i].empty()) c.Request("DELETE", "/v1/sandboxes/" + ids[i]);
    });
  }
  for (auto& t : del) t.join();
  return r;
}

void Usage() {
  std::cerr << "usage: hutch_load [--burst 50,200] [--soak-seconds 600] [--soak-workers 6] "
               "[--soak-rate CYCLES_PER_S] [--idle N] [--idle-memory-mb MB] [--default-flags] "
               "[--json FILE]\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> bursts = {50, 200};
  int soak_seconds = 600, soak_workers = 6;
  double soak_rate = 0;
  int idle = 0, idle_memory_mb = 128;
  bool default_flags = false;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage();
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--burst") {
      bursts.clear();
      std::stringstream ss(val());
      for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) bursts.push_back(std::stoi(x));
    } else if (a == "--soak-seconds") {
      soak_seconds = std::stoi(val());
    } else if (a == "--soak-workers") {
      soak_workers = std::stoi(val());
    } else if (a == "--soak-rate") {
      soak_rate = std::stod(val());
    } else if (a == "--idle") {
      idle = std::stoi(val());
    } else if (a == "--idle-memory-mb") {
      idle_memory_mb = std::stoi(val());
    } else if (a == "--default-flags") {
      default_flags = true;
    } else if (a == "--json") {
      json_path = val();
    } else {
      Usage();
      return 2;
    }
  }
  Hutchd server(Env("HUTCHD_BIN", "build/hutchd"),
                Env("HUTCH_TEMPLATES_DIR", "build/test-templates"));
  if (default_flags) server.KeepRateLimit();
  try {
    server.Start();
  } catch (const std::exception& e) {
    std::cerr << "hutch_load: " << e.what() << "\n";
    return 1;
  }
  json out = {{"bursts", json::array()}};
  bool violated = false;
  printf(
      "## Concurrent creates\n\n| clients | 201 | 503 | other | hung | wall (s) | create p50 (ms) "
      "| p99 (ms) |\n");
  printf("|---|---|---|---|---|---|---|---|\n");
  for (int n : bursts) {
    auto r = Burst(server, n);
    printf("| %d | %d | %d | %d | %s | %.1f | %.0f | %.0f |\n", n, r.created, r.refused, r.other,
           r.hung ? "yes" : "no", r.wall_ms / 1000, r.latency.p50, r.latency.p99);
    fflush(stdout);
    json statuses = json::object();
    for (auto [s, c] : r.statuses) statuses[std::to_string(s)] = c;
    out["bursts"].push_back({{"clients", n},
                             {"created", r.created},
                             {"refused_503", r.refused},
                             {"other", r.other},
                             {"hung", r.hung},
                             {"wall_ms", r.wall_ms},
                             {"p50_ms", r.latency.p50},
                             {"p99_ms", r.latency.p99},
                             {"statuses", statuses}});
    if (r.hung || r.other > 0) violated = true;
    if (r.hung) break;
  }
  if (idle > 0 && !violated) {
    auto r = IdleFleet(server, idle, idle_memory_mb);
    const double per_mb =
        r.created ? static_cast<double>(r.avail_before_kb - r.avail_after_kb) / 1024 / r.created
                  : 0;
    printf(
        "\n## Idle fleet: %d sandboxes of memory_mb %d\n\n| created | statuses | create wall (s) "
        "| create p50 / p99 (ms) | exec `true` on one p50 / p99 (ms) | hutchd RSS before / after "
        "(MiB) | host memory per sandbox (MiB) |\n|---|---|---|---|---|---|---|\n",
        idle, idle_memory_mb);
    std::string st;
    for (auto [code, count] : r.statuses)
      st += std::to_string(code) + "×" + std::to_string(count) + " ";
    printf("| %d | %s| %.1f | %.0f / %.0f | %.2f / %.2f | %.1f / %.1f | %.2f |\n", r.created,
           st.c_str(), r.create_wall_s, r.create.p50, r.create.p99, r.exec.p50, r.exec.p99,
           static_cast<double>(r.rss_before) / 1048576, static_cast<double>(r.rss_after) / 1048576,
           per_mb);
    if (!r.last_error.empty()) printf("\nlast refusal: %s\n", r.last_error.c_str());
    fflush(stdout);
    json statuses = json::object();
    for (auto [code, count] : r.statuses) statuses[std::to_string(code)] = count;
    out["idle"] = {{"sandboxes", idle},
                   {"memory_mb", idle_memory_mb},
                   {"created", r.created},
                   {"statuses", statuses},
                   {"create_wall_s", r.create_wall_s},
                   {"create_p50_ms", r.create.p50},
                   {"create_p99_ms", r.create.p99},
                   {"exec_p50_ms", r.exec.p50},
                   {"exec_p99_ms", r.exec.p99},
                   {"rss_before", r.rss_before},
                   {"rss_after", r.rss_after},
                   {"host_mib_per_sandbox", per_mb},
                   {"last_error", r.last_error}};
  }
  if (soak_seconds > 0 && !violated) {
    auto s = Soak(server, soak_seconds, soak_workers, soak_rate);
    printf(
        "\n## Mixed soak: %d s, %d workers, %s, %d cycles\n\n| operation | count | errors | p50 "
        "(ms) "
        "| p99 (ms) |\n",
        soak_seconds, soak_workers,
        soak_rate > 0 ? ("paced at " + std::to_string(soak_rate) + " cycles/s").c_str() : "unpaced",
        s.cycles);
    printf("|---|---|---|---|---|\n");
    json ops = json::object();
    for (auto& [name, o] : s.ops) {
      auto st = Summarize(o.ms);
      printf("| %s | %zu | %d | %.2f | %.2f |\n", name.c_str(), st.runs, o.errors, st.p50, st.p99);
      ops[name] = {{"count", st.runs},
                   {"errors", o.errors},
                   {"p50_ms", st.p50},
                   {"p99_ms", st.p99},
                   {"last_error", o.last_error}};
      if (o.server_errors > 0) violated = true;
    }
    // Growth: the last quarter of the samples against the second quarter
    // (the first is warm-up: pools, caches, allocator arenas).
    auto avg = [&](size_t from, size_t to, bool rss) {
      double sum = 0;
      size_t n = 0;
      for (size_t i = from; i < to && i < s.samples.size(); ++i, ++n)
        sum += rss ? static_cast<double>(s.samples[i].rss) : static_cast<double>(s.samples[i].fds);
      return n ? sum / static_cast<double>(n) : 0.0;
    };
    size_t q = s.samples.size() / 4;
    double rss2 = avg(q, 2 * q, true), rss4 = avg(3 * q, s.samples.size(), true);
    double fd2 = avg(q, 2 * q, false), fd4 = avg(3 * q, s.samples.size(), false);
    uint64_t rss_max = 0;
    size_t fd_max = 0;
    for (auto& x : s.samples) {
      rss_max = std::max(rss_max, x.rss);
      fd_max = std::max(fd_max, x.fds);
    }
    printf("\nhutchd RSS: 2nd quarter avg %.1f MiB, last quarter avg %.1f MiB, max %.1f MiB\n",
           rss2 / 1048576, rss4 / 1048576, static_cast<double>(rss_max) / 1048576);
    printf("hutchd fds: 2nd quarter avg %.1f, last quarter avg %.1f, max %zu\n", fd2, fd4, fd_max);
    json samples = json::array();
    for (auto& x : s.samples) samples.push_back({x.t_s, x.rss, x.fds});
    out["soak"] = {{"seconds", soak_seconds},
                   {"workers", soak_workers},
                   {"rate", soak_rate},
                   {"cycles", s.cycles},
                   {"ops", ops},
                   {"rss_q2_avg", rss2},
                   {"rss_q4_avg", rss4},
                   {"rss_max", rss_max},
                   {"fds_q2_avg", fd2},
                   {"fds_q4_avg", fd4},
                   {"fds_max", fd_max},
                   {"samples", samples}};
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  server.Stop();
  if (violated) {
    std::cerr << "hutch_load: the server broke the load contract (a non-201/503 create, a hang, or "
                 "a 5xx)\n";
    return 1;
  }
  return 0;
}
