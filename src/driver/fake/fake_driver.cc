#include "driver/fake/fake_driver.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace hutch::fake {

FakeInstance::FakeInstance(FakeDriver* driver, std::string id, bool paused)
    : driver_(driver), id_(std::move(id)), paused_(paused) {}

FakeInstance::~FakeInstance() {
  // The object goes, the sandbox may stay (live in the driver, adoptable):
  // its agent connection goes with the object, as hutchd's would.
  if (agent_) {
    agent_->on_lost = nullptr;
    agent_->Close();
  }
  if (peer_) peer_->Kill();
}

void FakeInstance::AttachAgent(std::shared_ptr<FakeAgent> peer,
                               std::shared_ptr<AgentConnection> conn) {
  peer_ = std::move(peer);
  agent_ = std::move(conn);
  // The agent's connection breaking is the sandbox's loss, as in the jail.
  std::weak_ptr<FakeInstance> weak = shared_from_this();
  agent_->on_lost = [weak](const std::string& why) {
    if (auto i = weak.lock()) i->Lose(why);
  };
}

Result<InstanceStats> FakeInstance::Stats() {
  if (fail_stats) return *fail_stats;
  InstanceStats s;
  s.pids_current = 1;
  return s;
}

Status FakeInstance::Pause() {
  if (fail_pause) return *fail_pause;
  paused_ = true;
  return Status{};
}

Status FakeInstance::Resume() {
  if (fail_resume) return *fail_resume;
  paused_ = false;
  return Status{};
}

asio::awaitable<Status> FakeInstance::CaptureLayer(const std::string& dst) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (hold_capture) {
    t.expires_after(std::chrono::milliseconds(2));
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (fail_capture) co_return *fail_capture;
  std::ofstream(dst + "/fake-layer") << id_;
  co_return Status{};
}

Result<UniqueFd> FakeInstance::NetNamespace() {
  return MakeError(Code::kNotSupported, "a fake sandbox has no network namespace");
}

asio::awaitable<void> FakeInstance::Destroy() {
  if (destroyed_) co_return;
  destroyed_ = true;
  on_lost = nullptr;
  if (agent_) {
    agent_->on_lost = nullptr;
    agent_->Close();
  }
  if (peer_) peer_->Kill();
  driver_->Destroyed(id_);
}

std::string FakeInstance::AdoptionFacts() const { return nlohmann::json{{"fake", id_}}.dump(); }

void FakeInstance::Lose(const std::string& why) {
  if (destroyed_ || !on_lost) return;
  auto cb = std::move(on_lost);
  on_lost = nullptr;
  cb(why);
}

FakeDriver::FakeDriver(std::string socket_dir, std::string name)
    : socket_dir_(std::move(socket_dir)), name_(std::move(name)) {}

FakeDriver::~FakeDriver() {
  for (auto& [id, w] : objects_)
    if (auto i = w.lock()) i->driver_ = nullptr;
}

void FakeDriver::DropObjects() {
  for (auto& [id, w] : objects_) {
    auto i = w.lock();
    if (!i) continue;
    i->on_lost = nullptr;
    if (i->agent_) {
      i->agent_->on_lost = nullptr;
      i->agent_->Close();
    }
    if (i->peer_) i->peer_->Kill();
  }
  objects_.clear();
}

std::shared_ptr<FakeInstance> FakeDriver::instance(const std::string& id) const {
  auto it = objects_.find(id);
  return it == objects_.end() ? nullptr : it->second.lock();
}

void FakeDriver::Destroyed(const std::string& id) {
  if (live_.erase(id)) ++destroyed;
}

asio::awaitable<Result<std::shared_ptr<FakeInstance>>> FakeDriver::Make(const std::string& id,
                                                                        bool paused) {
  auto inst = std::make_shared<FakeInstance>(this, id, paused);
  if (!socket_dir_.empty()) {
    auto ex = co_await asio::this_coro::executor;
    auto peer = FakeAgent::Listen(ex, socket_dir_ + "/" + id + ".sock", agent_behavior);
    if (!peer.ok()) co_return peer.error();
    // A paused agent says hello once thawed: read it later, like the jail.
    auto conn =
        co_await AgentConnection::Connect((*peer)->socket_path(), std::chrono::seconds(5), !paused);
    if (!conn.ok()) co_return conn.error().Context("fake agent");
    inst->AttachAgent(*peer, *conn);
  }
  objects_[id] = inst;
  live_.insert(id);
  co_return inst;
}

asio::awaitable<Result<std::shared_ptr<Instance>>> FakeDriver::Create(const InstanceSpec& spec) {
  ++creates;
  last_spec_ = spec;
  have_spec_ = true;
  ++starting;
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (hold_creates) {
    t.expires_after(std::chrono::milliseconds(2));
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  --starting;
  if (fail_create && fail_create_skip > 0) {
    --fail_create_skip;
  } else if (fail_create) {
    Error e = *std::exchange(fail_create, std::nullopt);
    co_return e;
  }
  auto inst = co_await Make(spec.id, false);
  if (!inst.ok()) co_return inst.error();
  ++created;
  co_return std::shared_ptr<Instance>(*inst);
}

asio::awaitable<Result<std::shared_ptr<Instance>>> FakeDriver::Adopt(const InstanceSpec& spec,
                                                                     const std::string& facts,
                                                                     bool paused) {
  if (fail_adopt) {
    Error e = *std::exchange(fail_adopt, std::nullopt);
    co_return e;
  }
  auto j = nlohmann::json::parse(facts, nullptr, false);
  if (!j.is_object() || j.value("fake", std::string()) != spec.id)
    co_return MakeError(Code::kInternal, "fake adopt: facts do not name " + spec.id);
  if (!live_.count(spec.id))
    co_return MakeError(Code::kUnavailable, "fake adopt: " + spec.id + " is gone");
  auto inst = co_await Make(spec.id, paused);
  if (!inst.ok()) co_return inst.error();
  ++adopted;
  co_return std::shared_ptr<Instance>(*inst);
}

int FakeDriver::ReconcileAtStart(const std::set<std::string>& keep) {
  int n = 0;
  for (auto it = live_.begin(); it != live_.end();) {
    if (keep.count(*it)) {
      ++it;
      continue;
    }
    objects_.erase(*it);
    it = live_.erase(it);
    ++n;
  }
  reconciled += n;
  return n;
}

}  // namespace hutch::fake
