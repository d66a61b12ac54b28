#include "core/image_puller.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "common/clock.h"
#include "common/scoped_tree.h"
#include "common/sha256.h"
#include "common/subprocess.h"
#include "core/debootstrap.h"

namespace hutch {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bumped when what an image's build dirs hold changes (2: a dir per layer).
constexpr int kImageLayout = 2;
// An image's layers become at most this many directories: every layer
// above the last one is applied into that last one together. A sandbox's
// overlay names each directory in one mount option string (a page), and
// images of more layers than this are rare.
constexpr size_t kMaxLayerDirs = 24;
// The bytes of a failed tool's output kept for its error.
constexpr size_t kTailBytes = 2048;
constexpr const char* kPolicy = "/etc/containers/policy.json";

asio::awaitable<void> Announce(const ImagePullSink& sink, int index, const char* name,
                               const std::string& detail) {
  if (!sink) co_return;
  json ev = {{"index", index},
             {"of", 2},
             {"name", name},
             {"detail", detail},
             {"percent", (index - 1) * 50}};
  const std::string kind = "step";
  co_await sink(kind, ev);
}

// What skopeo says when the registry has no such image (or will not say
// whether it has: registries answer "denied" for unknown repositories).
bool SaysNotFound(const std::string& out) {
  for (const char* s : {"manifest unknown", "name unknown", "not found", "NAME_UNKNOWN",
                        "MANIFEST_UNKNOWN", "requested access to the resource is denied"})
    if (out.find(s) != std::string::npos) return true;
  return false;
}

// The jail mounts /proc, /dev and /sys over directories of the root, and
// commands expect a /tmp: an image made FROM scratch may have none of
// them. What is there already (a directory, or anything else the image
// put there) is left as it is.
Status AddMountPoints(const std::string& rootfs, uint32_t uid_base) {
  for (const auto& [dir, mode] : {std::pair<const char*, mode_t>{"proc", 0555},
                                  {"dev", 0755},
                                  {"sys", 0555},
                                  {"tmp", 01777}}) {
    const std::string p = rootfs + "/" + dir;
    if (mkdir(p.c_str(), mode) != 0) {
      if (errno == EEXIST) continue;
      return ErrnoError("create " + p);
    }
    // mkdir's mode passes through the umask.
    if (chmod(p.c_str(), mode) != 0 || lchown(p.c_str(), uid_base, uid_base) != 0)
      return ErrnoError("set up " + p);
  }
  return Status{};
}

uint64_t TreeBytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
      n += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return n;
}

// Whether a recorded stack's directories are all still there (a template
// removed and collected leaves its record dir only while in use).
bool StackOnDisk(const TemplateInfo& info) {
  if (access(info.rootfs.c_str(), F_OK) != 0) return false;
  for (const auto& l : info.layers)
    if (access(l.c_str(), F_OK) != 0) return false;
  return true;
}

}  // namespace

