// bus/process/: process managers. An instance per key, one step at a time;
// state, effects, events and timeouts commit with the step or not at all;
// a timeout and the step that cancels or replaces it never both take
// effect; instances and their timeouts survive restarts; events for no
// instance follow the definition's policy.
#include "walbus/process.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/payload_json.h"
#include "tests/test_util.h"
#include "walbus/bus.h"
#include "walbus/testing.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;

constexpr const char* kReceived = "field.order-received.v1";
constexpr const char* kAccepted = "field.order-accepted.v1";
constexpr const char* kEscalated = "field.order-escalated.v1";
constexpr const char* kProcessName = "dispatch";
constexpr const char* kSubscriber = "process.dispatch";

EventSpec Fact(const char* type, std::string subject, std::string data = "{}") {
  return EventSpec{.type = type, .subject = std::move(subject), .data = std::move(data)};
}

// A technician must accept a received order within 15 minutes, or it is
// escalated; acceptance records the order in "orders".
ProcessDefinition Dispatch() {
  ProcessDefinition d;
  d.name = kProcessName;
  d.steps = {ProcessStep{.type = kReceived, .starts = true, .correlate = {}},
             ProcessStep{.type = kAccepted, .starts = false, .correlate = {}}};
  d.handler = [](const Event& e, ProcessContext& p) {
    if (p.IsNew()) {
      if (!p.SetState("waiting").ok() || !p.SetTimeout("accept", 15min).ok()) return Outcome::RetryAfter(0ms);
      return Outcome::Done();
    }
    if (p.FiredTimeout() == "accept") {
      if (!p.Scope().Publish(Fact(kEscalated, p.Key())).ok()) return Outcome::RetryAfter(0ms);
      p.Complete();
      return Outcome::Done();
    }
    if (e.type == kAccepted) {
      if (!p.CancelTimeout("accept").ok() || !p.Scope().Put("orders", p.Key(), "accepted").ok()) {
        return Outcome::RetryAfter(0ms);
      }
      p.Complete();
    }
    return Outcome::Done();
  };
  return d;
}

std::shared_ptr<Process> Defined(ProcessDefinition d) {
  auto process = Process::Define(std::move(d));
  EXPECT_TRUE(process.ok()) << process.status().ToString();
  return process.ok() ? *process : nullptr;
}

// A test bus running `process`; null (the test failed) when it cannot be had.
std::unique_ptr<testing::TestBus> Running(const std::shared_ptr<Process>& process) {
  Options options;
  options.column_families = {"orders"};
  std::unique_ptr<testing::TestBus> t;
  if (process == nullptr || !testing::TestBus::Open(options, &t).ok() || !t->Subscribe(process->subscriber()).ok() ||
      !t->RunUntilIdle().ok()) {
    ADD_FAILURE() << "the test bus did not start";
    return nullptr;
  }
  return t;
}

std::optional<ProcessInstance> Instance(Bus& bus, const std::string& key) {
  auto read = ReadProcessInstance(bus, kProcessName, key);
  EXPECT_TRUE(read.ok()) << read.status().ToString();
  return read.ok() ? *read : std::nullopt;
}

std::optional<std::string> Order(Bus& bus, const std::string& key) {
  Transaction tx = bus.Begin();
  auto v = tx.Get("orders", key);
  EXPECT_TRUE(v.ok());
  return v.ok() ? *v : std::nullopt;
}

uint64_t PendingTimers(Bus& bus) { return bus.Stats().scheduled_pending; }

ProcessStats Stats(Bus& bus) {
  auto stats = ReadProcessStats(bus, kProcessName);
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return stats.ok() ? *stats : ProcessStats{};
}

