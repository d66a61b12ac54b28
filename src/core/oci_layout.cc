#include "core/oci_layout.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/sha256.h"

namespace hutch {
using nlohmann::json;

namespace {

// Index, manifest and config are small; anything bigger is not one.
constexpr std::streamsize kMaxJsonBytes = 4 << 20;

bool RefChar(unsigned char c) {
  return std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == ':' || c == '/' || c == '@';
}

// A first path component names a registry, as Docker reads names.
bool NamesRegistry(const std::string& first) {
  return first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
         first == "localhost";
}

Result<json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(kImagePullFailed, "the pulled image lacks " + path);
  std::string text(kMaxJsonBytes + 1, '\0');
  in.read(text.data(), kMaxJsonBytes + 1);
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<std::streamsize>(text.size()) > kMaxJsonBytes)
    return MakeError(kImagePullFailed, path + " is larger than an image's metadata may be");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return MakeError(kImagePullFailed, path + ": " + e.what());
  }
}

// "sha256:<64 hex>" only: the digest becomes a path under blobs/.
Result<std::string> BlobPath(const std::string& layout, const json& desc) {
  if (!desc.is_object() || !desc.contains("digest") || !desc["digest"].is_string())
    return MakeError(kImagePullFailed, "an image descriptor has no digest");
  const std::string d = desc["digest"].get<std::string>();
  bool ok = d.size() == 7 + 64 && d.rfind("sha256:", 0) == 0;
  for (size_t i = 7; ok && i < d.size(); ++i)
    ok = std::isxdigit(static_cast<unsigned char>(d[i])) && !std::isupper(d[i]);
  if (!ok) return MakeError(kImagePullFailed, "unsupported digest '" + d + "'");
  return layout + "/blobs/sha256/" + d.substr(7);
}

std::vector<std::string> StringArray(const json& j, const char* key) {
  std::vector<std::string> out;
  if (auto it = j.find(key); it != j.end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

}  // namespace

Result<std::string> CanonicalImageRef(const std::string& ref, const std::string& default_registry) {
  auto bad = [&](const std::string& why) {
    return MakeError(Code::kInvalidRequest, "image '" + ref + "': " + why);
  };
  if (ref.empty() || ref.size() > 255) return bad("must be 1-255 characters");
  if (!std::isalnum(static_cast<unsigned char>(ref[0])))
    return bad("must start with a letter or digit");
  for (unsigned char c : ref)
    if (!RefChar(c)) return bad("has a character an image reference may not have");
  if (ref.find("//") != std::string::npos || ref.back() == '/' || ref.back() == ':')
    return bad("is not an image reference");
  std::string out = ref;
  const size_t slash = out.find('/');
  if (!default_registry.empty() &&
      (slash == std::string::npos || !NamesRegistry(out.substr(0, slash))))
    out = default_registry + "/" + out;
  const size_t last_slash = out.rfind('/');
  const size_t tag = out.find(':', last_slash == std::string::npos ? 0 : last_slash);
  if (out.find('@') == std::string::npos && tag == std::string::npos) out += ":latest";
  return out;
}

std::string ImageRegistryOf(const std::string& canonical_ref) {
  const size_t slash = canonical_ref.find('/');
  if (slash == std::string::npos) return "";
  const std::string first = canonical_ref.substr(0, slash);
  return NamesRegistry(first) ? first : "";
}

Result<OciLayoutImage> ReadOciLayout(const std::string& layout_dir) {
  auto index = ReadJsonFile(layout_dir + "/index.json");
  if (!index.ok()) return index.error();
  if (!index->contains("manifests") || !(*index)["manifests"].is_array() ||
      (*index)["manifests"].size() != 1)
    return MakeError(kImagePullFailed, "the pulled layout does not hold exactly one image");
  const json& mdesc = (*index)["manifests"][0];
  auto mpath = BlobPath(layout_dir, mdesc);
  if (!mpath.ok()) return mpath.error();
  auto manifest = ReadJsonFile(*mpath);
  if (!manifest.ok()) return manifest.error();
  if (!manifest->contains("config"))
    return MakeError(kImagePullFailed, "the image's manifest names no config");
  auto cpath = BlobPath(layout_dir, (*manifest)["config"]);
  if (!cpath.ok()) return cpath.error();
  auto config = ReadJsonFile(*cpath);
  if (!config.ok()) return config.error();
  if (!config->is_object())
    return MakeError(kImagePullFailed, "the image's config is not an object");
  if (const std::string os = config->value("os", "linux"); os != "linux")
    return MakeError(Code::kNotSupported, "the image is for " + os + "; hutch runs linux images");
  OciLayoutImage img;
  img.manifest_digest = mdesc["digest"].get<std::string>();
  img.config_digest = (*manifest)["config"]["digest"].get<std::string>();
  const json empty = json::object();
  const json& c =
      config->contains("config") && (*config)["config"].is_object() ? (*config)["config"] : empty;
  for (const auto& kv : StringArray(c, "Env")) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    img.defaults.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (auto it = c.find("User"); it != c.end() && it->is_string()) img.defaults.user = *it;
  if (auto it = c.find("WorkingDir"); it != c.end() && it->is_string()) img.defaults.workdir = *it;
  img.defaults.entrypoint = StringArray(c, "Entrypoint");
  img.defaults.cmd = StringArray(c, "Cmd");
  const json& layers = (*manifest)["layers"];
  const json& rootfs = (*config)["rootfs"];
  if (!layers.is_array() || !rootfs.is_object())
    return MakeError(kImagePullFailed, "the image names no layers");
  img.diff_ids = StringArray(rootfs, "diff_ids");
  if (img.diff_ids.size() != layers.size())
    return MakeError(kImagePullFailed,
                     "the image's config lists " + std::to_string(img.diff_ids.size()) +
                         " layer digests for " + std::to_string(layers.size()) + " layers");
  for (const auto& d : img.diff_ids) {
    auto p = BlobPath(layout_dir, json{{"digest", d}});  // the same form check
    if (!p.ok()) return p.error().Context("layer diff id");
  }
  img.manifest = std::move(*manifest);
  img.config = std::move(*config);
  return img;
}

namespace {

// Writes `text` as a blob; its descriptor.
Result<json> PutBlob(const std::string& layout, const std::string& media_type,
                     const std::string& text) {
  const std::string hex = Sha256Hex(text);
  const std::string path = layout + "/blobs/sha256/" + hex;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) return MakeError(Code::kStorageFull, "write " + path);
  return json{{"mediaType", media_type}, {"digest", "sha256:" + hex}, {"size", text.size()}};
}

}  // namespace

