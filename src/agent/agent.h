// The agent's event loop: one epoll set for the listening socket, every
// connection, every process pipe and a signalfd for SIGCHLD. Single-threaded
// so no state needs locking and setfsuid (per thread) is unambiguous.
//
// The implementation is split by concept: agent.cc (loop, connections,
// framing), exec.cc (processes), procs.cc (the background process table),
// pty.cc (terminals), fs.cc (file operations), identify.cc (a restored
// vm guest's hostname, clock and randomness).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/output_ring.h"
#include "agent/spawn.h"
#include "common/result.h"
#include "common/rooted_fs.h"
#include "common/unique_fd.h"
#include "wire/frame.h"

namespace hutch::agent {

using Clock = std::chrono::steady_clock;

// Credit of a stream nobody reads any more, or of a background process
// (whose output goes to its ring): drain freely.
inline constexpr int64_t kUnlimitedCredit = int64_t{1} << 62;

// A parsed kExecStart / kProcStart / kPtyStart (docs/wire.md).
struct ExecRequest {
  SpawnSpec spawn;
  int64_t timeout_ms = 0;
  bool detach = false;
  std::string user;                       // resolved user name
  nlohmann::json meta;                    // kProcStart: the host's notes, echoed in status
  std::optional<std::string> stdin_data;  // kProcStart: written, then stdin closed
  size_t buffer_bytes = 0;                // kProcStart: output ring capacity
};
// argv_optional: an empty argv is left for the caller to fill (kPtyStart).
Result<ExecRequest> ParseExecRequest(std::string_view payload, bool argv_optional = false);

// The kExit payload for a wait() status.
// `own_kernel`: the agent runs on a kernel of its own (a vm guest), whose
// OOM kill count rides along as "oom_kills".
nlohmann::json ExitJson(int status, bool timed_out, int64_t duration_ms, bool own_kernel);
// oom_kill of /proc/vmstat: the OOM kills of the kernel the agent runs on.
std::optional<uint64_t> KernelOomKills();
int64_t UnixMillisNow();

// One command started by kExecStart, kProcStart or kPtyStart. Owned by the
// Agent rather than the connection: a detached or background process
// outlives it, and a killed one must still be reaped and its pipes drained.
struct Exec {
  uint64_t id = 0;
  uint64_t conn = 0;  // 0 once the connection is gone: output is discarded
  uint32_t stream = 0;
  pid_t pid = -1;  // also the process group id (setsid)
  bool detach = false;
  bool background = false;  // kProcStart: output goes to procs_[pid]'s ring
  bool pty = false;         // kPtyStart: `out` is the pty master, `in` a dup of it
  std::vector<std::string> argv;
  std::string user, cwd;
  int64_t started_unix_ms = 0;
  UniqueFd out, err, in;
  bool out_watched = false, err_watched = false, in_watched = false;
  std::string stdin_buf;     // kStdin bytes the pipe has not taken yet
  bool stdin_close = false;  // close stdin once stdin_buf is written
  int64_t credit = wire::kInitialCredit;
  Clock::time_point start;
  Clock::time_point last_progress;  // last output read or credit resumption
  std::optional<Clock::time_point> deadline;
  bool exited = false;
  int status = 0;
  Clock::time_point exit_time;
  bool timed_out = false;
  bool done = false;  // kExit sent (or due); erased by Sweep
};

// Sends `sig` to the process group of `e` (kSignal, kCancel, timeout,
// connection close).
void SignalGroup(const Exec& e, int sig);

// A connection's stream that follows a background process's output.
struct Follower {
  uint64_t conn = 0;
  uint32_t stream = 0;
  uint64_t pos = 0;  // offset of the next byte to send
  int64_t credit = wire::kInitialCredit;
};

// A process started by kProcStart: its identity, its retained output and,
// once it ended, its exit status. Lives in Agent::procs_ independently of
// any connection, so it keeps running and buffering while hutchd is away.
struct Proc {
  explicit Proc(size_t buffer_bytes) : ring(buffer_bytes) {}
  pid_t pid = -1;
  uint64_t exec_id = 0;  // the Exec doing its I/O; 0 once it ended
  std::vector<std::string> argv;
  std::string user, cwd;
  nlohmann::json meta;
  int64_t started_unix_ms = 0, ended_unix_ms = 0;
  bool running = true;  // false once the Exec finished (exit known, output complete)
  int status = 0;
  bool timed_out = false;
  int64_t duration_ms = 0;
  uint64_t finish_seq = 0;  // order of ending: the oldest finished is evicted first
  OutputRing ring;
  std::map<std::pair<uint64_t, uint32_t>, Follower> followers;  // by (conn, stream)
};

// A "read" file request streaming kFsReadData as credit allows.
struct FsRead {
  UniqueFd fd;
  uint64_t pos = 0;
  uint64_t remaining = 0;
  uint64_t sent = 0;
  int64_t credit = wire::kInitialCredit;
};

// A "write" file request receiving kFsWriteData into a temp file.
struct FsWrite {
  TempFile file;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct Connection {
  uint64_t id = 0;
  UniqueFd fd;
  wire::FrameReader reader;
  std::string out;  // encoded frames not yet accepted by the socket
  size_t out_pos = 0;
  bool out_watched = false;
  bool dead = false;                   // closed; erased by Sweep (handlers may still hold it)
  std::map<uint32_t, uint64_t> execs;  // stream -> Exec id
  std::map<uint32_t, FsRead> reads;
  std::map<uint32_t, FsWrite> writes;
  std::map<uint32_t, pid_t> attaches;  // kProcAttach streams -> followed pid
};

class Agent {
 public:
  // Serves connections accepted on `listener` (the jail driver's socket).
  explicit Agent(UniqueFd listener) : listener_(std::move(listener)) {}
  // Serves one connection at a time over a character device: the vm
  // driver's virtio-serial port, whose other end is a host unix socket.
  struct SerialPort {
    std::string path;
  };
  explicit Agent(SerialPort port) : serial_path_(std::move(port.path)) {}
  // Creates the epoll set and the SIGCHLD signalfd (SIGCHLD must already be
  // blocked).
  Status Init();
  [[noreturn]] void Run();

