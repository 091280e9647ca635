// bus/core/clock.cc: the ManualClock, and a bus on it. It moves only when
// told, wakes the buses watching it, and WaitCaughtUp returns once nothing
// can run before it moves: tests of time need neither sleeps nor polling.
#include "walbus/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

TEST(ManualClockTest, MovesOnlyWhenToldAndTellsItsWatchers) {
  ManualClock clock;
  EXPECT_FALSE(clock.PassesByItself());
  EXPECT_TRUE(Clock::System()->PassesByItself());
  const auto steady = clock.Now();
  const auto wall = clock.WallNow();
  EXPECT_EQ(wall.time_since_epoch() % 1ms, std::chrono::system_clock::duration(0)) << "on a whole millisecond";
  std::this_thread::sleep_for(2ms);
  EXPECT_EQ(clock.Now(), steady) << "real time passing moves nothing";
  std::atomic<int> woken{0};
  const uint64_t id = clock.Watch([&woken] { ++woken; });
  clock.Advance(90s);
  EXPECT_EQ(clock.Now() - steady, 90s);
  EXPECT_EQ(clock.WallNow() - wall, 90s);
  clock.StepWall(-1h);  // an NTP step back: the monotonic clock stays
  EXPECT_EQ(clock.Now() - steady, 90s);
  EXPECT_EQ(clock.WallNow() - wall, 90s - 1h);
  EXPECT_EQ(woken.load(), 2);
  clock.Unwatch(id);
  clock.Advance(1s);
  EXPECT_EQ(woken.load(), 2) << "no call after Unwatch";
}

// A bus on a ManualClock: a retry's backoff and a timer wait for the
// clock, and run as soon as it reaches them; WaitCaughtUp says when
// everything due has run, follow-ups included.
TEST(ManualClockTest, ABusRunsWhatFallsDueWhenTheClockMoves) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Options o = testing::TestOptions(dir);
  o.clock = clock;
  auto bus = testing::OpenBus(o);
  std::atomic<int> attempts{0}, reminders{0}, chained{0};
  SubscriberOptions s;
  s.name = "flow";
  s.handler = [&](const Event& e, HandlerContext& ctx) {
    if (e.type == "shop.order-placed.v1") {
      if (++attempts == 1) return Outcome::RetryAfter(10s);  // the first attempt fails
      EventSpec remind;
      remind.type = "shop.payment-reminder.v1";
      remind.subject = e.subject;
      remind.deliver_after = 1h;
      return ctx.Publish(remind).ok() ? Outcome::Done() : Outcome::RetryAfter(0ms);
    }
    if (e.type == "shop.payment-reminder.v1") {
      ++reminders;
      EventSpec next;  // a follow-up, due at once: it runs before WaitCaughtUp returns
      next.type = "shop.reminder-logged.v1";
      next.subject = e.subject;
      return ctx.Publish(next).ok() ? Outcome::Done() : Outcome::RetryAfter(0ms);
    }
    ++chained;
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  Transaction tx = bus->Begin();
  ASSERT_TRUE(tx.Publish({.type = "shop.order-placed.v1", .subject = "o-1", .data = "{}"}).ok());
  ASSERT_TRUE(tx.Commit().ok());

  const auto real_start = std::chrono::steady_clock::now();
  const auto placed_at = clock->Now();
  ASSERT_TRUE(bus->WaitCaughtUp(30s).ok()) << "the retry waits for the clock: nothing more can run";
  EXPECT_EQ(attempts.load(), 1);
  EXPECT_EQ(clock->NextAwaited(), placed_at + 10s) << "the bus told the clock the backoff's moment";
  clock->Advance(9999ms);
  ASSERT_TRUE(bus->WaitCaughtUp(30s).ok());
  EXPECT_EQ(attempts.load(), 1) << "the backoff has 1 ms left";
  clock->Advance(1ms);
  ASSERT_TRUE(bus->WaitCaughtUp(30s).ok());
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_EQ(reminders.load(), 0);
  EXPECT_EQ(clock->NextAwaited(), placed_at + 10s + 1h) << "then the reminder's";
  clock->Advance(1h);
  ASSERT_TRUE(bus->WaitCaughtUp(30s).ok());
  EXPECT_EQ(reminders.load(), 1) << "due after exactly the hour";
  EXPECT_EQ(chained.load(), 1) << "the reminder's follow-up ran too";
  EXPECT_LT(std::chrono::steady_clock::now() - real_start, 20s) << "an hour and ten seconds, in moments";
  EXPECT_EQ(clock->NextAwaited(), std::nullopt) << "nothing left to wait for";
  ASSERT_TRUE(bus->Close().ok());
  EXPECT_TRUE(bus->WaitCaughtUp(1s).IsClosed());
}

}  // namespace
}  // namespace walbus
