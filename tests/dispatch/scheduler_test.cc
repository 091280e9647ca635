// bus/dispatch/scheduler.cc: scheduled events (EventSpec::deliver_at and
// deliver_after) fire after their time and not before, once, across
// restarts, crashes and wall-clock steps; cancels and firings of one event
// never both happen.
#include "bus/dispatch/scheduler.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::ManualClock;
using testing::TempDir;

constexpr const char* kExpired = "shop.reservation-expired.v1";
constexpr const char* kPlaced = "shop.reservation-placed.v1";

// What a subscriber saw, in order.
class Seen {
 public:
  void Add(const Event& e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.size();
  }
  std::vector<Event> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  bool Has(const EventId& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Event& e : events_)
      if (e.id == id) return true;
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

SubscriberOptions Recording(Seen* seen, std::string name = "recorder") {
  SubscriberOptions s;
  s.name = std::move(name);
  s.handler = [seen](const Event& e, HandlerContext&) {
    seen->Add(e);
    return Outcome::Done();
  };
  return s;
}

Options ClockedOptions(const TempDir& dir, const std::shared_ptr<ManualClock>& clock) {
  Options o = testing::TestOptions(dir);
  o.clock = clock;
  return o;
}

// A started bus on `clock`, its subscriber "recorder" recording into
// `seen`; null (the test failed) when it cannot be had.
std::unique_ptr<Bus> StartRecorded(const TempDir& dir, const std::shared_ptr<ManualClock>& clock, Seen* seen) {
  auto bus = testing::OpenBus(ClockedOptions(dir, clock));
  if (bus == nullptr || !bus->Subscribe(Recording(seen)).ok() || !bus->Start().ok()) {
    ADD_FAILURE() << "the bus did not start";
    return nullptr;
  }
  return bus;
}

EventSpec Expiry(std::string subject, std::chrono::milliseconds after) {
  EventSpec spec{.type = kExpired, .subject = std::move(subject), .data = "x"};
  spec.deliver_after = after;
  return spec;
}

// Schedules one event in a transaction of its own; its id.
EventId Schedule(Bus& bus, const EventSpec& spec) { return testing::PublishAlone(bus, spec); }

Status Cancel(Bus& bus, const EventId& id) {
  Transaction tx = bus.Begin();
  if (Status s = tx.CancelScheduled(id); !s.ok()) return s;
  return tx.Commit().status();
}

ScheduledStatus::State StateOf(Bus& bus, const EventId& id) {
  Transaction tx = bus.Begin();
  auto state = tx.GetScheduled(id);
  EXPECT_TRUE(state.ok()) << state.status().ToString();
  return state.ok() ? state->state : ScheduledStatus::State::kUnknown;
}

// The value of a metric without labels (histograms: their count); -1 when
// the bus has none of that name.
double MetricValue(Bus& bus, const std::string& name) {
  for (const MetricFamily& f : bus.Metrics()) {
    if (f.name != name || f.samples.empty()) continue;
    return f.type == MetricType::kHistogram ? static_cast<double>(f.samples[0].count) : f.samples[0].value;
  }
  return -1;
}

// Lets the dispatcher look at the clock a few times: what did not fire by
// then is not due.
void LetItLook() { std::this_thread::sleep_for(200ms); }

TEST(SchedulerTest, FiresAfterItsDueTimeAndNotBefore) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  const EventId id = Schedule(*bus, Expiry("reservation-1", 15min));
  EXPECT_EQ(StateOf(*bus, id), ScheduledStatus::State::kPending);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_pending"), 1);
  EXPECT_NEAR(MetricValue(*bus, "walbus_scheduled_next_due_seconds"), 900, 1);
  // Pending is neither backlog nor lag: waits for delivery return at once.
  ASSERT_TRUE(bus->WaitIdle(5s).ok());
  // Due times are whole milliseconds, rounded up: never early, at most a
  // millisecond late.
  clock->Advance(15min - 1ms);
  LetItLook();
  EXPECT_EQ(seen.size(), 0u);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_overdue"), 0);
  clock->Advance(2ms);
  ASSERT_TRUE(testing::Eventually([&] { return seen.size() == 1; }));
  const Event fired = seen.events()[0];
  EXPECT_EQ(fired.id, id);
  EXPECT_EQ(fired.type, kExpired);
  EXPECT_EQ(fired.subject, "reservation-1");
  EXPECT_GT(fired.seq, 0u);
  EXPECT_EQ(StateOf(*bus, id), ScheduledStatus::State::kFired);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_pending"), 0);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_fired_total"), 1);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_lateness_seconds"), 1);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_next_due_seconds"), -1);  // none waits
}