Status WriteOciLayerRun(const std::string& layout_dir, const OciLayoutImage& img, size_t first,
                        size_t count, const std::string& tag) {
  const json& layers = img.manifest["layers"];
  if (count == 0 || first + count > layers.size())
    return MakeError(Code::kInternal, "layer run out of the image's range");
  using Diff = std::vector<std::string>::difference_type;
  json config = img.config;
  config["rootfs"]["diff_ids"] =
      std::vector<std::string>(img.diff_ids.begin() + static_cast<Diff>(first),
                               img.diff_ids.begin() + static_cast<Diff>(first + count));
  config.erase("history");  // describes every layer; umoci does not need it
  auto cdesc = PutBlob(layout_dir, "application/vnd.oci.image.config.v1+json", config.dump());
  if (!cdesc.ok()) return cdesc.error();
  json manifest = img.manifest;
  manifest["config"] = *cdesc;
  manifest["layers"] = json::array();
  for (size_t i = first; i < first + count; ++i) manifest["layers"].push_back(layers[i]);
  // The layers keep their media types (Docker's or OCI's); the manifest is
  // written as OCI's, which umoci reads either way.
  manifest["mediaType"] = "application/vnd.oci.image.manifest.v1+json";
  auto mdesc = PutBlob(layout_dir, "application/vnd.oci.image.manifest.v1+json", manifest.dump());
  if (!mdesc.ok()) return mdesc.error();
  (*mdesc)["annotations"] = {{"org.opencontainers.image.ref.name", tag}};
  const json index = {{"schemaVersion", 2}, {"manifests", json::array({*mdesc})}};
  const std::string path = layout_dir + "/index.json";
  std::ofstream out(path, std::ios::trunc);
  out << index.dump();
  out.flush();
  if (!out) return MakeError(Code::kStorageFull, "write " + path);
  return Status{};
}

}  // namespace hutch
