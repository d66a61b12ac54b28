#include "core/process_exit_watch.h"

#include <algorithm>
#include <memory>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "core/sandbox_events.h"

namespace hutch {

namespace {

constexpr std::chrono::milliseconds kFirstGap{500};
constexpr std::chrono::milliseconds kMaxGap{10000};

// One process list; logs the watched processes that ended.
asio::awaitable<void> PollOnce(std::shared_ptr<Sandbox> sb) {
  auto list = co_await ListProcesses(sb);
  ProcessExitWatch& w = sb->exits;
  w.polling = false;
  if (!list.ok()) {
    // Stopped or failed meanwhile: its end is logged, the processes with it.
    if (sb->rec.status != SandboxStatus::kRunning && sb->rec.status != SandboxStatus::kPaused)
      w.pids.clear();
    w.next_poll = std::chrono::steady_clock::now() + w.gap;
    co_return;
  }
  if (w.rediscover) {
    // Adopted: what runs now was started before the restart.
    w.rediscover = false;
    for (const auto& p : *list)
      if (p.background && p.running) w.pids.emplace(p.pid, CommandLine(p.argv, p.cmd));
  }
  bool ended = false;
  for (auto it = w.pids.begin(); it != w.pids.end();) {
    auto p = std::find_if(list->begin(), list->end(),
                          [pid = it->first](const ProcessInfo& q) { return q.pid == pid; });
    if (p != list->end() && p->running) {
      ++it;
      continue;
    }
    // Gone from the list: ended and already forgotten by the agent (64
    // newer ones ended); its exit status is lost, so nothing is logged.
    if (p != list->end() && p->exit) NoteProcessExited(*sb, it->first, it->second, *p->exit, true);
    it = w.pids.erase(it);
    ended = true;
  }
  w.gap = ended ? kFirstGap : std::min(w.gap * 2, kMaxGap);
  w.next_poll = std::chrono::steady_clock::now() + w.gap;
}

}  // namespace

void NoteBackgroundStarted(Sandbox& sb, const ProcessInfo& p) {
  if (!sb.events) return;
  const std::string command = CommandLine(p.argv, p.cmd);
  NoteEvent(sb, EventLevel::kInfo, "process_started",
            "started background pid " + std::to_string(p.pid) + ": " + command,
            {{"pid", p.pid}, {"command", command}, {"background", true}});
  sb.exits.pids[p.pid] = command;
  sb.exits.gap = kFirstGap;
  sb.exits.next_poll = std::chrono::steady_clock::now() + kFirstGap;
}

void NoteBackgroundExited(Sandbox& sb, int pid, const ExitInfo& exit) {
  auto it = sb.exits.pids.find(pid);
  if (it == sb.exits.pids.end()) return;
  NoteProcessExited(sb, pid, it->second, exit, true);
  sb.exits.pids.erase(it);
}

void PollProcessExits(ManagerState& s) {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [id, sb] : s.sandboxes) {
    ProcessExitWatch& w = sb->exits;
    if ((w.pids.empty() && !w.rediscover) || w.polling || now < w.next_poll) continue;
    if (sb->rec.status != SandboxStatus::kRunning || !sb->instance) {
      if (sb->rec.status != SandboxStatus::kPaused) {
        w.pids.clear();
        w.rediscover = false;
      }
      continue;
    }
    w.polling = true;
    asio::co_spawn(s.ex, PollOnce(sb), asio::detached);
  }
}

}  // namespace hutch