// Read all the while: as the dispatcher takes its first look after each
// open and as earlier timers come, the gauge shows the earliest pending
// timer, never none and never the start value.
TEST(SchedulerTest, TheNextDueGaugeHoldsWhileTheDispatcherLooks) {
  constexpr int kRounds = 40;
  constexpr int kEarlierPerRound = 20;
  constexpr auto kStep = 10ms;
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();  // never advanced
  {
    auto bus = testing::OpenBus(ClockedOptions(dir, clock));
    ASSERT_NE(bus, nullptr);
    Schedule(*bus, Expiry("reservation-0", 15min));
    ASSERT_TRUE(bus->Close().ok());
  }
  const double lowest = std::chrono::duration<double>(15min - kRounds * kEarlierPerRound * kStep).count();
  int scheduled = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto bus = testing::OpenBus(ClockedOptions(dir, clock));
    ASSERT_NE(bus, nullptr);
    std::vector<double> wrong;
    std::atomic<size_t> reads{0};
    std::jthread reader([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        const double v = MetricValue(*bus, "walbus_scheduled_next_due_seconds");
        if (v < lowest - 1 || v > 901) wrong.push_back(v);
        ++reads;
      }
    });
    // Reading before the start, through it, and after the last timer.
    const auto read_once_more = [&reads] {
      const size_t seen = reads.load();
      while (reads.load() < seen + 2) std::this_thread::yield();
    };
    read_once_more();
    ASSERT_TRUE(bus->Start().ok());
    for (int i = 0; i < kEarlierPerRound; ++i) {
      ++scheduled;
      Schedule(*bus, Expiry("reservation-" + std::to_string(scheduled), 15min - scheduled * kStep));
    }
    read_once_more();
    reader.request_stop();
    reader.join();
    EXPECT_TRUE(wrong.empty()) << "round " << round << ": " << wrong.size() << " wrong reads, the first "
                               << wrong.front();
    EXPECT_NEAR(MetricValue(*bus, "walbus_scheduled_next_due_seconds"),
                std::chrono::duration<double>(15min - scheduled * kStep).count(), 0.01);
    ASSERT_TRUE(bus->Close().ok());
  }
}

TEST(SchedulerTest, ATimeInThePastFiresAtOnce) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  EventSpec spec{.type = kExpired, .subject = "reservation-1"};
  spec.deliver_at = clock->WallNow() - 1h;
  const EventId id = Schedule(*bus, spec);
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(id); }));
}

// Scheduled before Start, with no subscriber to wake the dispatcher: its
// first look finds them (the bridge relays what fires, subscriber or not).
TEST(SchedulerTest, TimersScheduledBeforeStartFireWithoutASubscriber) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  const EventId due = Schedule(*bus, Expiry("reservation-1", 1ms));
  const EventId later = Schedule(*bus, Expiry("reservation-2", 300ms));
  std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(bus->Start().ok());
  EXPECT_TRUE(testing::Eventually([&] { return StateOf(*bus, due) == ScheduledStatus::State::kFired; }));
  EXPECT_TRUE(testing::Eventually([&] { return StateOf(*bus, later) == ScheduledStatus::State::kFired; }));
  // The count follows the write that fired it (the committer's listener
  // runs once the batch is in), so a read may see the state first.
  EXPECT_TRUE(testing::Eventually([&] { return bus->Stats().scheduled_pending == 0; }));
}

TEST(SchedulerTest, BadSchedulesAreRefusedAndWriteNothing) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  auto bus = testing::OpenBus(ClockedOptions(dir, clock));
  ASSERT_NE(bus, nullptr);
  EventSpec both = Expiry("r", 1s);
  both.deliver_at = clock->WallNow();
  EventSpec negative = Expiry("r", -1ms);
  for (const EventSpec& spec : {both, negative}) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("orders", "k", "v").ok());
    EXPECT_TRUE(tx.Publish(spec).status().IsInvalidArgument());
    EXPECT_TRUE(tx.Commit().status().IsInvalidArgument());
  }
  EXPECT_FALSE(bus->Read().Get("orders", "k")->has_value());
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_pending"), 0);
  // An id nobody scheduled.
  Transaction tx = bus->Begin();
  EXPECT_TRUE(tx.CancelScheduled(EventId::Generate()).IsNotFound());
  EXPECT_TRUE(tx.Commit().status().IsNotFound());
}

