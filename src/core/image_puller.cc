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

// Bumped when what an image's build dir holds changes.
constexpr int kImageLayout = 1;
// The bytes of a failed tool's output kept for its error.
constexpr size_t kTailBytes = 2048;
constexpr const char* kPolicy = "/etc/containers/policy.json";

// A tool's output as "log" events, line by line, and its last bytes.
class ToolLog {
 public:
  ToolLog(const ImagePullSink& sink, std::string step) : sink_(sink), step_(std::move(step)) {}
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

}  // namespace

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
  ToolLog pull_log(sink, "pull");
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

  // One build dir per image (manifest digest): another name of the same
  // image, pulled before, is registered at once.
  const json key = {{"oci_image", img->manifest_digest},
                    {"uid_base", reg_->uid_base()},
                    {"layout", kImageLayout}};
  const std::string hash = Sha256Hex(key.dump());
  const std::string dest = reg_->BuildDir(hash);
  TemplateRecord r;
  if (auto found = reg_->FindBuild(hash); found.ok()) {
    r = *found;
  } else {
    // 2. umoci: layers in order, whiteouts applied, as root of a user
    // namespace on the sandbox range (the tree is the sandbox's).
    co_await Announce(sink, 2, "unpack", img->manifest_digest);
    ToolLog unpack_log(sink, "unpack");
    if (chown(tmp.dir.c_str(), reg_->uid_base(), reg_->uid_base()) != 0)
      co_return ErrnoError("give " + tmp.dir + " to the sandbox range");
    const std::string work = kToolWorkdir;
    std::vector<std::string> argv = {
        o_.umoci, "raw", "unpack", "--image", work + "/layout:image", work + "/rootfs"};
    std::vector<std::string> uenv = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"};
    const ToolUserNamespace userns{reg_->uid_base(), 65536, tmp.dir};
    std::function<asio::awaitable<void>(std::string_view)> on_unpack =
        [&unpack_log](std::string_view d) -> asio::awaitable<void> { co_await unpack_log.Feed(d); };
    auto urc = co_await RunToolStreaming(argv, uenv, o_.timeout, on_unpack, &userns);
    if (!urc.ok()) co_return urc.error().Context("unpack " + canonical);
    if (*urc != 0)
      co_return MakeError(kImagePullFailed, "unpack " + canonical + ": umoci exited with " +
                                                std::to_string(*urc) + ": " + unpack_log.Tail());
    fs::remove_all(tmp.dir + "/layout", ec);
    const std::string rootfs = tmp.dir + "/rootfs";
    // No setuid bits, no device nodes; owners stay in the sandbox range.
    if (auto st = ShiftRootOwners(rootfs, reg_->uid_base()); !st.ok()) co_return st.error();
    if (auto st = AddMountPoints(rootfs, reg_->uid_base()); !st.ok()) co_return st.error();
    chown(tmp.dir.c_str(), 0, 0);
    chmod(tmp.dir.c_str(), 0755);

    r.hash = hash;
    r.from = kImageTemplatePrefix + canonical;
    r.info.hash = hash;
    r.info.rootfs = dest + "/rootfs";
    r.info.env = img->defaults.env;
    // "user:group": the agent takes a user (its group is the user's own).
    r.info.user = img->defaults.user.substr(0, img->defaults.user.find(':'));
    if (r.info.user == "0" || r.info.user == "root") r.info.user.clear();
    r.info.workdir = img->defaults.workdir;
    r.built_at = std::chrono::system_clock::now();
    r.build_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    r.size_bytes = TreeBytes(rootfs);
    // The image's own start command is kept for clients to read; hutch's
    // agent stays PID 1 and starts nothing a create did not ask for.
    r.spec = {{"image", canonical},
              {"digest", img->manifest_digest},
              {"entrypoint", img->defaults.entrypoint},
              {"cmd", img->defaults.cmd}};
    {
      std::ofstream out(tmp.dir + "/template.json");
      out << r.ToStoreJson() << "\n";
      out.flush();
      if (!out) co_return MakeError(Code::kStorageFull, "write " + tmp.dir + "/template.json");
    }
    if (rename(tmp.dir.c_str(), dest.c_str()) == 0) {
      tmp.keep = true;
    } else {
      // The same image finished meanwhile under another name: use that one.
      auto found = reg_->FindBuild(hash);
      if (!found.ok()) co_return ErrnoError("rename " + tmp.dir + " to " + dest);
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
