// SecretBox: authenticated encryption of small secrets at rest (the
// credential vault's values, core/vault_book.h) with AES-256-GCM.
//
// The key is never in the database it protects: hutchd reads it from its
// own 0600 file in the state dir, so a copy of state.db (a backup, a
// debugging dump, a bug report) holds only ciphertext. Each sealed value
// carries its own random 96-bit nonce and is bound to `context` (the
// sandbox and credential it belongs to) as associated data, so a sealed
// value copied into another row does not open there.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace hutch {

class SecretBox {
 public:
  static constexpr size_t kKeyBytes = 32;

  // `key`: kKeyBytes raw bytes.
  static Result<SecretBox> FromKey(std::string key);
  // The key from 64 hex characters (the form of a 0600 secret file).
  static Result<SecretBox> FromHexKey(std::string_view hex);

  // nonce || ciphertext || tag, as base64 (text for a JSON row).
  Result<std::string> Seal(std::string_view plain, std::string_view context) const;
  // Fails (without saying more: the text may be anything) when the value
  // was not sealed under this key and context or was altered.
  Result<std::string> Open(std::string_view sealed, std::string_view context) const;

 private:
  explicit SecretBox(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace hutch
