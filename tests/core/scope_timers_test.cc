// bus/core/scope_timers.cc: schedule keys (EventSpec::schedule_key). At
// most one event is pending under a key; scheduling again replaces it and
// a cancel by key stops it, each atomically with its unit; a replace and
// the firing it races never both take effect; the firing releases the key.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/keys.h"
#include "tests/test_util.h"
#include "walbus/bus.h"
#include "walbus/testing.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;

constexpr const char* kEscalate = "field.order-escalate.v1";

EventSpec Escalation(std::string subject, std::chrono::milliseconds after, std::string key) {
  EventSpec spec{.type = kEscalate, .subject = std::move(subject), .data = "x"};
  spec.deliver_after = after;
  spec.schedule_key = std::move(key);
  return spec;
}

std::unique_ptr<testing::TestBus> OpenTestBus() {
  std::unique_ptr<testing::TestBus> t;
  EXPECT_TRUE(testing::TestBus::Open(Options{}, &t).ok());
  return t;
}

// Schedules one event in a transaction of its own; its id.
EventId Schedule(Bus& bus, const EventSpec& spec) { return testing::PublishAlone(bus, spec); }

std::optional<EventId> PendingUnder(Bus& bus, std::string_view key) {
  Transaction tx = bus.Begin();
  auto pending = tx.ScheduledByKey(key);
  EXPECT_TRUE(pending.ok()) << pending.status().ToString();
  return pending.ok() ? *pending : std::nullopt;
}

ScheduledStatus::State StateOf(Bus& bus, const EventId& id) {
  Transaction tx = bus.Begin();
  auto state = tx.GetScheduled(id);
  EXPECT_TRUE(state.ok()) << state.status().ToString();
  return state.ok() ? state->state : ScheduledStatus::State::kUnknown;
}

TEST(ScopeTimersTest, SchedulingAgainUnderAKeyReplacesThePendingEvent) {
  auto t = OpenTestBus();
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->RunUntilIdle().ok());
  const EventId first = Schedule(t->bus(), Escalation("order-1", 10min, "order-1/escalate"));
  const EventId second = Schedule(t->bus(), Escalation("order-1", 20min, "order-1/escalate"));
  EXPECT_EQ(PendingUnder(t->bus(), "order-1/escalate"), second);
  EXPECT_EQ(StateOf(t->bus(), first), ScheduledStatus::State::kCancelled);
  ASSERT_TRUE(t->AdvanceTime(15min).ok());
  EXPECT_TRUE(t->Published(kEscalate).empty()) << "the replaced event fired";
  ASSERT_TRUE(t->AdvanceTime(5min).ok());
  ASSERT_EQ(t->Published(kEscalate).size(), 1u);
  EXPECT_EQ(t->Published(kEscalate)[0].id, second);
  // The firing released the key: nothing is pending under it, and its
  // record is gone.
  EXPECT_EQ(PendingUnder(t->bus(), "order-1/escalate"), std::nullopt);
  const std::string dir = t->dir();
  ASSERT_TRUE(t->bus().Close().ok());
  auto db = testing::OpenStoppedDatabase(dir);
  ASSERT_NE(db, nullptr);
  std::string value;
  bool found = true;
  ASSERT_TRUE(
      db->Get(db->cf(storage::Cf::kVersions), storage::ScheduleKeyIdKey("order-1/escalate"), &value, &found).ok());
  EXPECT_FALSE(found) << "a fired event's key still names it";
}