TEST(ProcessTest, AnOrderAcceptedInTimeCompletesAndItsTimeoutNeverFires) {
  auto process = Defined(Dispatch());
  auto t = Running(process);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-1")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  auto running = Instance(t->bus(), "order-1");
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(running->state, "waiting");
  EXPECT_EQ(running->definition_version, 1u);
  ASSERT_EQ(running->timeouts.size(), 1u);
  EXPECT_EQ(running->timeouts[0].name, "accept");
  EXPECT_EQ(running->timeouts[0].due, t->clock().WallNow() + 15min);
  ASSERT_TRUE(t->AdvanceTime(10min).ok());
  ASSERT_TRUE(t->Publish({Fact(kAccepted, "order-1")}).ok());
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  EXPECT_TRUE(t->Published(kEscalated).empty());
  EXPECT_EQ(Order(t->bus(), "order-1"), "accepted");
  EXPECT_EQ(Instance(t->bus(), "order-1"), std::nullopt) << "a completed instance leaves no state";
  EXPECT_EQ(PendingTimers(t->bus()), 0u);
  const ProcessStats stats = Stats(t->bus());
  EXPECT_EQ(stats.started, 1u);
  EXPECT_EQ(stats.completed, 1u);
  EXPECT_EQ(stats.running, 0u);
}

TEST(ProcessTest, AnOrderNotAcceptedInTimeIsEscalatedOnce) {
  auto process = Defined(Dispatch());
  auto t = Running(process);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-2")}).ok());
  ASSERT_TRUE(t->AdvanceTime(15min - 1ms).ok());
  EXPECT_TRUE(t->Published(kEscalated).empty());
  ASSERT_TRUE(t->AdvanceTime(1ms).ok());
  ASSERT_EQ(t->Published(kEscalated).size(), 1u);
  EXPECT_EQ(t->Published(kEscalated)[0].subject, "order-2");
  EXPECT_EQ(Instance(t->bus(), "order-2"), std::nullopt);
  // Too late: the instance completed, so the acceptance finds none.
  ASSERT_TRUE(t->Publish({Fact(kAccepted, "order-2")}).ok());
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  EXPECT_EQ(Order(t->bus(), "order-2"), std::nullopt);
  EXPECT_EQ(t->Published(kEscalated).size(), 1u);
  EXPECT_EQ(Stats(t->bus()).unmatched, 1u);
}

TEST(ProcessTest, SettingATimeoutAgainReplacesIt) {
  ProcessDefinition d = Dispatch();
  // Each reminder re-arms the timeout for 15 minutes from now.
  d.steps.push_back(ProcessStep{.type = "field.order-reminded.v1", .starts = false, .correlate = {}});
  ProcessHandler base = d.handler;
  d.handler = [base](const Event& e, ProcessContext& p) {
    if (e.type != "field.order-reminded.v1") return base(e, p);
    return p.SetTimeout("accept", 15min, "reminded").ok() ? Outcome::Done() : Outcome::RetryAfter(0ms);
  };
  auto process = Defined(std::move(d));
  auto t = Running(process);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-3")}).ok());
  ASSERT_TRUE(t->AdvanceTime(10min).ok());
  ASSERT_TRUE(t->Publish({Fact("field.order-reminded.v1", "order-3")}).ok());
  ASSERT_TRUE(t->AdvanceTime(10min).ok());
  EXPECT_TRUE(t->Published(kEscalated).empty()) << "the first timeout fired though it was replaced";
  ASSERT_EQ(Instance(t->bus(), "order-3")->timeouts.size(), 1u);
  ASSERT_TRUE(t->AdvanceTime(5min).ok());
  EXPECT_EQ(t->Published(kEscalated).size(), 1u);
  EXPECT_EQ(PendingTimers(t->bus()), 0u);
}

TEST(ProcessTest, ATimeoutCarriesItsDataBack) {
  ProcessDefinition d;
  d.name = kProcessName;
  d.steps = {ProcessStep{.type = kReceived, .starts = true, .correlate = {}}};
  std::vector<std::string> seen;
  d.handler = [&seen](const Event&, ProcessContext& p) {
    if (p.IsNew()) return p.SetTimeout("poll", 1min, "attempt-1").ok() ? Outcome::Done() : Outcome::RetryAfter(0ms);
    seen.push_back(*p.FiredTimeout() + ":" + p.TimeoutData());
    EXPECT_TRUE(p.Timeouts().empty()) << "a fired timeout is no longer set";
    p.Complete();
    return Outcome::Done();
  };
  auto t = Running(Defined(std::move(d)));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-4")}).ok());
  ASSERT_TRUE(t->AdvanceTime(1min).ok());
  EXPECT_EQ(seen, std::vector<std::string>{"poll:attempt-1"});
}