// A tool's output as "log" events, line by line, and its last bytes.
class ImageToolLog {
 public:
  ImageToolLog(const ImagePullSink& sink, std::string step) : sink_(sink), step_(std::move(step)) {}
  asio::awaitable<void> Feed(std::string_view data) {
    tail_.append(data);
    if (tail_.size() > 2 * kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
    if (!sink_) co_return;
    partial_.append(data);
    size_t nl;
    while ((nl = partial_.find('\n')) != std::string::npos) {
      json ev = {{"step", step_}, {"stream", "stdout"}, {"text", partial_.substr(0, nl)}};
      partial_.erase(0, nl + 1);
      const std::string kind = "log";
      co_await sink_(kind, ev);
    }
  }
  std::string Tail() const {
    return tail_.size() > kTailBytes ? tail_.substr(tail_.size() - kTailBytes) : tail_;
  }

 private:
  const ImagePullSink& sink_;
  std::string step_;
  std::string partial_;
  std::string tail_;
};

// Keeps a layer's build dir from TemplateRegistry::Collect until the
// template standing on it is registered.
struct ImagePuller::HeldBuild {
  HeldBuild(TemplateRegistry* reg, std::string hash) : reg(reg), hash(std::move(hash)) {
    reg->Hold(this->hash);
  }
  ~HeldBuild() { reg->Release(hash); }
  HeldBuild(const HeldBuild&) = delete;
  HeldBuild& operator=(const HeldBuild&) = delete;
  TemplateRegistry* reg;
  std::string hash;
};

Result<std::string> ImagePuller::TemplateName(const std::string& ref) const {
  const std::string bare = IsImageTemplateName(ref) ? ref.substr(6) : ref;
  auto c = CanonicalImageRef(bare, o_.default_registry);
  if (!c.ok()) return c.error();
  return kImageTemplatePrefix + *c;
}

std::vector<std::string> ImagePuller::SkopeoArgv(const std::string& canonical,
                                                 const std::string& tmp) const {
  std::vector<std::string> argv = {o_.skopeo, "--override-os", "linux", "--override-arch",
                                   "amd64",   "--tmpdir",      tmp};
  // Signatures are not what hutch checks (digests are); a host without a
  // trust policy file gets skopeo's accept-anything one explicitly.
  if (access(kPolicy, R_OK) != 0) argv.push_back("--insecure-policy");
  argv.insert(argv.end(), {"copy", "--retry-times", "2"});
  if (!o_.auth_file.empty()) argv.insert(argv.end(), {"--src-authfile", o_.auth_file});
  if (o_.insecure_registries.count(ImageRegistryOf(canonical)))
    argv.push_back("--src-tls-verify=false");
  // The reference was checked (CanonicalImageRef: no option, no space);
  // `docker://` in front makes it one argument skopeo cannot read as a flag.
  argv.push_back("docker://" + canonical);
  argv.push_back("oci:" + tmp + "/layout:image");
  return argv;
}

asio::awaitable<Result<TemplateRecord>> ImagePuller::Ensure(const std::string& ref,
                                                            const ImagePullSink& sink) {
  auto name = TemplateName(ref);
  if (!name.ok()) co_return name.error();
  const std::string canonical = name->substr(6);
  // Another create is pulling this image: wait for it, then use its result.
  if (active_.count(canonical)) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    while (active_.count(canonical)) {
      t.expires_after(std::chrono::milliseconds(200));
      co_await t.async_wait(asio::use_awaitable);
    }
  }
  if (reg_->Exists(*name)) {
    ++cache_hits_;
    co_return reg_->Get(*name);
  }
  active_.insert(canonical);
  auto r = co_await Pull(canonical, sink);
  active_.erase(canonical);
  if (!r.ok()) {
    spdlog::warn("image={} pull_failed code={} err=\"{}\"", canonical, CodeName(r.error().code),
                 r.error().message);
  }
  co_return r;
}

