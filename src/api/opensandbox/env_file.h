// execd's env file: the SDKs' `commands.set_env(key, value)` appends
// `KEY='value'` (or `KEY="escaped"` for a value with a single quote) to the
// file the sandbox's EXECD_ENVS names, and execd loads it for every later
// command and session. hutch sets EXECD_ENVS to kExecdEnvFile in the env of
// every execd command and session and loads that file (through the agent)
// before starting one: sandbox env < the file < the request's `envs`.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "core/sandbox.h"

namespace hutch::api::opensandbox {

inline constexpr const char* kExecdEnvFile = "/var/lib/opensandbox/execd.env";

// The file's entries, the last of a key winning: `KEY=VALUE` with an
// optional `export `; a value in single quotes is literal (newlines
// included), one in double quotes takes the escapes \\ \" \n \r \t \$
// (no `$NAME` expansion), a bare one runs to the end of its line. Blank
// lines, `#` comments and lines without a valid name are skipped.
std::map<std::string, std::string> ParseEnvFile(std::string_view text);

// What an execd command or session starts with: the file's entries (none
// while it does not exist) and EXECD_ENVS naming it.
boost::asio::awaitable<Result<std::map<std::string, std::string>>> ExecdEnv(
    std::shared_ptr<Sandbox> sb);

}  // namespace hutch::api::opensandbox