TEST(SchedulerTest, ItCommitsWithItsTransactionOrNotAtAll) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  EventId dropped;
  {
    Transaction tx = bus->Begin();
    dropped = *tx.Publish(Expiry("r", 1s));
    ASSERT_TRUE(tx.ExpectVersion("orders", "r", 7).ok());  // fails: the version is 0
    EXPECT_TRUE(tx.Commit().status().IsConflict());
  }
  EventId own;
  {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Put("orders", "r", "reserved").ok());
    own = *tx.Publish(Expiry("r", 1s));
    // Cancelled before it was ever committed: nothing is scheduled.
    ASSERT_TRUE(tx.CancelScheduled(own).ok());
    EXPECT_EQ(tx.GetScheduled(own)->state, ScheduledStatus::State::kUnknown);
    auto receipt = tx.Commit();
    ASSERT_TRUE(receipt.ok());
    EXPECT_TRUE(receipt->event_ids.empty());  // the receipt holds what entered the outbox
  }
  clock->Advance(1h);
  LetItLook();
  EXPECT_EQ(seen.size(), 0u);
  EXPECT_EQ(StateOf(*bus, dropped), ScheduledStatus::State::kUnknown);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_pending"), 0);
}

TEST(SchedulerTest, ACancelBeforeItsTimeStopsIt) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  const EventId cancelled = Schedule(*bus, Expiry("reservation-1", 10min));
  const EventId kept = Schedule(*bus, Expiry("reservation-2", 10min));
  ASSERT_TRUE(Cancel(*bus, cancelled).ok());
  EXPECT_EQ(StateOf(*bus, cancelled), ScheduledStatus::State::kCancelled);
  Status again = Cancel(*bus, cancelled);
  EXPECT_TRUE(again.IsConflict());
  EXPECT_NE(again.message().find("cancelled already"), std::string::npos) << again.ToString();
  clock->Advance(11min);
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(kept); }));
  LetItLook();
  EXPECT_FALSE(seen.Has(cancelled));
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_cancelled_total"), 1);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_fired_total"), 1);
}

TEST(SchedulerTest, ACancelAfterTheFiringSaysItFiredAndWritesNothing) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  const EventId id = Schedule(*bus, Expiry("reservation-1", 1s));
  clock->Advance(2s);
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(id); }));
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Put("orders", "reservation-1", "confirmed").ok());
  Status s = tx.CancelScheduled(id);
  EXPECT_TRUE(s.IsConflict());
  EXPECT_NE(s.message().find("fired already"), std::string::npos) << s.ToString();
  EXPECT_TRUE(tx.Commit().status().IsConflict());
  EXPECT_FALSE(bus->Read().Get("orders", "reservation-1")->has_value());
}

// Cancels race the firing from another thread: for every event exactly
// one of them happened, and every view agrees on which.
TEST(SchedulerTest, ACancelRacingTheFiringHasOneOutcome) {
  TempDir dir;
  Seen seen;
  Options options = testing::TestOptions(dir);  // the real clock: firings run while cancels commit
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  ASSERT_TRUE(bus->Subscribe(Recording(&seen)).ok());
  ASSERT_TRUE(bus->Start().ok());
  constexpr int kEvents = 2000;
  constexpr int kRacing = 1900;
  std::vector<EventId> ids;
  {
    Transaction tx = bus->Begin();
    for (int i = 0; i < kEvents; ++i) {
      // The first kRacing due one per millisecond, where the cancels race
      // the firing; the rest an hour later, which the cancels win.
      const auto after = i < kRacing ? std::chrono::milliseconds(i) : std::chrono::milliseconds(3600s);
      ids.push_back(*tx.Publish(Expiry("reservation-" + std::to_string(i % 50), after)));
    }
    ASSERT_TRUE(tx.Commit().ok());
  }
  // The cancels start once the first event fired, which they lose: both
  // outcomes occur however fast either side runs on this machine.
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(ids[0]); }));
  std::vector<Status> outcomes(kEvents);
  std::thread canceller([&] {
    for (int i = 0; i < kEvents; ++i) outcomes[i] = Cancel(*bus, ids[i]);
  });
  canceller.join();
  ASSERT_TRUE(testing::Eventually([&] { return MetricValue(*bus, "walbus_scheduled_pending") == 0; }));
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  int cancelled = 0, fired = 0;
  for (int i = 0; i < kEvents; ++i) {
    const bool delivered = seen.Has(ids[i]);
    const ScheduledStatus::State state = StateOf(*bus, ids[i]);
    if (outcomes[i].ok()) {
      ++cancelled;
      EXPECT_FALSE(delivered) << i;
      EXPECT_EQ(state, ScheduledStatus::State::kCancelled) << i;
    } else {
      ++fired;
      EXPECT_TRUE(outcomes[i].IsConflict()) << outcomes[i].ToString();
      EXPECT_NE(outcomes[i].message().find("fired already"), std::string::npos) << outcomes[i].ToString();
      EXPECT_TRUE(delivered) << i;
      EXPECT_EQ(state, ScheduledStatus::State::kFired) << i;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(fired));
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_fired_total"), fired);
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_cancelled_total"), cancelled);
  EXPECT_TRUE(outcomes[0].IsConflict());
  EXPECT_TRUE(outcomes[kEvents - 1].ok());
  EXPECT_GE(cancelled, kEvents - kRacing);
}

