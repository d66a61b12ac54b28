// Debian's docker-registry on 127.0.0.1 for the image tests (issue 31):
// storage in a temp dir, images the test makes itself pushed into it
// (tests/support/oci_test_image.sh), stopped by its PID and removed with
// the object.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hutch::testing {

class LocalRegistry {
 public:
  LocalRegistry();
  ~LocalRegistry();
  LocalRegistry(const LocalRegistry&) = delete;
  LocalRegistry& operator=(const LocalRegistry&) = delete;

  // Whether /v2/ answers 200.
  bool Up() const;
  // Kills the registry (SIGKILL): a registry gone mid-pull.
  void Stop();
  std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }
  // Builds and pushes REPO:TAG with oci_test_image.sh (MARK makes its
  // first layer differ from other marks'); "" on success, else the
  // script's output.
  // With `top`, the image of `mark` pushed before plus a layer adding
  // /etc/top.txt: the two share every layer below it.
  std::string Push(const std::string& ref, const std::string& mark,
                   const std::string& top = "") const;
  // The test image with a first layer `mb` MiB larger (random bytes in
  // /big.bin): a huge image.
  std::string PushBig(const std::string& ref, int mb) const;
  // The registry's file of a blob (hex digest).
  std::string BlobFile(const std::string& digest_hex) const;
  // The hex digests of an image's layers, from its manifest.
  std::vector<std::string> Layers(const std::string& repo, const std::string& tag) const;

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace hutch::testing
