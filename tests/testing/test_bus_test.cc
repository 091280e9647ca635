// testing/test_bus.cc: the kit an application tests its handlers with.
// Virtual time runs what falls due and nothing else; what happened is
// recorded; failures are injected on chosen attempts; a restart keeps the
// database and the clock.
#include "walbus/testing.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

namespace walbus::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kReceived[] = "field.order-received.v1";
constexpr char kAccepted[] = "field.order-accepted.v1";
constexpr char kEscalated[] = "field.order-escalated.v1";

EventSpec Spec(const char* type, std::string subject) {
  EventSpec e;
  e.type = type;
  e.subject = std::move(subject);
  return e;
}

// An order not accepted within 15 minutes is escalated.
SubscriberOptions Escalation() {
  SubscriberOptions s;
  s.name = "escalation";
  s.types = {kReceived, kAccepted};
  s.handler = [](const Event& e, HandlerContext& ctx) {
    const std::string key = "timer/" + e.subject;
    if (e.type == kReceived) {
      EventSpec escalate = Spec(kEscalated, e.subject);
      escalate.deliver_after = 15min;
      Result<EventId> timer = ctx.Publish(escalate);
      if (!timer.ok() || !ctx.Put("orders", key, timer->ToString()).ok()) return Outcome::RetryAfter(0ms);
      return Outcome::Done();
    }
    auto timer = ctx.Get("orders", key);
    if (!timer.ok() || !timer->has_value()) return Outcome::RetryAfter(0ms);
    auto state = ctx.GetScheduled(*EventId::Parse(**timer));
    if (state.ok() && state->state == ScheduledStatus::State::kPending &&
        !ctx.CancelScheduled(*EventId::Parse(**timer)).ok()) {
      return Outcome::RetryAfter(0ms);
    }
    return Outcome::Done();
  };
  return s;
}

Options WithOrders() {
  Options o;
  o.column_families = {"orders"};
  return o;
}