TEST(SchedulerTest, PendingEventsSurviveARestartAndFireOnce) {
  TempDir dir;
  EventId id;
  {
    auto clock = std::make_shared<ManualClock>();
    auto bus = testing::OpenBus(ClockedOptions(dir, clock));
    ASSERT_NE(bus, nullptr);
    id = Schedule(*bus, Expiry("reservation-1", 10min));
    ASSERT_TRUE(bus->Close().ok());
  }
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  {
    auto bus = testing::OpenBus(ClockedOptions(dir, clock));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Recording(&seen)).ok());
    ASSERT_TRUE(bus->Start().ok());
    EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_pending"), 1);
    LetItLook();
    EXPECT_EQ(seen.size(), 0u);  // a restart is not its time
    clock->Advance(10min + 1s);
    ASSERT_TRUE(testing::Eventually([&] { return seen.Has(id); }));
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  clock->Advance(1h);
  LetItLook();
  EXPECT_EQ(seen.size(), 1u);  // no catch-up duplicate
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_pending"), 0);
}

TEST(SchedulerTest, AWallClockSteppingBackDoesNotDelayIt) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  const EventId before = Schedule(*bus, Expiry("reservation-1", 15min));
  clock->Advance(5min);
  clock->StepWall(-7 * 24h);  // NTP's first sync on a device without a real-time clock
  clock->Advance(9min);
  LetItLook();
  EXPECT_EQ(seen.size(), 0u);
  // One scheduled after the step, by the wall clock as it is now.
  EventSpec at{.type = kExpired, .subject = "reservation-2"};
  at.deliver_at = clock->WallNow() + 2min;
  const EventId after = Schedule(*bus, at);
  clock->Advance(1min + 1ms);  // 15 minutes of elapsed time since the first
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(before); }));
  EXPECT_FALSE(seen.Has(after));
  clock->Advance(1min);
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(after); }));
}

TEST(SchedulerTest, AWallClockEarlierAtTheNextStartDoesNotDelayIt) {
  TempDir dir;
  EventId id;
  {
    auto clock = std::make_shared<ManualClock>();
    auto bus = testing::OpenBus(ClockedOptions(dir, clock));
    ASSERT_NE(bus, nullptr);
    id = Schedule(*bus, Expiry("reservation-1", 15min));
    clock->Advance(5min);
    ASSERT_TRUE(bus->Close().ok());
  }
  // The device restarts with a clock a week behind the one that scheduled.
  auto clock = std::make_shared<ManualClock>();
  clock->StepWall(-7 * 24h);
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  clock->Advance(9min);
  LetItLook();
  EXPECT_EQ(seen.size(), 0u);
  clock->Advance(1min + 1s);  // 15 minutes of elapsed time (the downtime counts as none)
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(id); }));
}

TEST(SchedulerTest, AWallClockSteppingForwardFiresWhatFellDueAndNoMore) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  const EventId in_one_hour = Schedule(*bus, Expiry("reservation-1", 1h));
  const EventId in_three_hours = Schedule(*bus, Expiry("reservation-2", 3h));
  clock->StepWall(2h);
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(in_one_hour); }));
  LetItLook();
  EXPECT_FALSE(seen.Has(in_three_hours));
  clock->Advance(1h + 1ms);
  ASSERT_TRUE(testing::Eventually([&] { return seen.Has(in_three_hours); }));
}

