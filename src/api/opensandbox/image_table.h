// Which hutch template an OpenSandbox image URI runs on. OpenSandbox
// creates sandboxes from container images; hutch has templates, so images
// are mapped by an alias table: built-in defaults, replaced or extended by
// a JSON file (`hutchd --opensandbox-images FILE`: {"<image>": "<template>"}).
#pragma once

#include <map>
#include <string>

#include "common/result.h"

namespace hutch::api::opensandbox {

class ImageTable {
 public:
  // python:3.x → python, OpenSandbox's code-interpreter → code-interpreter
  // (both fall back to base until built), ubuntu and debian → base.
  static ImageTable Defaults();
  // Reads a JSON object of image → template and lays it over the defaults.
  static Result<ImageTable> LoadOver(const std::string& path);
  // Adds or replaces one mapping.
  void Set(std::string image, std::string tpl) { map_[std::move(image)] = std::move(tpl); }
  // The template for `uri`; an image with no tag is also looked up as
  // "<uri>:latest". Unknown images: template_not_found naming the file to
  // configure.
  Result<std::string> Resolve(const std::string& uri) const;
  const std::map<std::string, std::string>& map() const { return map_; }

 private:
  std::map<std::string, std::string> map_;
};

}  // namespace hutch::api::opensandbox
