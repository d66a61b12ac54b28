// fork/exec of a user command with its own session and pipes.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch::agent {

struct SpawnSpec {
  std::vector<std::string> argv;  // non-empty
  std::vector<std::string> env;   // "K=V"
  std::string cwd;                // absolute
  uid_t uid = 0;
  gid_t gid = 0;
  bool stdin_pipe = false;  // false: /dev/null
  // >= 0: a pty slave that becomes the child's controlling terminal and its
  // stdin, stdout and stderr (no pipes are made). Still owned by the caller.
  int pty_slave = -1;
};

struct Spawned {
  pid_t pid = -1;
  UniqueFd stdin_w;   // invalid unless stdin_pipe; non-blocking
  UniqueFd stdout_r;  // non-blocking; invalid with pty_slave
  UniqueFd stderr_r;  // non-blocking; invalid with pty_slave
};

// Starts the process. Failing to exec the program is not an error here: the
// child reports it on its stderr and exits 127/126, as a shell would.
Result<Spawned> Spawn(const SpawnSpec& spec);

}  // namespace hutch::agent
