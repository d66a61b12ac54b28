// OCI image names and what hutch reads of a pulled image.
//
// skopeo copies an image from a registry into an OCI image layout on disk
// (index.json, blobs/sha256/...; every blob checked against its digest on
// the way); umoci unpacks that layout into a root tree. hutch itself reads
// only three small JSON files of the layout: the index (which manifest),
// the manifest (which config and layers) and the config (the image's Env,
// WorkingDir, User, Entrypoint, Cmd, the layers' diff ids), never a layer.
// To unpack layers one at a time (each its own shared directory, see
// core/image_puller.h) it writes a manifest and config naming a run of the
// image's layers, which umoci then unpacks like any image.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hutch {

// What image failures answer with: an image its registry does not have is
// a template that does not exist (404 template_not_found); a pull that
// failed (registry unreachable, digest mismatch, unpack) is 503
// unavailable, the reason in the message. (Codes of their own,
// image_not_found and image_pull_failed, are a change to common/result.h.)
inline constexpr Code kImageNotFound = Code::kTemplateNotFound;
inline constexpr Code kImagePullFailed = Code::kUnavailable;

// A template that is an image is named "image:<canonical reference>".
inline constexpr const char* kImageTemplatePrefix = "image:";
inline bool IsImageTemplateName(const std::string& name) {
  return name.rfind(kImageTemplatePrefix, 0) == 0;
}

// An image reference as a client gives it ("python:3.12",
// "registry.local:5000/team/tool:1", "name@sha256:<hex>"), checked and put
// in one form: ":latest" added when it has neither tag nor digest, and, when
// `default_registry` is set and the first component names no registry (no
// '.', ':' and not "localhost"), that registry put in front. Anything that
// could reach skopeo's command line as an option or a second argument is
// refused (it must start with a letter or digit and has no space).
Result<std::string> CanonicalImageRef(const std::string& ref, const std::string& default_registry);

// The registry host[:port] of a canonical reference ("" when it names none:
// skopeo's own default applies).
std::string ImageRegistryOf(const std::string& canonical_ref);

// What an image's config says a container starts with.
struct ImageDefaults {
  std::map<std::string, std::string> env;
  std::string user;
  std::string workdir;
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
};

// The one image of an OCI layout skopeo wrote.
struct OciLayoutImage {
  std::string manifest_digest;  // "sha256:<hex>": the image's identity
  std::string config_digest;
  ImageDefaults defaults;
  // The uncompressed digests of the layers, bottom first (the config's
  // rootfs.diff_ids; as many as the manifest has layers): a layer's
  // identity whatever compression the registry served it with.
  std::vector<std::string> diff_ids;
  nlohmann::json manifest;  // as read, for WriteOciLayerRun
  nlohmann::json config;
};

// Reads `layout_dir`'s index.json (its one manifest), that manifest and
// its config (each at most a few MiB). Only linux images are accepted.
Result<OciLayoutImage> ReadOciLayout(const std::string& layout_dir);

// Adds to `layout_dir` an image made of layers [first, first+count) of
// `img` (same config otherwise) and points index.json at it alone, under
// `tag`: `umoci raw unpack --image layout:tag` then applies just those
// layers onto whatever tree it is given.
Status WriteOciLayerRun(const std::string& layout_dir, const OciLayoutImage& img, size_t first,
                        size_t count, const std::string& tag);

}  // namespace hutch
