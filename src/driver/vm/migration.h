// Saving and loading a VM's state through QEMU's migration, over QMP.
// QEMU runs under `-sandbox on,spawn=deny`, so the `exec:` transport
// (a shell running `cat`) is forbidden, and QEMU 7.2 has no `file:` URI:
// hutchd opens the file itself and hands QEMU the descriptor — with
// `getfd` (SCM_RIGHTS over QMP) to save, as an inherited fd with
// `-incoming fd:N` to load. QEMU never opens a path outside its sandbox
// directory for this.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "common/result.h"

namespace hutch::vm {

namespace asio = boost::asio;

// Stops the VM (if running) and migrates its state into `file` (created,
// root-only). With `ignore_shared`, RAM mapped shared from a file is left
// out (it is in that file already). Returns once QEMU reports completion;
// the VM is left stopped ("postmigrate": `cont` runs it on).
asio::awaitable<Status> SaveState(const std::string& qmp_path, const std::string& file,
                                  bool ignore_shared, std::chrono::milliseconds timeout);

// For a QEMU started with `-incoming defer`: sets x-ignore-shared as the
// saving side had it, loads the stream from QEMU's inherited fd
// `stream_fd`, waits for the load to finish and continues the VM.
// `exited` tells when QEMU died (a broken stream ends it).
asio::awaitable<Status> FinishIncoming(const std::string& qmp_path, int stream_fd,
                                       bool ignore_shared, const std::function<bool()>& exited,
                                       std::chrono::milliseconds timeout);

// Waits `d` on the calling coroutine's executor (polling QMP and the
// agent's socket between tries).
asio::awaitable<void> Pause(std::chrono::milliseconds d);

}  // namespace hutch::vm
