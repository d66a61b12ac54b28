// kIdentify (docs/wire.md "Identify"): a vm guest restored from a boot
// snapshot, or forked from a running VM, is byte for byte another
// machine's memory. Before the host hands it out it becomes its own: the
// sandbox's hostname, the host's wall clock (the copy's clock stood still
// while the state lay on disk), and fresh kernel randomness — the host's
// bytes are mixed into the input pool and the CRNG is reseeded at once, so
// two copies read different /dev/urandom bytes from the first read on
// (without the reseed the kernel would keep the copied CRNG key for up to
// a minute). Last, a new /etc/machine-id from that fresh randomness:
// software keys state on it, and a copy must not pass for its origin.
#include <fcntl.h>
#include <linux/random.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "agent/agent.h"

namespace hutch::agent {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool DecodeHex(const std::string& hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexValue(hex[i]), lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

// Mixes `bytes` into the kernel's input pool, credited as entropy, then
// makes the CRNG take a new key from it now.
Status Reseed(const std::string& bytes) {
  UniqueFd fd(open("/dev/urandom", O_WRONLY | O_CLOEXEC));
  if (!fd) return ErrnoError("open /dev/urandom");
  const size_t words = (bytes.size() + 3) / 4;
  std::vector<int> buf(2 + words, 0);
  auto* info = reinterpret_cast<rand_pool_info*>(buf.data());
  info->entropy_count = static_cast<int>(bytes.size() * 8);
  info->buf_size = static_cast<int>(bytes.size());
  std::memcpy(info->buf, bytes.data(), bytes.size());
  if (ioctl(fd.get(), RNDADDENTROPY, info) != 0) return ErrnoError("RNDADDENTROPY");
  if (ioctl(fd.get(), RNDRESEEDCRNG) != 0) return ErrnoError("RNDRESEEDCRNG");
  return Status{};
}

// A new random machine-id (32 lowercase hex digits), replaced atomically.
Status NewMachineId() {
  unsigned char id[16];
  if (getrandom(id, sizeof(id), 0) != static_cast<ssize_t>(sizeof(id)))
    return ErrnoError("getrandom");
  static const char* kHex = "0123456789abcdef";
  std::string text;
  for (unsigned char b : id) {
    text.push_back(kHex[b >> 4]);
    text.push_back(kHex[b & 15]);
  }
  text.push_back('\n');
  const char* tmp = "/etc/.machine-id.hutch";
  UniqueFd fd(open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444));
  if (!fd) return ErrnoError("open /etc/machine-id");
  if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    unlink(tmp);
    return ErrnoError("write /etc/machine-id");
  }
  fd.reset();
  if (rename(tmp, "/etc/machine-id") != 0) {
    unlink(tmp);
    return ErrnoError("rename /etc/machine-id");
  }
  return Status{};
}

}  // namespace

void Agent::Identify(Connection& c, const wire::Frame& f) {
  const uint32_t s = f.stream;
  nlohmann::json j = nlohmann::json::parse(f.payload, nullptr, false);
  if (!j.is_object()) return SendError(c, s, "invalid_request", 0, "identify: not a JSON object");
  const std::string hostname = j.value("hostname", "");
  const int64_t realtime_ns = j.value("realtime_ns", int64_t{0});
  std::string entropy;
  if (!DecodeHex(j.value("entropy", ""), &entropy) || entropy.size() > 512)
    return SendError(c, s, "invalid_request", 0,
                     "identify: entropy must be at most 512 bytes of hex");
  nlohmann::json out = {{"hostname", hostname},
                        {"clock_set", false},
                        {"entropy_bytes", entropy.size()},
                        {"reseeded", false}};
  if (!hostname.empty() && sethostname(hostname.data(), hostname.size()) != 0)
    return SendError(c, s, "internal", errno, "identify: sethostname");
  if (realtime_ns > 0) {
    timespec ts{static_cast<time_t>(realtime_ns / 1000000000),
                static_cast<long>(realtime_ns % 1000000000)};
    if (clock_settime(CLOCK_REALTIME, &ts) != 0)
      return SendError(c, s, "internal", errno, "identify: clock_settime");
    out["clock_set"] = true;
  }
  if (!entropy.empty()) {
    if (auto st = Reseed(entropy); !st.ok()) return SendError(c, s, st.error());
    out["reseeded"] = true;
  }
  if (auto st = NewMachineId(); !st.ok()) return SendError(c, s, st.error().Context("identify"));
  out["machine_id"] = true;
  SendJson(c, wire::Type::kIdentifyResult, s, out);
}

}  // namespace hutch::agent