TEST(ScopeTimersTest, ACancelByKeyStopsThePendingEventAndIsOkWithNonePending) {
  auto t = OpenTestBus();
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->RunUntilIdle().ok());
  const EventId id = Schedule(t->bus(), Escalation("order-2", 10min, "order-2/escalate"));
  {
    Transaction tx = t->bus().Begin();
    ASSERT_TRUE(tx.CancelScheduledByKey("order-2/escalate").ok());
    EXPECT_EQ(*tx.ScheduledByKey("order-2/escalate"), std::nullopt) << "the unit sees its own cancel";
    ASSERT_TRUE(tx.Commit().ok());
  }
  EXPECT_EQ(StateOf(t->bus(), id), ScheduledStatus::State::kCancelled);
  {
    Transaction tx = t->bus().Begin();
    ASSERT_TRUE(tx.CancelScheduledByKey("order-2/escalate").ok());
    ASSERT_TRUE(tx.CancelScheduledByKey("never-used").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  EXPECT_TRUE(t->Published(kEscalate).empty());
}

TEST(ScopeTimersTest, WithinOneUnitTheLastCallUnderAKeyStands) {
  auto t = OpenTestBus();
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->RunUntilIdle().ok());
  const EventId before = Schedule(t->bus(), Escalation("order-3", 5min, "order-3/escalate"));
  EventId last;
  {
    Transaction tx = t->bus().Begin();
    ASSERT_TRUE(tx.Publish(Escalation("order-3", 10min, "order-3/escalate")).ok());
    ASSERT_TRUE(tx.CancelScheduledByKey("order-3/escalate").ok());
    ASSERT_TRUE(tx.Publish(Escalation("order-3", 20min, "order-3/escalate")).ok());
    last = *tx.Publish(Escalation("order-3", 30min, "order-3/escalate"));
    EXPECT_EQ(*tx.ScheduledByKey("order-3/escalate"), last);
    ASSERT_TRUE(tx.Commit().ok());
  }
  EXPECT_EQ(StateOf(t->bus(), before), ScheduledStatus::State::kCancelled);
  EXPECT_EQ(PendingUnder(t->bus(), "order-3/escalate"), last);
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  ASSERT_EQ(t->Published(kEscalate).size(), 1u);
  EXPECT_EQ(t->Published(kEscalate)[0].id, last);
}