 private:
  // agent.cc
  void Accept();
  // Registers a connected fd (O_NONBLOCK) and sends it the hello.
  uint64_t AddConnection(UniqueFd fd);
  // Serial mode: opens the port and greets the host once the host side is
  // connected (serial_port.cc).
  void OpenSerial(Clock::time_point now);
  bool serial() const { return !serial_path_.empty(); }
  void OnConnEvent(Connection& c, uint32_t events);
  void OnFrame(Connection& c, wire::Frame& f);
  void Send(Connection& c, wire::Type type, uint32_t stream, std::string_view payload);
  void SendJson(Connection& c, wire::Type type, uint32_t stream, const nlohmann::json& j);
  void SendError(Connection& c, uint32_t stream, const Error& e);
  void SendError(Connection& c, uint32_t stream, const std::string& code, int err,
                 const std::string& msg);
  void Flush(Connection& c);
  void Sweep();
  int NextTimeoutMs();
  Connection* LiveConn(uint64_t id);
  bool StreamLive(const Connection& c, uint32_t stream) const;
  // Adds or removes fd from the epoll set so that *watched matches `want`.
  void Watch(int fd, uint64_t token, uint32_t events, bool* watched, bool want);

  // exec.cc
  void StartExec(Connection& c, const wire::Frame& f);
  void OnExecFrame(Exec& e, const wire::Frame& f);
  void OnExecPipe(uint64_t exec_id, int kind);
  void ReadOutput(Exec& e, bool is_err);
  void PumpStdin(Exec& e);
  void UpdateWatches(Exec& e);
  void Reap();
  void MaybeFinish(Exec& e);
  void FinishExec(Exec& e);
  void OrphanExec(Exec& e);
  void RunTimers(Clock::time_point now);
  // The connection of `e` went away or cancelled it.
  void AbandonExec(Exec& e);

