// How a command runs in a session's bash (osb_session) and how its end is
// recognised. A run writes to the shell's stdin
//
//   { <command>
//   } </dev/null; printf '\n%s:%d\n' '<sentinel>' "$?"; printf '\n%s\n' '<sentinel>' >&2
//
// The group braces run in the session's shell itself, not a subshell, so
// `cd` and `export` persist; the command's stdin is /dev/null so it cannot
// eat the lines that follow. Once the sentinel line (a fresh random one per
// run) came on both streams, every byte the command wrote has been seen and
// the exit status is known. The sentinel is printed after a newline of its
// own, as the output may not end with one: an empty line just before it is
// that newline, not output.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/opensandbox/command_stream.h"

namespace hutch::api::opensandbox {

// "__HUTCH_SESSION_<16 random hex digits>__".
std::string NewSentinel();
// 'text' for the shell, single quotes inside escaped.
std::string ShellQuote(const std::string& text);
// What is written to the shell for one run (cwd "" keeps the shell's).
std::string SessionScript(const std::string& command, const std::string& cwd,
                          const std::string& sentinel);

// The lines of one stream of a run, up to its sentinel line.
class SentinelLines {
 public:
  explicit SentinelLines(std::string sentinel) : sentinel_(std::move(sentinel)) {}
  // Output lines complete so far; done() once the sentinel line came (on
  // stdout it carries the status).
  std::vector<std::string> Feed(std::string_view data);
  bool done() const { return done_; }
  int status() const { return status_; }

 private:
  std::string sentinel_;
  LineSplitter lines_;
  bool held_empty_ = false;
  bool done_ = false;
  int status_ = 0;
};

}  // namespace hutch::api::opensandbox
