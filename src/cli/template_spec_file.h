// `hutch template build`: reading a spec file into the JSON the server
// takes, and drawing the build's progress.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace hutch::cli {

// Reads a template spec (TOML, or JSON when it starts with '{') and returns
// it as JSON text. A file entry's `src` (a path relative to the spec file)
// is read here and sent as `content_b64`: the server never reads a path a
// client names. Prints the reason and returns nullopt on failure.
std::optional<std::string> LoadTemplateSpec(const std::string& path);

// The whole of a local file (a spec's `src`, a Dockerfile COPY source) into
// `*out`; false when it cannot be read.
bool ReadFile(const std::string& path, std::string* out);

// A one-line progress bar on stderr (when it is a terminal): the step, its
// percent, and the last log line; `verbose` prints every log line instead.
class BuildProgress {
 public:
  BuildProgress(bool enabled, bool verbose);
  void Step(const nlohmann::json& ev);
  void Log(const nlohmann::json& ev);
  void Finish();

 private:
  void Draw();
  bool tty_;
  bool enabled_;
  bool verbose_;
  int percent_ = 0;
  std::string step_;
  std::string last_;
  std::chrono::steady_clock::time_point drawn_{};
};

}  // namespace hutch::cli