asio::awaitable<Result<std::vector<std::string>>> ImagePuller::UnpackLayers(
    const OciLayoutImage& img, const std::string& tmp, ImageToolLog& log,
    std::vector<std::unique_ptr<HeldBuild>>& held, uint64_t& bytes) {
  const size_t n = img.diff_ids.size();
  if (n == 0) co_return MakeError(kImagePullFailed, "the image has no layers");
  const uint32_t base = reg_->uid_base();
  const std::string work = kToolWorkdir;
  std::vector<std::string> stack;  // bottom first
  // A directory's key is the chain of layers from the bottom up to its
  // own (as Docker's chain ids are): the same layer over different layers
  // is a different tree.
  std::string chain = Sha256Hex(json{{"image_layers", base}, {"layout", kImageLayout}}.dump());
  const size_t runs = std::min(n, kMaxLayerDirs);
  for (size_t i = 0; i < runs; ++i) {
    const size_t count = i + 1 == runs ? n - i : 1;
    for (size_t k = i; k < i + count; ++k) chain = Sha256Hex(chain + "\n" + img.diff_ids[k]);
    held.push_back(std::make_unique<HeldBuild>(reg_, chain));
    const std::string sub = i == 0 ? "rootfs" : "layer";
    const std::string final_dir = reg_->BuildDir(chain);
    if (access((final_dir + "/" + sub).c_str(), F_OK) == 0) {
      ++layers_reused_;
      stack.push_back(final_dir + "/" + sub);
      continue;
    }
    const std::string run = "run-" + std::to_string(i);
    const std::string out = tmp + "/" + run;
    if (mkdir(out.c_str(), 0755) != 0 || mkdir((out + "/" + sub).c_str(), 0755) != 0 ||
        chown((out + "/" + sub).c_str(), base, base) != 0)
      co_return ErrnoError("create " + out);
    if (auto st = WriteOciLayerRun(tmp + "/layout", img, i, count, run); !st.ok())
      co_return st.error();
    ToolUserNamespace userns{base, 65536, tmp};
    std::string target = work + "/" + run + "/" + sub;
    if (i > 0) {
      // Applied through an overlay of the layers below: what the layer
      // adds lands in the upper dir, what it deletes becomes overlayfs's
      // own whiteouts there, so the dir is an overlay layer as it is.
      std::string lowers;
      for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
        if (it->find_first_of(":,\\") != std::string::npos)
          co_return MakeError(Code::kInternal, "layer path " + *it + " cannot be an overlay lower");
        lowers += (lowers.empty() ? "" : ":") + *it;
      }
      if (mkdir((out + "/.work").c_str(), 0700) != 0 || mkdir((out + "/merged").c_str(), 0755) != 0)
        co_return ErrnoError("create " + out + " overlay dirs");
      userns.overlay_target = out + "/merged";
      userns.overlay_options =
          "lowerdir=" + lowers + ",upperdir=" + out + "/layer,workdir=" + out + "/.work";
      target = work + "/" + run + "/merged";
    }
    std::vector<std::string> argv = {o_.umoci, "raw", "unpack", "--image", work + "/layout:" + run,
                                     target};
    std::vector<std::string> uenv = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"};
    std::function<asio::awaitable<void>(std::string_view)> on_unpack =
        [&log](std::string_view d) -> asio::awaitable<void> { co_await log.Feed(d); };
    auto urc = co_await RunToolStreaming(argv, uenv, o_.timeout, on_unpack, &userns);
    if (!urc.ok()) co_return urc.error();
    if (*urc != 0)
      co_return MakeError(kImagePullFailed, "umoci exited with " + std::to_string(*urc) +
                                                " on layer " + std::to_string(i + 1) + ": " +
                                                log.Tail());
    std::error_code ec;
    fs::remove_all(out + "/.work", ec);
    fs::remove(out + "/merged", ec);
    const std::string layer = out + "/" + sub;
    // No setuid bits, no device nodes; owners stay in the sandbox range.
    if (auto st = ShiftRootOwners(layer, base); !st.ok()) co_return st.error();
    if (i == 0)
      if (auto st = AddMountPoints(layer, base); !st.ok()) co_return st.error();
    bytes += TreeBytes(layer);
    // Another pull may have made the same dir meanwhile: then it is used
    // and ours goes with the temp dir.
    if (rename(out.c_str(), final_dir.c_str()) != 0 &&
        access((final_dir + "/" + sub).c_str(), F_OK) != 0)
      co_return ErrnoError("rename " + out + " to " + final_dir);
    stack.push_back(final_dir + "/" + sub);
  }
  co_return stack;
}

