// `hutch template build -f Dockerfile`: a Dockerfile's common subset
// turned into a template spec with ordered steps (docs/templates.md
// "Dockerfiles"). Debian packages no Dockerfile parser for C++, so this is
// a small one: lines joined at a trailing backslash, `#` comments, and
// one stage of FROM, RUN, COPY, ENV, WORKDIR, USER, ARG, CMD, ENTRYPOINT
// (LABEL, EXPOSE and MAINTAINER are read and ignored). COPY sources are
// read here, from the build context, and sent as file contents: the
// server never reads a client's path.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hutch::cli {

struct DockerfileInput {
  std::string text;                               // the Dockerfile
  std::string name;                               // the template's name
  std::string context;                            // the build context directory
  std::map<std::string, std::string> build_args;  // --build-arg NAME=VALUE
  // Whether FROM's name is a template (or alias) of the server: then it is
  // built on it, else on the image of that name ("image:<ref>").
  std::function<bool(const std::string&)> is_template;
};

// The spec as JSON, or the reason (with the line number) it cannot be.
struct DockerfileSpec {
  std::optional<nlohmann::json> spec;
  std::string error;
  std::vector<std::string> warnings;  // instructions read but ignored
};
DockerfileSpec DockerfileToSpec(const DockerfileInput& in);

}  // namespace hutch::cli
