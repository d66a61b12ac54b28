#include "core/vault_book.h"

#include <spdlog/spdlog.h>

namespace hutch {

namespace {

// What a sealed value is bound to: moved to another sandbox's row or
// renamed, it no longer opens.
std::string SealContext(const std::string& id, const std::string& name) {
  return "hutch-vault/" + id + "/" + name;
}

Error NotFound(const std::string& id, const std::string& what) {
  return MakeError(Code::kNotFound, "sandbox " + id + " has no " + what);
}

}  // namespace

Result<std::string> VaultBook::ToStoreJson(const std::string& id, const vault::Vault& v) const {
  nlohmann::json creds = nlohmann::json::array(), binds = nlohmann::json::array();
  for (const auto& [name, c] : v.credentials) {
    auto sealed = box_.Seal(c.value, SealContext(id, name));
    if (!sealed.ok()) return sealed.error().Context("credential " + name);
    creds.push_back({{"name", name}, {"sealed", *sealed}});
  }
  for (const auto& [name, b] : v.bindings) binds.push_back(vault::BindingToJson(b));
  return nlohmann::json{{"credentials", creds}, {"bindings", binds}, {"revision", v.revision}}
      .dump();
}

Result<vault::Vault> VaultBook::FromStoreJson(const std::string& id,
                                              const std::string& text) const {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return MakeError(Code::kInternal, "vault row is not a JSON object");
  vault::Vault v;
  v.revision = j.value("revision", int64_t{0});
  for (const auto& c : j.value("credentials", nlohmann::json::array())) {
    const std::string name = c.value("name", "");
    auto plain = box_.Open(c.value("sealed", ""), SealContext(id, name));
    if (!plain.ok()) return plain.error().Context("credential " + name);
    v.credentials[name] = vault::Credential{name, std::move(plain).value()};
  }
  for (const auto& bj : j.value("bindings", nlohmann::json::array())) {
    auto b = vault::ParseBinding(bj);
    if (!b.ok()) return b.error();
    const std::string name = b->name;
    v.bindings[name] = std::move(b).value();
  }
  return v;
}

Result<int> VaultBook::Load(const std::function<bool(const std::string&)>& live) {
  if (!store_) return 0;
  auto rows = store_->LoadVaults();
  if (!rows.ok()) return rows.error();
  int loaded = 0;
  for (const auto& [id, text] : *rows) {
    if (!live(id)) {
      if (auto st = store_->DeleteVault(id); !st.ok()) return st.error();
      continue;
    }
    auto v = FromStoreJson(id, text);
    if (!v.ok()) {
      // A vault that does not open (the key file replaced) stays stored but
      // unused: injection stops, the sandbox keeps running, and the
      // operator sees why.
      spdlog::error("sandbox={} vault_unreadable err=\"{}\"", id, v.error().message);
      continue;
    }
    vaults_[id] = std::move(v).value();
    ++loaded;
  }
  return loaded;
}

const vault::Vault* VaultBook::Find(const std::string& id) const {
  auto it = vaults_.find(id);
  return it == vaults_.end() ? nullptr : &it->second;
}

nlohmann::json VaultBook::View(const std::string& id) const {
  const vault::Vault* v = Find(id);
  return v ? v->ToViewJson() : vault::Vault{}.ToViewJson();
}

Status VaultBook::Commit(const std::string& id, vault::Vault v) {
  const vault::Vault* old = Find(id);
  v.revision = (old ? old->revision : 0) + 1;
  if (store_) {
    if (v.empty()) {
      if (auto st = store_->DeleteVault(id); !st.ok()) return st;
    } else {
      auto text = ToStoreJson(id, v);
      if (!text.ok()) return text.error();
      if (auto st = store_->PutVault(id, *text); !st.ok()) return st;
    }
  }
  if (v.empty()) vaults_.erase(id);
  else vaults_[id] = std::move(v);
  if (on_change_) on_change_(id);
  return Status{};
}

Status VaultBook::Replace(const std::string& id, vault::Vault v) {
  for (const auto& [name, b] : v.bindings)
    if (auto st = vault::CheckBindingCredential(v, b); !st.ok()) return st;
  return Commit(id, std::move(v));
}

Status VaultBook::PutCredential(const std::string& id, vault::Credential c) {
  vault::Vault v = vaults_.count(id) ? vaults_[id] : vault::Vault{};
  const std::string name = c.name;
  v.credentials[name] = std::move(c);
  return Commit(id, std::move(v));
}

Status VaultBook::DeleteCredential(const std::string& id, const std::string& name) {
  auto it = vaults_.find(id);
  if (it == vaults_.end() || !it->second.credentials.count(name))
    return NotFound(id, "credential " + name);
  for (const auto& [bname, b] : it->second.bindings)
    if (b.auth.credential == name)
      return MakeError(Code::kConflict,
                       "credential " + name + " is used by binding " + bname + ": delete it first");
  vault::Vault v = it->second;
  v.credentials.erase(name);
  return Commit(id, std::move(v));
}

Status VaultBook::PutBinding(const std::string& id, vault::Binding b) {
  vault::Vault v = vaults_.count(id) ? vaults_[id] : vault::Vault{};
  if (auto st = vault::CheckBindingCredential(v, b); !st.ok()) return st;
  const std::string name = b.name;
  v.bindings[name] = std::move(b);
  return Commit(id, std::move(v));
}

Status VaultBook::DeleteBinding(const std::string& id, const std::string& name) {
  auto it = vaults_.find(id);
  if (it == vaults_.end() || !it->second.bindings.count(name))
    return NotFound(id, "binding " + name);
  vault::Vault v = it->second;
  v.bindings.erase(name);
  return Commit(id, std::move(v));
}

void VaultBook::Forget(const std::string& id) {
  if (vaults_.erase(id) && on_change_) on_change_(id);
  if (!store_) return;
  if (auto st = store_->DeleteVault(id); !st.ok())
    spdlog::error("sandbox={} vault_forget_failed err=\"{}\"", id, st.error().message);
}

}  // namespace hutch