TEST(ProcessTest, AFailedStepLeavesNothingBehind) {
  ProcessDefinition d = Dispatch();
  ProcessHandler base = d.handler;
  d.handler = [base](const Event& e, ProcessContext& p) {
    const Outcome outcome = base(e, p);
    // Everything was done; then the step fails on its first attempt.
    if (!p.Scope().Put("orders", p.Key() + "/attempted", "x").ok()) return Outcome::RetryAfter(0ms);
    if (p.Scope().Attempt() == 1) return Outcome::RetryAfter(1s);
    return outcome;
  };
  auto t = Running(Defined(std::move(d)));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-5")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  EXPECT_EQ(Instance(t->bus(), "order-5"), std::nullopt);
  EXPECT_EQ(Order(t->bus(), "order-5/attempted"), std::nullopt);
  EXPECT_EQ(PendingTimers(t->bus()), 0u) << "a failed step's timeout was scheduled";
  ASSERT_TRUE(t->AdvanceTime(1s).ok());
  ASSERT_TRUE(Instance(t->bus(), "order-5").has_value());
  EXPECT_EQ(Instance(t->bus(), "order-5")->timeouts.size(), 1u);
  EXPECT_EQ(PendingTimers(t->bus()), 1u);
  EXPECT_EQ(t->Failures(kSubscriber).size(), 1u);
}

TEST(ProcessTest, InstancesAndTimeoutsSurviveARestart) {
  auto process = Defined(Dispatch());
  auto t = Running(process);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-6"), Fact(kReceived, "order-7")}).ok());
  ASSERT_TRUE(t->AdvanceTime(5min).ok());
  ASSERT_TRUE(t->Restart().ok());
  ASSERT_TRUE(t->Publish({Fact(kAccepted, "order-6")}).ok());
  ASSERT_TRUE(t->AdvanceTime(10min).ok());
  ASSERT_EQ(t->Published(kEscalated).size(), 1u);
  EXPECT_EQ(t->Published(kEscalated)[0].subject, "order-7");
  EXPECT_EQ(Order(t->bus(), "order-6"), "accepted");
  ASSERT_TRUE(t->Restart().ok());
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  EXPECT_EQ(t->Published(kEscalated).size(), 1u) << "a timeout fired twice";
  EXPECT_EQ(Instance(t->bus(), "order-6"), std::nullopt);
  EXPECT_EQ(Instance(t->bus(), "order-7"), std::nullopt);
}

TEST(ProcessTest, AnEventForNoInstanceIsDeadLetteredUnderThatPolicy) {
  ProcessDefinition d = Dispatch();
  d.on_unmatched = UnmatchedPolicy::kDeadLetter;
  auto t = Running(Defined(std::move(d)));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kAccepted, "order-8")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  auto dead = t->DeadLettered(kSubscriber);
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].subject, "order-8");
  EXPECT_NE(t->Failures(kSubscriber).at(0).error.find("no instance of process dispatch runs for key order-8"),
            std::string::npos)
      << t->Failures(kSubscriber).at(0).error;
}

// An operator abandons an instance: it ends without a step, its timeout
// never fires, and the abandonment is counted apart from completions.
TEST(ProcessTest, AnAbandonedInstanceEndsWithoutAStepAndItsTimeoutNeverFires) {
  auto t = Running(Defined(Dispatch()));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-11"), Fact(kReceived, "order-12")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  OperatorAction action{.operator_name = "ann", .reason = "the customer left", .dry_run = true};
  auto dry = t->bus().Operator().AbandonProcess(kProcessName, "order-11", action);
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_EQ(*dry, 0u);
  ASSERT_TRUE(t->RunUntilIdle().ok());
  EXPECT_TRUE(Instance(t->bus(), "order-11").has_value()) << "a dry run changes nothing";
  action.dry_run = false;
  auto abandoned = t->bus().Operator().AbandonProcess(kProcessName, "order-11", action);
  ASSERT_TRUE(abandoned.ok()) << abandoned.status().ToString();
  EXPECT_GT(*abandoned, 0u) << "the action's id";
  ASSERT_TRUE(t->RunUntilIdle().ok());
  EXPECT_EQ(Instance(t->bus(), "order-11"), std::nullopt);
  EXPECT_EQ(PendingTimers(t->bus()), 1u) << "order-12's alone";
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  ASSERT_EQ(t->Published(kEscalated).size(), 1u);
  EXPECT_EQ(t->Published(kEscalated)[0].subject, "order-12");
  const ProcessStats stats = Stats(t->bus());
  EXPECT_EQ(stats.abandoned, 1u);
  EXPECT_EQ(stats.completed, 1u);
  EXPECT_EQ(stats.running, 0u);
  EXPECT_TRUE(t->bus().Operator().AbandonProcess(kProcessName, "order-11", action).status().IsNotFound());
  EXPECT_TRUE(
      t->bus().Operator().AbandonProcess(kProcessName, "order-12", OperatorAction{}).status().IsInvalidArgument())
      << "who and why are required";
  EXPECT_TRUE(t->bus().Operator().AbandonProcess("Bad", "order-12", action).status().IsInvalidArgument());
  EXPECT_TRUE(t->Failures().empty());
}

