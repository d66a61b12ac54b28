#include "common/secret_box.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "common/base64.h"

namespace hutch {

namespace {

constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}
unsigned char* Bytes(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }

int HexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Error SealError(const char* what) {
  return MakeError(Code::kInternal, std::string("secret box: ") + what);
}

}  // namespace

Result<SecretBox> SecretBox::FromKey(std::string key) {
  if (key.size() != kKeyBytes)
    return MakeError(Code::kInvalidRequest,
                     "secret box key must be " + std::to_string(kKeyBytes) + " bytes");
  return SecretBox(std::move(key));
}

Result<SecretBox> SecretBox::FromHexKey(std::string_view hex) {
  if (hex.size() < 2 * kKeyBytes)
    return MakeError(Code::kInvalidRequest,
                     "secret box key must be " + std::to_string(2 * kKeyBytes) + " hex characters");
  std::string key(kKeyBytes, '\0');
  for (size_t i = 0; i < kKeyBytes; ++i) {
    const int hi = HexNibble(hex[2 * i]), lo = HexNibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return MakeError(Code::kInvalidRequest, "secret box key is not hex");
    key[i] = static_cast<char>(hi * 16 + lo);
  }
  return FromKey(std::move(key));
}

Result<std::string> SecretBox::Seal(std::string_view plain, std::string_view context) const {
  std::string out(kNonceBytes + plain.size() + kTagBytes, '\0');
  if (RAND_bytes(Bytes(out), kNonceBytes) != 1) return SealError("no random nonce");
  CipherCtx c(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int n = 0;
  if (!c || EVP_EncryptInit_ex(c.get(), EVP_aes_256_gcm(), nullptr, Bytes(key_), Bytes(out)) != 1 ||
      EVP_EncryptUpdate(c.get(), nullptr, &n, Bytes(context), static_cast<int>(context.size())) !=
          1 ||
      EVP_EncryptUpdate(c.get(), Bytes(out) + kNonceBytes, &n, Bytes(plain),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(c.get(), Bytes(out) + kNonceBytes + n, &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                          Bytes(out) + kNonceBytes + plain.size()) != 1)
    return SealError("encryption failed");
  return Base64Encode(out);
}

Result<std::string> SecretBox::Open(std::string_view sealed, std::string_view context) const {
  std::string raw;
  if (!Base64Decode(sealed, &raw) || raw.size() < kNonceBytes + kTagBytes)
    return SealError("sealed value is malformed");
  const size_t len = raw.size() - kNonceBytes - kTagBytes;
  std::string plain(len, '\0');
  CipherCtx c(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int n = 0;
  if (!c || EVP_DecryptInit_ex(c.get(), EVP_aes_256_gcm(), nullptr, Bytes(key_), Bytes(raw)) != 1 ||
      EVP_DecryptUpdate(c.get(), nullptr, &n, Bytes(context), static_cast<int>(context.size())) !=
          1 ||
      EVP_DecryptUpdate(c.get(), Bytes(plain), &n, Bytes(raw) + kNonceBytes,
                        static_cast<int>(len)) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                          Bytes(raw) + kNonceBytes + len) != 1 ||
      EVP_DecryptFinal_ex(c.get(), Bytes(plain) + n, &n) != 1)
    return SealError("sealed value does not open under this key (altered, or another key)");
  return plain;
}

}  // namespace hutch
