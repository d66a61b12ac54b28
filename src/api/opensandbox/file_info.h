// execd's view of a file: FileInfo {path, type, size, modified_at,
// created_at, owner, group, mode} where `mode` is the permission bits
// written as octal digits read as a decimal number (0755 -> 755), and owner
// and group are names from the sandbox's own /etc/passwd and /etc/group
// (read through the agent, never by the host).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "core/sandbox.h"

namespace hutch::api::opensandbox {

// 0755 -> 755.
int OctalDigits(int mode);
// 755 -> 0755; an error for digits 8 and 9 or more than 07777.
Result<int> ModeFromOctalDigits(int64_t digits);

// uid/gid <-> name of one sandbox.
struct IdNames {
  std::map<int64_t, std::string> users, groups;
  // "name:x:id:..." lines of /etc/passwd or /etc/group.
  static std::map<int64_t, std::string> Parse(const std::string& text);
  std::string User(int64_t uid) const;  // the number if unnamed
  std::string Group(int64_t gid) const;
  // A name or a number; an error names what is unknown.
  Result<int64_t> UserId(const std::string& name) const;
  Result<int64_t> GroupId(const std::string& name) const;
};
asio::awaitable<IdNames> LoadIdNames(std::shared_ptr<Sandbox> sb);

// execd's line-based read (`/files/download?offset=&limit=`): the lines
// `offset` (1-based) to `offset + limit - 1` of `text` with their line
// ends, every line from `offset` on without a limit; nothing past the end.
std::string SliceLines(std::string_view text, int64_t offset, std::optional<int64_t> limit);

// FileInfo of an API entry (core/file_ops' EntryToApi shape).
nlohmann::json FileInfoJson(const nlohmann::json& entry, const IdNames& names);

}  // namespace hutch::api::opensandbox
