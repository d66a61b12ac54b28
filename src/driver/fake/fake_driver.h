// FakeDriver: a Driver with no namespaces, no cgroups and no root, for
// unit tests of core (tests/core). An instance is an object plus, when the
// driver has a socket dir, a FakeAgent the real AgentConnection talks to.
//
// Tests script failures (the next Create/Adopt fails, an instance's
// Pause/Resume/CaptureLayer/Stats fail, an instance is lost) and read what
// the driver holds: `live()` are the instances created or adopted and not
// yet destroyed or reconciled away, as the kernel would hold them. The
// driver outlives the managers of one test, so a second manager over the
// same store plays a restarted hutchd and adopts what the first left.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "driver/driver.h"
#include "driver/fake/fake_agent.h"

namespace hutch::fake {

class FakeDriver;

// A running fake sandbox. Its scripted failures apply to its next calls.
class FakeInstance : public Instance, public std::enable_shared_from_this<FakeInstance> {
 public:
  FakeInstance(FakeDriver* driver, std::string id, bool paused);
  ~FakeInstance() override;

  std::shared_ptr<AgentConnection> agent() override { return agent_; }
  uint64_t OomKills() override { return 0; }
  Result<InstanceStats> Stats() override;
  Status Pause() override;
  Status Resume() override;
  // Writes one file, `fake-layer`, holding the sandbox id into `dst`.
  asio::awaitable<Status> CaptureLayer(const std::string& dst) override;
  Result<UniqueFd> NetNamespace() override;
  asio::awaitable<void> Destroy() override;
  std::string AdoptionFacts() const override;

  // Reports the sandbox lost (as a driver does when its agent dies).
  void Lose(const std::string& why);

  const std::string& id() const { return id_; }
  bool paused() const { return paused_; }
  bool destroyed() const { return destroyed_; }
  FakeAgent* fake_agent() const { return peer_.get(); }

  std::optional<Error> fail_pause, fail_resume, fail_capture, fail_stats;
  // While set, a CaptureLayer waits before copying (a snapshot in flight).
  bool hold_capture = false;

 private:
  friend class FakeDriver;
  void AttachAgent(std::shared_ptr<FakeAgent> peer, std::shared_ptr<AgentConnection> conn);

  FakeDriver* driver_;
  std::string id_;
  bool paused_ = false;
  bool destroyed_ = false;
  std::shared_ptr<FakeAgent> peer_;
  std::shared_ptr<AgentConnection> agent_;
};

class FakeDriver : public Driver {
 public:
  // `socket_dir`: where the fake agents listen; empty: instances have no
  // agent (agent() is null), enough for paths that run no command.
  explicit FakeDriver(std::string socket_dir, std::string name = "fake");
  ~FakeDriver() override;

  std::string name() const override { return name_; }
  asio::awaitable<Result<std::shared_ptr<Instance>>> Create(const InstanceSpec& spec) override;
  // Takes back an instance this driver still holds (see live()).
  asio::awaitable<Result<std::shared_ptr<Instance>>> Adopt(const InstanceSpec& spec,
                                                           const std::string& facts,
                                                           bool paused) override;
  int ReconcileAtStart(const std::set<std::string>& keep) override;

  // Scripted failures: the next Create / Adopt answers this error (a
  // Create only after `fail_create_skip` more have succeeded).
  std::optional<Error> fail_create;
  int fail_create_skip = 0;
  std::optional<Error> fail_adopt;
  // While set, a Create waits before answering (a create in flight).
  bool hold_creates = false;
  // The behavior of the agents of instances created from now on.
  std::shared_ptr<AgentBehavior> agent_behavior = std::make_shared<AgentBehavior>();

  // Instances the "kernel" holds: created or adopted, not destroyed or
  // reconciled. Keyed by sandbox id.
  const std::set<std::string>& live() const { return live_; }
  // The current object of a live instance (null if none).
  std::shared_ptr<FakeInstance> instance(const std::string& id) const;
  // hutchd's process went away, its sandboxes did not: the objects stop
  // reporting and drop their agent connections; the live set stays for
  // the next run to adopt.
  void DropObjects();
  const InstanceSpec* last_spec() const { return have_spec_ ? &last_spec_ : nullptr; }

  int creates = 0;  // Create calls
  int created = 0;  // Create calls that succeeded
  int adopted = 0;
  int destroyed = 0;   // Destroy calls that destroyed something
  int reconciled = 0;  // removed by ReconcileAtStart
  int starting = 0;    // Create calls in flight

 private:
  friend class FakeInstance;
  void Destroyed(const std::string& id);
  asio::awaitable<Result<std::shared_ptr<FakeInstance>>> Make(const std::string& id, bool paused);

  std::string socket_dir_;
  std::string name_;
  std::set<std::string> live_;
  std::map<std::string, std::weak_ptr<FakeInstance>> objects_;
  InstanceSpec last_spec_;
  bool have_spec_ = false;
};

}  // namespace hutch::fake