// Per subject, delivery follows the order events entered the outbox: a
// scheduled event takes its place when it fires, not when it was published.
TEST(SchedulerTest, AFiredEventTakesItsPlaceInItsSubjectsOrder) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = StartRecorded(dir, clock, &seen);
  ASSERT_NE(bus, nullptr);
  auto publish_now = [&](const std::string& data) {
    Transaction tx = bus->Begin();
    EXPECT_TRUE(tx.Publish({.type = kPlaced, .subject = "reservation-1", .data = data}).ok());
    EXPECT_TRUE(tx.Commit().ok());
  };
  publish_now("first");
  EventSpec later = Expiry("reservation-1", 1min);
  later.data = "scheduled";
  Schedule(*bus, later);
  publish_now("second");
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  clock->Advance(1min + 1ms);
  ASSERT_TRUE(testing::Eventually([&] { return seen.size() == 3; }));
  publish_now("third");
  ASSERT_TRUE(testing::Eventually([&] { return seen.size() == 4; }));
  std::vector<std::string> order;
  uint64_t last_seq = 0;
  for (const Event& e : seen.events()) {
    order.push_back(e.data);
    EXPECT_GT(e.seq, last_seq);
    last_seq = e.seq;
  }
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second", "scheduled", "third"}));
}

// A handler schedules an expiry with its effects and cancels it from
// another event's handler: the state, the timer and the events commit
// together.
TEST(SchedulerTest, HandlersScheduleAndCancelWithTheirEffects) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Seen seen;
  auto bus = testing::OpenBus(ClockedOptions(dir, clock));
  ASSERT_NE(bus, nullptr);
  SubscriberOptions reservations;
  reservations.name = "reservations";
  reservations.handler = [](const Event& e, HandlerContext& ctx) {
    if (e.type == kPlaced) {
      auto timer = ctx.Publish(Expiry(e.subject, 15min));
      if (!timer.ok()) return Outcome::RetryAfter(10ms);
      if (!ctx.Put("orders", e.subject, "held:" + timer->ToString()).ok()) return Outcome::RetryAfter(10ms);
    } else if (e.type == "shop.reservation-confirmed.v1") {
      auto held = ctx.Get("orders", e.subject);
      if (!held.ok() || !held->has_value()) return Outcome::RetryAfter(10ms);
      auto timer = EventId::Parse(held->value().substr(5));
      auto state = ctx.GetScheduled(*timer);
      if (state.ok() && state->state == ScheduledStatus::State::kPending) {
        if (!ctx.CancelScheduled(*timer).ok()) return Outcome::RetryAfter(10ms);
      }
      if (!ctx.Put("orders", e.subject, "confirmed").ok()) return Outcome::RetryAfter(10ms);
    }
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(reservations)).ok());
  ASSERT_TRUE(bus->Subscribe(Recording(&seen, "expiries")).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (const char* r : {"reservation-1", "reservation-2"}) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish({.type = kPlaced, .subject = r}).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_pending"), 2);
  {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish({.type = "shop.reservation-confirmed.v1", .subject = "reservation-1"}).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(bus->Read().Get("orders", "reservation-1")->value_or(""), "confirmed");
  clock->Advance(16min);
  ASSERT_TRUE(testing::Eventually([&] {
    for (const Event& e : seen.events())
      if (e.type == kExpired) return true;
    return false;
  }));
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  std::vector<std::string> expired;
  for (const Event& e : seen.events())
    if (e.type == kExpired) expired.push_back(e.subject);
  EXPECT_EQ(expired, std::vector<std::string>{"reservation-2"});
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_cancelled_total"), 1);
}

// After downtime every timer is overdue; they fire in batches while live
// events keep flowing between them.
TEST(SchedulerTest, OverdueTimersAfterDowntimeDoNotStarveLiveEvents) {
  TempDir dir;
  constexpr int kTimers = 100000;
  {
    auto clock = std::make_shared<ManualClock>();
    auto bus = testing::OpenBus(ClockedOptions(dir, clock));
    ASSERT_NE(bus, nullptr);
    for (int batch = 0; batch < kTimers / 1000; ++batch) {
      Transaction tx = bus->Begin();
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(tx.Publish(Expiry("r-" + std::to_string(i), 1min)).ok());
      ASSERT_TRUE(tx.Commit().ok());
    }
    ASSERT_TRUE(bus->Close().ok());
  }
  auto clock = std::make_shared<ManualClock>();
  clock->Advance(1h);
  std::atomic<int> expired{0};
  std::atomic<int> expired_when_live_ran{-1};
  Options options = ClockedOptions(dir, clock);
  options.max_in_flight_per_subscriber = 1024;
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  SubscriberOptions s;
  s.name = "reactor";
  s.handler = [&](const Event& e, HandlerContext&) {
    if (e.type == kExpired) {
      expired.fetch_add(1);
    } else {
      expired_when_live_ran.store(expired.load());
    }
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(testing::Eventually([&] { return expired.load() > 0; }));
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Publish({.type = kPlaced, .subject = "live"}).ok());
  ASSERT_TRUE(tx.Commit().ok());
  ASSERT_TRUE(testing::Eventually([&] { return expired_when_live_ran.load() >= 0; }));
  // The live event ran long before the overdue ones were through.
  EXPECT_LT(expired_when_live_ran.load(), kTimers / 2);
  ASSERT_TRUE(testing::Eventually([&] { return expired.load() == kTimers; }, 120s));
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  EXPECT_EQ(expired.load(), kTimers);  // none twice
  EXPECT_EQ(MetricValue(*bus, "walbus_scheduled_pending"), 0);
}

// A child schedules events falling due over its life and is killed with
// SIGKILL at a random moment while it fires them; every event it committed
// fires exactly once in effect after the restart.
TEST(SchedulerTest, AKillWhileFiringNeitherLosesNorDoublesAnEvent) {
  const int rounds = 4;
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < rounds; ++round) {
    TempDir dir;
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    auto counting = [](const Event& e, HandlerContext& ctx) {
      const std::string key = e.id.ToString();
      auto runs = ctx.Get("effects", key);
      if (!runs.ok()) return Outcome::RetryAfter(10ms);
      const int n = runs->has_value() ? std::stoi(**runs) : 0;
      if (!ctx.Put("effects", key, std::to_string(n + 1)).ok()) return Outcome::RetryAfter(10ms);
      return Outcome::Done();
    };
    if (pid == 0) {
      close(fds[0]);
      Options o = testing::TestOptions(dir, Durability::kSync);
      std::unique_ptr<Bus> bus;
      if (!Bus::Open(o, &bus).ok()) _exit(2);
      SubscriberOptions s;
      s.name = "effects";
      s.handler = counting;
      if (!bus->Subscribe(std::move(s)).ok() || !bus->Start().ok()) _exit(2);
      for (int i = 0;; ++i) {
        Transaction tx = bus->Begin();
        auto id = tx.Publish(Expiry("r-" + std::to_string(i % 13), std::chrono::milliseconds(i % 40)));
        if (!id.ok() || !tx.Commit().ok()) _exit(2);
        std::string line = id->ToString() + "\n";
        if (write(fds[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(3);
      }
    }
    close(fds[1]);
    // The kill comes at a random moment once the child has scheduled some
    // (however slow the machine is), while it fires the earlier ones.
    std::string all;
    char buf[4096];
    ssize_t n;
    auto lines = [&] { return static_cast<size_t>(std::count(all.begin(), all.end(), '\n')); };
    while (lines() < 20 && (n = read(fds[0], buf, sizeof(buf))) > 0) all.append(buf, static_cast<size_t>(n));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) all.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    std::vector<std::string> acknowledged;
    std::istringstream in(all);
    for (std::string line; std::getline(in, line);)
      if (line.size() == 36) acknowledged.push_back(line);
    ASSERT_GE(acknowledged.size(), 20u) << "the child died before it scheduled enough";

    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    SubscriberOptions s;
    s.name = "effects";
    s.handler = counting;
    ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
    ASSERT_TRUE(bus->Start().ok());
    ASSERT_TRUE(testing::Eventually([&] { return MetricValue(*bus, "walbus_scheduled_pending") == 0; }));
    ASSERT_TRUE(bus->WaitIdle(30s).ok());
    ReadView view = bus->Read();
    for (const std::string& id : acknowledged) {
      auto runs = view.Get("effects", id);
      ASSERT_TRUE(runs.ok());
      ASSERT_TRUE(runs->has_value()) << "round " << round << ": event " << id << " never fired";
      EXPECT_EQ(**runs, "1") << "round " << round << ": event " << id;
    }
  }
}

}  // namespace
}  // namespace walbus
