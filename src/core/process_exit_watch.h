// The exits of background processes, for the sandboxes' event logs.
//
// A background process lives in the agent and may end long after the
// request that started it, with nobody following it; the agent has no
// call that waits for an exit without also streaming the output. So hutchd
// asks: a sandbox that has background processes started through hutchd
// whose exit is not logged yet (Sandbox::exits) is polled with one
// process list — first half a second after a start, then less often while
// nothing ends (doubling up to 10 s), so a server that runs for hours costs
// one agent call per 10 s. A follower that sees the exit first
// (ProcessFollower) logs it at once, and the poll then skips it. Paused
// sandboxes are not asked (their agent is frozen). I/O thread only.
#pragma once

#include "core/manager_state.h"
#include "core/process_ops.h"

namespace hutch {

// A background process started: `process_started`, and its exit watched.
void NoteBackgroundStarted(Sandbox& sb, const ProcessInfo& p);
// A watched background process ended: `process_exited` (once per pid).
void NoteBackgroundExited(Sandbox& sb, int pid, const ExitInfo& exit);
// Starts the polls that are due (the reaper's tick calls it).
void PollProcessExits(ManagerState& s);

}  // namespace hutch
