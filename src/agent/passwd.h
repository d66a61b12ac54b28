// User lookup from the sandbox's own /etc/passwd.
//
// The agent is linked statically, so glibc's NSS (getpwnam) is unusable: it
// would try to dlopen modules that do not exist inside the sandbox. The file
// is re-read on every lookup because users can be added inside the sandbox.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"

namespace hutch::agent {

struct User {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home = "/";
  std::string shell = "/bin/sh";
};

// Resolves a user name or a numeric uid ("" means root). A numeric uid that
// is not in the file is accepted with gid = uid and home "/". An unknown name
// is kInvalidRequest.
Result<User> LookupUser(const std::string& name_or_uid,
                        const std::string& passwd_path = "/etc/passwd");

}  // namespace hutch::agent