asio::awaitable<Result<TemplateRecord>> ImagePuller::Pull(const std::string& canonical,
                                                          const ImagePullSink& sink) {
  const auto t0 = std::chrono::steady_clock::now();
  if (access(o_.skopeo.c_str(), X_OK) != 0 || access(o_.umoci.c_str(), X_OK) != 0)
    co_return MakeError(
        Code::kNotSupported,
        "templates from images need skopeo and umoci (scripts/setup installs them)");
  ++pulls_;
  ScopedTree tmp{reg_->builds_dir() + "/.tmp-" + RandomHex(8)};
  std::error_code ec;
  fs::create_directories(tmp.dir, ec);
  if (ec) co_return MakeError(Code::kInternal, "create " + tmp.dir + ": " + ec.message());

  // 1. skopeo: registry → OCI layout on disk, digests verified.
  co_await Announce(sink, 1, "pull", canonical);
  ImageToolLog pull_log(sink, "pull");
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + tmp.dir};
  if (!o_.registries_conf.empty())
    env.push_back("CONTAINERS_REGISTRIES_CONF=" + o_.registries_conf);
  std::function<asio::awaitable<void>(std::string_view)> on_pull =
      [&pull_log](std::string_view d) -> asio::awaitable<void> { co_await pull_log.Feed(d); };
  auto rc = co_await RunToolStreaming(SkopeoArgv(canonical, tmp.dir), env, o_.timeout, on_pull);
  if (!rc.ok()) co_return rc.error().Context("pull " + canonical);
  if (*rc != 0) {
    const std::string tail = pull_log.Tail();
    if (SaysNotFound(tail))
      co_return MakeError(kImageNotFound, "image '" + canonical + "' not found: " + tail);
    co_return MakeError(kImagePullFailed, "pull " + canonical + ": skopeo exited with " +
                                              std::to_string(*rc) + ": " + tail);
  }
  auto img = ReadOciLayout(tmp.dir + "/layout");
  if (!img.ok()) co_return img.error().Context("pull " + canonical);

  // The image's record (template.json) has a build dir of its own, keyed
  // by the manifest digest: another name of the same image, pulled before,
  // is registered at once.
  const json key = {{"oci_image", img->manifest_digest},
                    {"uid_base", reg_->uid_base()},
                    {"layout", kImageLayout}};
  const std::string hash = Sha256Hex(key.dump());
  const std::string dest = reg_->BuildDir(hash);
  TemplateRecord r;
  std::vector<std::unique_ptr<HeldBuild>> held;
  if (auto found = reg_->FindBuild(hash); found.ok() && StackOnDisk(found->info)) {
    r = *found;
  } else {
    // 2. umoci, one layer at a time: each into a build dir of its own,
    // shared by every image with the same layers below it.
    co_await Announce(sink, 2, "unpack", img->manifest_digest);
    ImageToolLog unpack_log(sink, "unpack");
    if (chown(tmp.dir.c_str(), reg_->uid_base(), reg_->uid_base()) != 0)
      co_return ErrnoError("give " + tmp.dir + " to the sandbox range");
    uint64_t bytes = 0;
    auto stack = co_await UnpackLayers(*img, tmp.dir, unpack_log, held, bytes);
    if (!stack.ok()) co_return stack.error().Context("unpack " + canonical);
    fs::remove_all(tmp.dir + "/layout", ec);

    r.hash = hash;
    r.from = kImageTemplatePrefix + canonical;
    r.info.hash = hash;
    r.info.rootfs = stack->front();
    r.info.layers.assign(stack->rbegin(), stack->rend() - 1);  // topmost first
    r.info.env = img->defaults.env;
    // "user:group": the agent takes a user (its group is the user's own).
    r.info.user = img->defaults.user.substr(0, img->defaults.user.find(':'));
    if (r.info.user == "0" || r.info.user == "root") r.info.user.clear();
    r.info.workdir = img->defaults.workdir;
    r.built_at = std::chrono::system_clock::now();
    r.build_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    r.size_bytes = bytes;
    // The image's own start command is kept for clients to read; hutch's
    // agent stays PID 1 and starts nothing a create did not ask for.
    r.spec = {{"image", canonical},
              {"digest", img->manifest_digest},
              {"layers", stack->size()},
              {"entrypoint", img->defaults.entrypoint},
              {"cmd", img->defaults.cmd}};
    const std::string rec_dir = tmp.dir + "/record";
    if (mkdir(rec_dir.c_str(), 0755) != 0) co_return ErrnoError("create " + rec_dir);
    {
      std::ofstream out(rec_dir + "/template.json");
      out << r.ToStoreJson() << "\n";
      out.flush();
      if (!out) co_return MakeError(Code::kStorageFull, "write " + rec_dir + "/template.json");
    }
    if (rename(rec_dir.c_str(), dest.c_str()) != 0) {
      // The same image finished meanwhile under another name: use that one.
      auto found = reg_->FindBuild(hash);
      if (!found.ok()) co_return ErrnoError("rename " + rec_dir + " to " + dest);
      r = *found;
    }
  }
  r.name = kImageTemplatePrefix + canonical;
  r.info.name = r.name;
  r.owner.clear();
  r.info.owner.clear();
  if (auto st = reg_->Register(r); !st.ok()) co_return st.error();
  spdlog::info(
      "image={} pulled digest={} hash={} duration_ms={}", canonical, img->manifest_digest,
      hash.substr(0, 12),
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  co_return r;
}

}  // namespace hutch
