// Templates from OCI images: `python:3.12` means that image.
//
// hutch does not speak the registry protocol or unpack layers itself; two
// well-kept tools Debian ships do (see ARCHITECTURE.md, "Images"):
//   skopeo copy docker://REF oci:<tmp>/layout:image
//     registry API v2, Docker and OCI manifests, a multi-arch index
//     resolved to linux/amd64, token auth, per-registry credentials
//     (--image-auth-file), mirrors and TLS settings (--image-registries-conf,
//     --image-insecure-registry); every blob is checked against its digest
//     as it is written, and streamed to disk (hutchd reads no layer).
//   umoci raw unpack
//     the layers in order, whiteouts applied, run as root of a user
//     namespace mapped onto the sandbox uid range (as debootstrap is), so
//     a hostile layer can write nothing of the host's and the tree's owners
//     are the sandbox's already.
// The result is a build dir like any template's: <builds>/<hash>/rootfs +
// template.json, the hash taken over the image's manifest digest (two names
// of one image share one dir), renamed into place only when complete; the
// temp dir is <builds>/.tmp-<random>, which a failed pull removes and a
// restarted hutchd's TemplateRegistry::Load removes too. The template is
// registered as "image:<canonical ref>" (owner "": every key may use it);
// a later create of that name is a cache hit (no registry is asked).
//
// I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/oci_layout.h"
#include "core/templates.h"

namespace asio = boost::asio;

namespace hutch {

struct ImagePullOptions {
  std::string skopeo = "/usr/bin/skopeo";
  std::string umoci = "/usr/bin/umoci";
  // containers-registries.conf(5) for skopeo: mirrors, per-registry TLS
  // (`insecure = true`), prefix rewrites. "": the system's.
  std::string registries_conf;
  // containers-auth.json(5): per-registry credentials. "": none.
  std::string auth_file;
  // Registry host[:port] put in front of names that name none.
  std::string default_registry;
  // Registries reached without TLS verification (and over plain HTTP).
  std::set<std::string> insecure_registries;
  std::chrono::seconds timeout{3600};
};

// Progress, as a template build reports it (core/template_builder.h):
// "step" {index, of, name, detail, percent}, "log" {step, stream, text}.
using ImagePullSink =
    std::function<asio::awaitable<void>(const std::string& event, const nlohmann::json& data)>;

class ImageToolLog;  // a tool's output as progress events (image_puller.cc)

class ImagePuller {
 public:
  ImagePuller(ImagePullOptions o, TemplateRegistry* reg) : o_(std::move(o)), reg_(reg) {}

  // The template name of image `ref` ("image:<canonical ref>").
  Result<std::string> TemplateName(const std::string& ref) const;
  // The template of image `ref` (a name as TemplateName gives, or a bare
  // reference): registered already (a cache hit), or pulled, unpacked and
  // registered now. A reference its registry does not know is
  // kImageNotFound; any other failure kImagePullFailed saying why.
  // `sink` (may be null) gets the pull's progress.
  asio::awaitable<Result<TemplateRecord>> Ensure(const std::string& ref,
                                                 const ImagePullSink& sink = nullptr);

  uint64_t pulls() const { return pulls_; }
  uint64_t cache_hits() const { return cache_hits_; }
  // Layer directories an unpack found made already (by another image).
  uint64_t layers_reused() const { return layers_reused_; }
  const ImagePullOptions& options() const { return o_; }

 private:
  asio::awaitable<Result<TemplateRecord>> Pull(const std::string& canonical,
                                               const ImagePullSink& sink);
  std::vector<std::string> SkopeoArgv(const std::string& canonical, const std::string& tmp) const;
  struct HeldBuild;
  // Applies the layers of the pulled layout in `tmp`/layout one after the
  // other, each into its own build dir (made, or found made by another
  // image's pull); the stack of dirs, bottom first. `held` keeps them from
  // collection until the caller registers the template.
  asio::awaitable<Result<std::vector<std::string>>> UnpackLayers(
      const OciLayoutImage& img, const std::string& tmp, ImageToolLog& log,
      std::vector<std::unique_ptr<HeldBuild>>& held, uint64_t& bytes);

  ImagePullOptions o_;
  TemplateRegistry* reg_;
  std::set<std::string> active_;  // canonical refs being pulled
  uint64_t pulls_ = 0;
  uint64_t cache_hits_ = 0;
  uint64_t layers_reused_ = 0;
};

}  // namespace hutch
