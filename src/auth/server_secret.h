// The server secret: the key of every per-sandbox token (sandbox_token.h).
// Kept in its own file, never in state.db, so a copy of the database (a
// backup, a debugging dump) cannot mint tokens (issue 32 #13). Made at the
// first start; replacing the file (and restarting) revokes every token.
#pragma once

#include <string>

#include "common/result.h"

namespace hutch::auth {

// Reads the secret at `path`, or creates it there (32 random bytes as
// hex, mode 0600, written to a temp file and renamed) when it does not
// exist. Refuses a file that other users may read, or one too short to be
// a secret.
Result<std::string> LoadOrCreateServerSecret(const std::string& path);

}  // namespace hutch::auth