TEST(TestBusTest, AdvanceTimeRunsWhatFallsDueAndNothingElse) {
  std::unique_ptr<TestBus> t;
  ASSERT_TRUE(TestBus::Open(WithOrders(), &t).ok());
  ASSERT_TRUE(t->Subscribe(Escalation()).ok());
  ASSERT_TRUE(t->Publish({Spec(kReceived, "order-1"), Spec(kReceived, "order-2")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  EXPECT_EQ(t->Runs("escalation").size(), 2u);
  ASSERT_TRUE(t->AdvanceTime(10min).ok());
  ASSERT_TRUE(t->Publish({Spec(kAccepted, "order-2")}).ok());
  ASSERT_TRUE(t->AdvanceTime(5min - 1ms).ok());
  EXPECT_TRUE(t->Published(kEscalated).empty()) << "14:59.999";
  ASSERT_TRUE(t->AdvanceTime(1ms).ok());
  const std::vector<Event> escalated = t->Published(kEscalated);
  ASSERT_EQ(escalated.size(), 1u) << "15:00: order-1, not the accepted order-2";
  EXPECT_EQ(escalated[0].subject, "order-1");
  ASSERT_TRUE(t->AdvanceTime(24h).ok());
  EXPECT_EQ(t->Published(kEscalated).size(), 1u);
  EXPECT_EQ(t->Published().size(), 4u) << "two received, one accepted, one escalated, in seq order";
  EXPECT_TRUE(t->Failures().empty());
}

// A reminder every 5 minutes, each set by the step the previous one
// caused: one AdvanceTime of an hour runs all twelve, each at its moment,
// and a handler retried with a backoff within the hour runs again in it.
TEST(TestBusTest, AdvanceTimeStopsAtEachMomentOnTheWay) {
  constexpr char kReminded[] = "field.order-reminded.v1";
  SubscriberOptions reminders;
  reminders.name = "reminders";
  reminders.types = {kReceived, kReminded};
  reminders.handler = [&](const Event& e, HandlerContext& ctx) {
    EventSpec next = Spec(kReminded, e.subject);
    next.deliver_after = 5min;
    return ctx.Publish(next).ok() ? Outcome::Done() : Outcome::RetryAfter(0ms);
  };
  reminders.retry.base = 1s;
  reminders.retry.cap = 1s;
  std::unique_ptr<TestBus> t;
  ASSERT_TRUE(TestBus::Open(Options{}, &t).ok());
  ASSERT_TRUE(t->Subscribe(reminders).ok());
  t->FailAttempts("reminders", {1, 2});  // each event: two retries first, within the step
  const auto start = t->clock().WallNow();
  ASSERT_TRUE(t->Publish({Spec(kReceived, "order-1")}).ok());
  ASSERT_TRUE(t->AdvanceTime(1h).ok());
  const std::vector<Event> reminded = t->Published(kReminded);
  ASSERT_GE(reminded.size(), 10u) << "the chain stopped: time jumped past the moments on the way";
  for (size_t i = 1; i < reminded.size(); ++i) {
    const auto gap = reminded[i].time - reminded[i - 1].time;
    EXPECT_GE(gap, 5min) << i;
    EXPECT_LE(gap, 5min + 3s) << i << ": fired late, not at its moment";
  }
  EXPECT_LE(reminded[0].time - start, 5min + 3s);
  EXPECT_EQ(t->clock().WallNow() - start, 1h) << "and the clock ends where it was told";
}

TEST(TestBusTest, FailuresAreInjectedOnChosenAttemptsAndRecorded) {
  std::unique_ptr<TestBus> t;
  ASSERT_TRUE(TestBus::Open(WithOrders(), &t).ok());
  SubscriberOptions s = Escalation();
  s.retry.base = 1s;
  s.retry.cap = 1s;
  s.retry.max_attempts = 3;
  ASSERT_TRUE(t->Subscribe(s).ok());
  SubscriberOptions thrower;
  thrower.name = "thrower";
  thrower.types = {kReceived};
  thrower.retry.max_attempts = 1;
  thrower.handler = [](const Event&, HandlerContext&) -> Outcome { throw std::runtime_error("disk on fire"); };
  ASSERT_TRUE(t->Subscribe(thrower).ok());
  t->FailAttempts("escalation", {1, 2});
  ASSERT_TRUE(t->Publish({Spec(kReceived, "order-1")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  ASSERT_EQ(t->Runs("escalation").size(), 1u) << "the retry waits for the clock";
  ASSERT_TRUE(t->AdvanceTime(1s).ok());
  ASSERT_TRUE(t->AdvanceTime(1s).ok());
  const std::vector<HandlerRun> runs = t->Runs("escalation");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_TRUE(runs[0].injected && runs[1].injected && !runs[2].injected);
  EXPECT_EQ(runs[2].attempt, 3u);
  EXPECT_EQ(runs[2].outcome, Outcome::Kind::kDone);
  EXPECT_EQ(t->Failures("escalation").size(), 2u);
  const std::vector<HandlerRun> thrown = t->Failures("thrower");
  ASSERT_EQ(thrown.size(), 1u);
  EXPECT_TRUE(thrown[0].threw);
  EXPECT_EQ(thrown[0].error, "disk on fire");
  Result<std::vector<Event>> dead = t->DeadLettered("thrower");
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].subject, "order-1");
  EXPECT_TRUE(t->DeadLettered("escalation")->empty());
}

TEST(TestBusTest, ARestartKeepsTheDatabaseTheClockAndTheSubscribers) {
  std::unique_ptr<TestBus> t;
  ASSERT_TRUE(TestBus::Open(WithOrders(), &t).ok());
  const std::string dir = t->dir();
  ASSERT_TRUE(t->Subscribe(Escalation()).ok());
  ASSERT_TRUE(t->Publish({Spec(kReceived, "order-1")}).ok());
  ASSERT_TRUE(t->RunUntilIdle().ok());
  ASSERT_TRUE(t->AdvanceTime(10min).ok());
  ASSERT_TRUE(t->Restart().ok());
  ASSERT_TRUE(t->AdvanceTime(5min).ok());
  EXPECT_EQ(t->Published(kEscalated).size(), 1u) << "the timer outlived the restart, on the same clock";
  EXPECT_EQ(t->Runs("escalation").size(), 1u) << "nothing ran twice";
  EXPECT_TRUE(t->Subscribe(Escalation()).IsBusy());
  SubscriberOptions own;
  own.name = "walbus.testing.outbox";
  own.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  EXPECT_TRUE(t->Subscribe(own).IsInvalidArgument());
  t.reset();
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the directory goes with the TestBus";
}

}  // namespace
}  // namespace walbus::testing
