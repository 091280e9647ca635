// A handler runner without a Bus: a real database and committer
// (StorageHarness), a scope host for the handlers' contexts, and helpers
// to make subscribers and events. For the tests of the runner and of the
// worker pool.
#ifndef WALBUS_TESTS_DISPATCH_RUNNER_HARNESS_H_
#define WALBUS_TESTS_DISPATCH_RUNNER_HARNESS_H_

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bus/core/call_gate.h"
#include "bus/core/schema_registry.h"
#include "bus/core/scope.h"
#include "bus/core/state_reader.h"
#include "bus/core/timeline.h"
#include "bus/dispatch/handler_runner.h"
#include "tests/storage_harness.h"
#include "walbus/bus.h"

namespace walbus::testing {

// The runner alone, without a Bus: storage, a committer and a scope host
// are all it needs, and its answers are what the dispatcher would get.
class RunnerHarness final : public internal::ScopeHost {
 public:
  // `send` takes the runner's replies; by default they are kept for
  // Run() (one thread at a time).
  explicit RunnerHarness(const std::string& dir, internal::HandlerRunner::ReplySink send = {})
      : storage_(dir, {"state"}) {
    options_.clock = Clock::System();
    if (!storage_.opened().ok()) return;
    apps_ = internal::AppColumnFamilies(*storage_.db(), {"state"});
    timeline_ = std::make_unique<internal::Timeline>(options_.clock.get(), internal::Timeline::State{});
    runner_ = std::make_unique<internal::HandlerRunner>(
        this, storage_.db(), storage_.committer(),
        internal::HandlerRunnerConfig{options_.clock.get(), &schemas_, &log_, /*sync_follow_ups=*/false},
        send ? std::move(send) : [this](std::vector<internal::Message>& replies) {
          for (auto& m : replies) replies_.push_back(std::move(m));
        });
  }

  const Status& opened() const { return storage_.opened(); }
  storage::Db& db() { return *storage_.db(); }
  internal::HandlerRunner& runner() { return *runner_; }

  // A subscriber that recovered nothing: its first run, after a clean stop.
  std::unique_ptr<internal::Subscriber> NewSubscriber(Handler handler, uint32_t max_attempts = 3) {
    SubscriberOptions o;
    o.name = "runner";
    o.handler = std::move(handler);
    o.retry.max_attempts = max_attempts;
    o.retry.base = std::chrono::milliseconds(1);
    o.retry.cap = std::chrono::milliseconds(2);
    internal::DurableCounters durable;
    durable.stopped_cleanly = true;
    return std::make_unique<internal::Subscriber>(std::move(o), 7, durable);
  }

  static std::shared_ptr<const Event> MakeEvent(uint64_t seq, std::string data) {
    auto event = std::make_shared<Event>();
    event->id = EventId::Generate();
    event->seq = seq;
    event->type = "orders.order-approved.v1";
    event->subject = "order-1";
    event->data = std::move(data);
    return event;
  }

  // Runs one item of `sub` for `event`; returns its replies. REQUIRES: the
  // default reply sink.
  std::vector<internal::Message> Run(internal::Subscriber* sub, std::shared_ptr<const Event> event,
                                     uint32_t attempt = 1, bool check_stored = false) {
    internal::WorkItem item;
    item.sub = sub;
    item.event = std::move(event);
    item.history.runs = attempt - 1;
    item.history.check_stored = check_stored;
    items_.push_back(std::move(item));
    replies_.clear();
    runner_->RunBatch(std::span<internal::WorkItem>(&items_.back(), 1));
    return std::move(replies_);
  }

  std::optional<std::string> Read(storage::Cf cf, const std::string& key) { return storage_.Read(cf, key); }
  std::optional<std::string> ReadState(const std::string& key) { return storage_.Read(*apps_.Find("state"), key); }

  // ScopeHost
  internal::CallGate& gate() override { return gate_; }
  storage::Db* db() const override { return storage_.db(); }
  const Options& options() const override { return options_; }
  const internal::SchemaRegistry& schemas() const override { return schemas_; }
  const internal::AppColumnFamilies& app_column_families() const override { return apps_; }
  internal::Timeline& timeline() override { return *timeline_; }
  Result<Receipt> CommitTransaction(internal::ScopeRep*, bool) override {
    return Status::InvalidArgument("the runner's harness commits no transactions");
  }

 private:
  testing::StorageHarness storage_;
  Options options_;
  internal::AppColumnFamilies apps_;
  internal::SchemaRegistry schemas_;
  internal::BusLog log_{nullptr, false};
  internal::CallGate gate_;
  std::unique_ptr<internal::Timeline> timeline_;
  std::unique_ptr<internal::HandlerRunner> runner_;
  std::deque<internal::WorkItem> items_;  // replies point into them
  std::vector<internal::Message> replies_;
};

}  // namespace walbus::testing

#endif  // WALBUS_TESTS_DISPATCH_RUNNER_HARNESS_H_
