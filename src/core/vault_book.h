// VaultBook: every sandbox's credential vault (core/vault.h), in memory
// for the egress proxy and sealed in the state store.
//
// A row of the store's `vaults` table holds a vault's bindings as they are
// and each credential's value sealed by the SecretBox (AES-256-GCM under
// the key of <state>/vault.key, bound to the sandbox and credential name),
// so state.db never holds a secret in plain bytes. Every change is stored
// before it is applied in memory, so an acknowledged change survives a
// restart and a failed write changes nothing. A sandbox's vault goes with
// it (SandboxManager calls Forget when it forgets the sandbox), and from
// that moment no request is matched against it.
// Runs on the I/O thread only.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "common/secret_box.h"
#include "core/vault.h"
#include "store/state_store.h"

namespace hutch {

class VaultBook {
 public:
  // `store` may be null (nothing persists).
  VaultBook(SecretBox box, store::StateStore* store, vault::HostSources sources = {})
      : box_(std::move(box)), store_(store), sources_(std::move(sources)) {}

  // At start, after the sandboxes are recovered: loads the vaults of the
  // sandboxes `live` says exist and deletes the rows of every other one (a
  // crash between a sandbox's delete and its vault's). Returns how many
  // loaded.
  Result<int> Load(const std::function<bool(const std::string&)>& live);

  // The sandbox's vault, or null when it has none (no credential and no
  // binding): the egress proxy's lookup.
  const vault::Vault* Find(const std::string& id) const;
  // Names and bindings (empty lists when it has none).
  nlohmann::json View(const std::string& id) const;

  Status Replace(const std::string& id, vault::Vault v);
  Status PutCredential(const std::string& id, vault::Credential c);
  // conflict while a binding uses it.
  Status DeleteCredential(const std::string& id, const std::string& name);
  // invalid_request when it names no credential of the vault.
  Status PutBinding(const std::string& id, vault::Binding b);
  Status DeleteBinding(const std::string& id, const std::string& name);
  // The sandbox is gone: its vault too, at once.
  void Forget(const std::string& id);

  // Called after each change of a sandbox's vault (and its Forget), with
  // the sandbox id: the egress proxy arms or disarms its interception.
  void SetOnChange(std::function<void(const std::string&)> f) { on_change_ = std::move(f); }

  const vault::HostSources& sources() const { return sources_; }
  size_t size() const { return vaults_.size(); }

 private:
  // Stores `v` (or deletes the row when it is empty), then keeps it.
  Status Commit(const std::string& id, vault::Vault v);
  Result<std::string> ToStoreJson(const std::string& id, const vault::Vault& v) const;
  Result<vault::Vault> FromStoreJson(const std::string& id, const std::string& text) const;

  SecretBox box_;
  store::StateStore* store_;
  vault::HostSources sources_;
  std::map<std::string, vault::Vault> vaults_;
  std::function<void(const std::string&)> on_change_;
};

}  // namespace hutch