  // procs.cc
  void OnProcRequest(Connection& c, const wire::Frame& f);
  void StartProc(Connection& c, const wire::Frame& f);
  void AttachProc(Connection& c, const wire::Frame& f);
  void ProcStdin(Connection& c, const wire::Frame& f);
  void ProcSignal(Connection& c, const wire::Frame& f);
  void OnAttachFrame(Connection& c, uint32_t stream, const wire::Frame& f);
  // Output read from a background process's pipes.
  void ProcOutput(Exec& e, bool is_err, std::string_view data);
  // Its Exec finished: record the exit, tell followers, evict old entries.
  void ProcFinished(Exec& e);
  void PumpFollowers(Proc& p);
  // Sends what `f` may receive now; true when its stream ended.
  bool PumpFollower(Proc& p, Follower& f);
  void DropFollower(Connection& c, uint32_t stream);
  // Forgets a process table entry; its followers' streams end with kError.
  void EraseProc(pid_t pid, const std::string& why);
  void EvictFinished();
  nlohmann::json ProcJson(const Proc& p) const;
  nlohmann::json ForegroundJson(const Exec& e) const;
  Proc* FindProc(pid_t pid);
  // A running foreground command (kExecStart or kPtyStart) by pid.
  Exec* FindForeground(pid_t pid);
  size_t RunningProcs() const;

  // pty.cc
  void StartPty(Connection& c, const wire::Frame& f);
  void ResizePty(Exec& e, const wire::Frame& f);
  // SIGHUP (and SIGCONT) to every process of session `sid` now, SIGKILL to
  // whatever of it is left a moment later.
  void HangupSession(pid_t sid);
  void RunHangups(Clock::time_point now);

  // identify.cc: a restored or forked vm guest takes its own identity.
  void Identify(Connection& c, const wire::Frame& f);

  // fs.cc
  void StartFs(Connection& c, const wire::Frame& f);
  // A "list" answer in as many frames as it needs: kFsEntries parts under
  // one message's limit, then the kFsResult with the rest.
  void SendListing(Connection& c, uint32_t stream, const nlohmann::json& entries);
  void OnReadFrame(Connection& c, uint32_t stream, const wire::Frame& f);
  void OnWriteFrame(Connection& c, uint32_t stream, const wire::Frame& f);
  // Sends at most one chunk per read stream; true if any can send more now.
  bool PumpReads(Connection& c);

  UniqueFd listener_, epoll_, sigfd_;
  bool listener_watched_ = false;
  std::string serial_path_;
  uint64_t serial_conn_ = 0;  // the live connection over the port, 0: none
  Clock::time_point serial_retry_at_{};
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Connection>> conns_;
  std::map<uint64_t, std::unique_ptr<Exec>> execs_;
  std::map<pid_t, uint64_t> pid_to_exec_;
  std::map<pid_t, std::unique_ptr<Proc>> procs_;
  uint64_t finish_seq_ = 0;
  struct Hangup {
    pid_t sid;
    Clock::time_point kill_at;
    int kill_passes;
  };
  std::vector<Hangup> hangups_;
};

// epoll tokens: the kind in the top byte, a Connection or Exec id below.
// Ids (never fds or pointers) so a stale event for an object closed earlier
// in the same batch is simply not found.
enum TokenKind : uint64_t {
  kListenTok = 1,
  kSignalTok,
  kConnTok,
  kStdoutTok,
  kStderrTok,
  kStdinTok
};
inline uint64_t Token(TokenKind k, uint64_t id) { return (static_cast<uint64_t>(k) << 56) | id; }

// Serializes without throwing on invalid UTF-8 (file names are bytes).
std::string DumpJson(const nlohmann::json& j);

}  // namespace hutch::agent
