#include "common/sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace hutch {

namespace {

std::string Hex(const unsigned char* md, unsigned int len) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // EVP_Digest with SHA-256 cannot fail for in-memory input short of
  // allocation failure; an empty result then never matches a stored hash.
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
    return std::string();
  return Hex(md, len);
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len) == nullptr)
    return std::string();
  return Hex(md, len);
}

}  // namespace hutch