TEST(ProcessTest, InstancesAreListedInKeyOrderAPageAtATime) {
  auto t = Running(Defined(Dispatch()));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-c"), Fact(kReceived, "order-a"), Fact(kReceived, "order-e"),
                          Fact(kReceived, "order-b"), Fact(kReceived, "order-d")})
                  .ok());
  ASSERT_TRUE(t->Publish({Fact(kAccepted, "order-d")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  std::vector<std::string> keys;
  ProcessListOptions page_options;
  page_options.limit = 2;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = ListProcessInstances(t->bus(), kProcessName, page_options);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_LE(page->instances.size(), 2u);
    for (const ProcessInstance& i : page->instances) {
      keys.push_back(i.key);
      EXPECT_EQ(i.events_handled, 1u);
      ASSERT_EQ(i.recent.size(), 1u);
      EXPECT_EQ(i.recent[0].type, kReceived);
    }
    if (page->resume_after.empty()) break;
    page_options.resume_after = page->resume_after;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"order-a", "order-b", "order-c", "order-e"}));
  EXPECT_TRUE(ListProcessInstances(t->bus(), "Bad Name").status().IsInvalidArgument());
}

// Events of other subjects reach one instance by a key read from the
// payload; their steps are serialized.
TEST(ProcessTest, ACorrelationOtherThanTheSubjectGathersEventsInOneInstance) {
  ProcessDefinition d;
  d.name = kProcessName;
  auto by_payload = [](const Event& e) { return e.data; };
  d.steps = {ProcessStep{.type = kReceived, .starts = true, .correlate = by_payload},
             ProcessStep{.type = kAccepted, .starts = true, .correlate = by_payload}};
  d.handler = [](const Event& e, ProcessContext& p) {
    return p.SetState(p.State() + e.subject + ";").ok() ? Outcome::Done() : Outcome::RetryAfter(0ms);
  };
  auto t = Running(Defined(std::move(d)));
  ASSERT_NE(t, nullptr);
  std::vector<EventSpec> events;
  for (int i = 0; i < 20; ++i) events.push_back(Fact(i % 2 ? kAccepted : kReceived, "s-" + std::to_string(i), "job-1"));
  ASSERT_TRUE(t->Publish(events).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  auto instance = Instance(t->bus(), "job-1");
  ASSERT_TRUE(instance.has_value());
  EXPECT_EQ(instance->events_handled, 20u);
  std::set<std::string> parts;
  for (size_t at = 0, next; (next = instance->state.find(';', at)) != std::string::npos; at = next + 1) {
    parts.insert(instance->state.substr(at, next - at));
  }
  EXPECT_EQ(parts.size(), 20u) << "a step was lost: " << instance->state;
}

TEST(ProcessTest, AnInvalidKeyDeadLettersTheEvent) {
  ProcessDefinition d = Dispatch();
  d.steps[0].correlate = [](const Event&) { return std::string(); };
  auto t = Running(Defined(std::move(d)));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Publish({Fact(kReceived, "order-9")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  auto dead = t->DeadLettered(kSubscriber);
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->size(), 1u);
}

// A state with a contract: verified when set, its schema version kept, and
// state of an older version upgraded before the handler sees it.
TEST(ProcessTest, AStateTypeIsVerifiedAndOldStateUpgraded) {
  constexpr const char* kStateType = "shop.sale-state.v1";
  const std::string v1 = "namespace shop; table SaleState { stage: string; } root_type SaleState;";
  const std::string v2 = "namespace shop; table SaleState { stage: string; paid: bool; } root_type SaleState;";
  std::vector<std::pair<uint32_t, int>> seen;  // (state version, upgrades so far)
  int upgrades = 0;
  ProcessDefinition d;
  d.name = kProcessName;
  d.steps = {ProcessStep{.type = kReceived, .starts = true, .correlate = {}},
             ProcessStep{.type = kAccepted, .starts = false, .correlate = {}}};
  d.state_type = kStateType;
  d.upgrade_state = [&](uint32_t from, std::string_view) -> Result<std::string> {
    ++upgrades;
    EXPECT_EQ(from, 1u);
    return testing::PayloadFromJson(v2, R"({"stage": "upgraded", "paid": true})");
  };
  d.handler = [&](const Event& e, ProcessContext& p) {
    seen.emplace_back(p.StateVersion(), upgrades);
    if (e.data == "garbage") {
      EXPECT_TRUE(p.SetState("not a flatbuffer").IsInvalidArgument());
      return Outcome::Done();  // the refused call fails the step
    }
    if (p.IsNew())
      return p.SetState(testing::PayloadFromJson(v1, R"({"stage": "reserved"})")).ok() ? Outcome::Done()
                                                                                       : Outcome::RetryAfter(0ms);
    return Outcome::Done();
  };
  auto t = Running(Defined(std::move(d)));
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->bus().Contracts().RegisterSchema(kStateType, testing::BinarySchemaFromSource(v1)).ok());
  ASSERT_TRUE(t->Publish({Fact(kReceived, "sale-1")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  EXPECT_EQ(Instance(t->bus(), "sale-1")->state_version, 1u);
  ASSERT_TRUE(t->Publish({Fact(kAccepted, "sale-1", "garbage")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  ASSERT_FALSE(t->Failures(kSubscriber).empty());
  EXPECT_NE(t->Failures(kSubscriber)[0].error.find("a call in the handler failed"), std::string::npos)
      << t->Failures(kSubscriber)[0].error;
  ASSERT_TRUE(t->bus().Contracts().RegisterSchema(kStateType, testing::BinarySchemaFromSource(v2)).ok());
  ASSERT_TRUE(t->Publish({Fact(kAccepted, "sale-1")}).ok());
  ASSERT_TRUE(t->AdvanceTime(1h).ok());  // the failed step's retries, then the upgrade
  auto instance = Instance(t->bus(), "sale-1");
  ASSERT_TRUE(instance.has_value());
  EXPECT_EQ(instance->state_version, 2u);
  EXPECT_EQ(instance->state, testing::PayloadFromJson(v2, R"({"stage": "upgraded", "paid": true})"));
  EXPECT_GE(upgrades, 1);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().first, 0u) << "a new instance has no state";
  EXPECT_EQ(seen.back().first, 2u) << "the handler saw the upgraded state";
  // Committed upgraded: the next step needs none.
  const int before = upgrades;
  ASSERT_TRUE(t->Publish({Fact(kAccepted, "sale-1")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  EXPECT_EQ(upgrades, before);
}

TEST(ProcessTest, BadDefinitionsAreRefused) {
  auto refused = [](ProcessDefinition d) { return Process::Define(std::move(d)).status().IsInvalidArgument(); };
  ProcessDefinition d = Dispatch();
  d.name = "Dispatch";
  EXPECT_TRUE(refused(d));
  d = Dispatch();
  d.steps[0].starts = false;
  EXPECT_TRUE(refused(d)) << "no step starts an instance";
  d = Dispatch();
  d.steps.push_back(d.steps[0]);
  EXPECT_TRUE(refused(d)) << "a type listed twice";
  d = Dispatch();
  d.handler = nullptr;
  EXPECT_TRUE(refused(d));
  d = Dispatch();
  d.version = 0;
  EXPECT_TRUE(refused(d));
  d = Dispatch();
  d.steps[1].type = "NotAType";
  EXPECT_TRUE(refused(d));
}

// Live instances started under version 1 keep it when version 2 is
// deployed; new ones start under 2.
TEST(ProcessTest, InstancesKeepTheDefinitionVersionTheyStartedUnder) {
  testing::TempDir dir;
  std::map<std::string, uint32_t> seen;
  std::mutex mu;
  auto versioned = [&](uint32_t version) {
    ProcessDefinition d = Dispatch();
    d.version = version;
    d.handler = [&](const Event&, ProcessContext& p) {
      std::lock_guard<std::mutex> lock(mu);
      seen[p.Key()] = p.DefinitionVersion();
      return Outcome::Done();
    };
    return Defined(std::move(d));
  };
  for (uint32_t version : {1u, 2u}) {
    Options options = testing::TestOptions(dir);
    options.column_families = {"orders"};
    auto bus = testing::OpenBus(options);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(versioned(version)->subscriber()).ok());
    ASSERT_TRUE(bus->Start().ok());
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(Fact(kReceived, "started-under-" + std::to_string(version))).ok());
    if (version == 2) {
      ASSERT_TRUE(tx.Publish(Fact(kAccepted, "started-under-1")).ok());
    }
    ASSERT_TRUE(tx.Commit().ok());
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  EXPECT_EQ(seen["started-under-1"], 1u);
  EXPECT_EQ(seen["started-under-2"], 2u);
}

// Each order's acceptance races its timeout on the real clock: either the
// acceptance committed first (the timeout was cancelled, no escalation) or
// the timeout did (escalated; the acceptance found no instance). Never
// both, never neither; both orders occur.
TEST(ProcessTest, ATimeoutAndTheStepThatCancelsItNeverBothTakeEffect) {
  testing::TempDir dir;
  Options options = testing::TestOptions(dir);
  options.column_families = {"orders"};
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  constexpr int kOrders = 400;
  ProcessDefinition d = Dispatch();
  ProcessHandler base = d.handler;
  d.handler = [base](const Event& e, ProcessContext& p) {
    if (!p.IsNew()) return base(e, p);
    // The timeout falls due within a few milliseconds, spread per order.
    const auto after = std::chrono::milliseconds(std::stoi(e.data));
    return p.SetTimeout("accept", after).ok() ? Outcome::Done() : Outcome::RetryAfter(0ms);
  };
  std::atomic<int> escalations{0};
  SubscriberOptions escalated;
  escalated.name = "escalations";
  escalated.types = {kEscalated};
  escalated.handler = [&](const Event&, HandlerContext&) {
    escalations.fetch_add(1);
    return Outcome::Done();
  };
  auto process = Defined(std::move(d));
  ASSERT_TRUE(bus->Subscribe(process->subscriber()).ok());
  ASSERT_TRUE(bus->Subscribe(escalated).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (int i = 0; i < kOrders; ++i) {
    // Deadlines of 0 to 38 ms where the acceptances race them; every tenth
    // an hour, which its acceptance wins.
    const int deadline_ms = i % 10 == 9 ? 3600000 : i % 40;
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(Fact(kReceived, "order-" + std::to_string(i), std::to_string(deadline_ms))).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  // The acceptances start once a timeout took effect: both outcomes occur
  // however fast either side runs on this machine.
  ASSERT_TRUE(testing::Eventually([&] { return escalations.load() > 0; }));
  for (int i = 0; i < kOrders; ++i) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(Fact(kAccepted, "order-" + std::to_string(i))).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(testing::Eventually([&] { return bus->Stats().scheduled_pending == 0; }));
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  int accepted = 0;
  for (int i = 0; i < kOrders; ++i) {
    const std::string key = "order-" + std::to_string(i);
    if (Order(*bus, key).has_value()) ++accepted;
    EXPECT_EQ(Instance(*bus, key), std::nullopt) << key;
  }
  EXPECT_EQ(accepted + escalations.load(), kOrders);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(escalations.load(), 0);
  const ProcessStats stats = Stats(*bus);
  EXPECT_EQ(stats.started, static_cast<uint64_t>(kOrders));
  EXPECT_EQ(stats.completed, static_cast<uint64_t>(kOrders)) << "a step run again was counted twice";
  EXPECT_EQ(stats.unmatched, static_cast<uint64_t>(escalations.load()))
      << "each escalated order's acceptance found no instance";
}

}  // namespace
}  // namespace walbus