// Two units that both found the key free: the committer orders them, and
// the later one is refused rather than leaving two events pending.
TEST(ScopeTimersTest, TheLaterOfTwoUnitsThatFoundTheKeyFreeConflicts) {
  auto t = OpenTestBus();
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->RunUntilIdle().ok());
  Transaction a = t->bus().Begin();
  Transaction b = t->bus().Begin();
  ASSERT_TRUE(a.Publish(Escalation("order-4", 10min, "order-4/escalate")).ok());
  const EventId kept = *b.Publish(Escalation("order-4", 20min, "order-4/escalate"));
  ASSERT_TRUE(b.Commit().ok());
  auto refused = a.Commit();
  ASSERT_TRUE(refused.status().IsConflict()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("schedule key order-4/escalate"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(PendingUnder(t->bus(), "order-4/escalate"), kept);
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  EXPECT_EQ(t->Published(kEscalate).size(), 1u);
}

TEST(ScopeTimersTest, BadKeysAreRefusedAndFailTheUnit) {
  auto t = OpenTestBus();
  ASSERT_NE(t, nullptr);
  {
    Transaction tx = t->bus().Begin();
    EventSpec unscheduled{.type = kEscalate, .subject = "order-5", .data = "x"};
    unscheduled.schedule_key = "order-5/escalate";
    EXPECT_TRUE(tx.Publish(unscheduled).status().IsInvalidArgument());
    EXPECT_TRUE(tx.Commit().status().IsInvalidArgument()) << "the unit fails with its refused call";
  }
  {
    Transaction tx = t->bus().Begin();
    EXPECT_TRUE(tx.CancelScheduledByKey("").IsInvalidArgument());
    EXPECT_TRUE(tx.ScheduledByKey(std::string(kMaxKeyBytes + 1, 'k')).status().IsInvalidArgument());
    EXPECT_TRUE(tx.Commit().status().IsInvalidArgument());
  }
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  EXPECT_TRUE(t->Published().empty());
}

TEST(ScopeTimersTest, AKeyNamesItsEventAcrossARestart) {
  auto t = OpenTestBus();
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->RunUntilIdle().ok());
  const EventId id = Schedule(t->bus(), Escalation("order-6", 10min, "order-6/escalate"));
  Schedule(t->bus(), Escalation("order-7", 10min, "order-7/escalate"));
  ASSERT_TRUE(t->Restart().ok());
  EXPECT_EQ(PendingUnder(t->bus(), "order-6/escalate"), id);
  {
    Transaction tx = t->bus().Begin();
    ASSERT_TRUE(tx.CancelScheduledByKey("order-6/escalate").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(t->AdvanceTime(10min).ok());
  ASSERT_EQ(t->Published(kEscalate).size(), 1u);
  EXPECT_EQ(t->Published(kEscalate)[0].subject, "order-7");
  EXPECT_EQ(PendingUnder(t->bus(), "order-7/escalate"), std::nullopt) << "the firing after a restart released it";
}

// Each key's event falls due while another thread replaces it: either the
// replace committed first (the first event was cancelled and never
// delivered) or the firing did (the replace was refused, and its retry
// found the key free). Never both, never neither.
TEST(ScopeTimersTest, AReplaceRacingTheFiringHasOneOutcome) {
  testing::TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));  // the real clock: firings run while replaces commit
  ASSERT_NE(bus, nullptr);
  std::mutex mu;
  std::vector<EventId> delivered;
  SubscriberOptions recorder;
  recorder.name = "recorder";
  recorder.handler = [&](const Event& e, HandlerContext&) {
    std::lock_guard<std::mutex> lock(mu);
    delivered.push_back(e.id);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(recorder).ok());
  ASSERT_TRUE(bus->Start().ok());
  constexpr int kKeys = 1500;
  constexpr int kRacing = 1400;
  std::vector<EventId> first;
  {
    Transaction tx = bus->Begin();
    for (int i = 0; i < kKeys; ++i) {
      // The first kRacing due one per millisecond, where the replaces race
      // the firing; the rest an hour later, which the replaces win.
      const auto after = i < kRacing ? std::chrono::milliseconds(i) : std::chrono::milliseconds(1h);
      first.push_back(*tx.Publish(Escalation("order-" + std::to_string(i % 40), after, "key-" + std::to_string(i))));
    }
    ASSERT_TRUE(tx.Commit().ok());
  }
  // The replaces start once the first event was delivered, which they
  // lose: both outcomes occur however fast either side runs.
  ASSERT_TRUE(testing::Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(delivered.begin(), delivered.end(), first[0]) != delivered.end();
  }));
  std::vector<EventId> second(kKeys);
  std::vector<int> conflicts(kKeys);
  for (int i = 0; i < kKeys; ++i) {
    for (;;) {
      Transaction tx = bus->Begin();
      auto id = tx.Publish(Escalation("order-" + std::to_string(i % 40), 1h, "key-" + std::to_string(i)));
      ASSERT_TRUE(id.ok());
      auto committed = tx.Commit();
      if (committed.ok()) {
        second[i] = *id;
        break;
      }
      ASSERT_TRUE(committed.status().IsConflict()) << committed.status().ToString();
      ++conflicts[i];
    }
  }
  ASSERT_TRUE(testing::Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    Transaction tx = bus->Begin();
    for (int i = 0; i < kKeys; ++i) {
      if (tx.GetScheduled(first[i])->state == ScheduledStatus::State::kPending) return false;
    }
    return true;
  }));
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  int fired = 0, replaced = 0;
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < kKeys; ++i) {
    const bool was_delivered = std::find(delivered.begin(), delivered.end(), first[i]) != delivered.end();
    const ScheduledStatus::State state = StateOf(*bus, first[i]);
    if (state == ScheduledStatus::State::kFired) {
      ++fired;
      EXPECT_TRUE(was_delivered) << i;
    } else {
      ++replaced;
      EXPECT_EQ(state, ScheduledStatus::State::kCancelled) << i;
      EXPECT_FALSE(was_delivered) << i;
      EXPECT_EQ(conflicts[i], 0) << "a replace was refused though the first event never fired: " << i;
    }
    EXPECT_EQ(PendingUnder(*bus, "key-" + std::to_string(i)), second[i]) << i;
  }
  EXPECT_EQ(delivered.size(), static_cast<size_t>(fired));
  EXPECT_GT(fired, 0);
  EXPECT_GT(replaced, 0);
}

}  // namespace
}  // namespace walbus
