#include "api/opensandbox/image_table.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace hutch::api::opensandbox {

ImageTable ImageTable::Defaults() {
  ImageTable t;
  // Python and code-interpreter images run on hutch's `python` and
  // `code-interpreter` templates once built (the template registry falls
  // back to `base`, which carries python3, until then); distribution
  // images on `base` (bash, coreutils, python3), which is always there.
  for (const char* img :
       {"python:3.10", "python:3.11", "python:3.12", "python:3.13", "python:latest"})
    t.Set(img, "python");
  // Every tag of the code-interpreter image (the SDKs' READMEs name
  // v1.0.1, v1.1.0, latest; new releases add more): hutch's one template
  // speaks the protocol of all of them.
  t.Set("opensandbox/code-interpreter:*", "code-interpreter");
  for (const char* img :
       {"ubuntu:22.04", "ubuntu:24.04", "ubuntu:latest", "debian:bookworm", "debian:latest"})
    t.Set(img, "base");
  return t;
}

Result<ImageTable> ImageTable::LoadOver(const std::string& path) {
  std::ifstream in(path);
  if (!in) return MakeError(Code::kInvalidRequest, "cannot read OpenSandbox image table " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  ImageTable t = Defaults();
  try {
    auto j = nlohmann::json::parse(ss.str());
    if (!j.is_object())
      return MakeError(Code::kInvalidRequest, path + ": expected a JSON object {image: template}");
    for (const auto& [k, v] : j.items()) {
      if (!v.is_string() || v.get<std::string>().empty())
        return MakeError(Code::kInvalidRequest,
                         path + ": the template of '" + k + "' must be a non-empty string");
      t.Set(k, v.get<std::string>());
    }
  } catch (const nlohmann::json::exception& e) {
    return MakeError(Code::kInvalidRequest, path + ": " + e.what());
  }
  return t;
}

Result<std::string> ImageTable::Resolve(const std::string& uri) const {
  if (auto it = map_.find(uri); it != map_.end()) return it->second;
  // "name" means "name:latest"; a ':' after the last '/' is a tag.
  const size_t slash = uri.rfind('/');
  const bool tagged = uri.find(':', slash == std::string::npos ? 0 : slash) != std::string::npos;
  if (!tagged)
    if (auto it = map_.find(uri + ":latest"); it != map_.end()) return it->second;
  // "repo:*" stands for every tag of repo (and the untagged name).
  const std::string repo = tagged ? uri.substr(0, uri.rfind(':')) : uri;
  if (auto it = map_.find(repo + ":*"); it != map_.end()) return it->second;
  return MakeError(Code::kTemplateNotFound,
                   "image '" + uri +
                       "' is not mapped to a hutch template: add it to the JSON file given to "
                       "hutchd --opensandbox-images (an object {\"" +
                       uri + "\": \"<template>\"}); see docs/compat-opensandbox.md");
}

}  // namespace hutch::api::opensandbox
