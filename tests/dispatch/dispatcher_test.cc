// The dispatcher (bus/dispatch/dispatcher.cc) through the public API, against a real
// RocksDB in a temporary directory: how it learns of new events while its
// workers are busy and work is queued for them.
//
// The dispatcher has no idle poll that would mask a lost wake-up as a
// short delay: an event that is not delivered for want of a wake-up fails
// the test.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "storage/db.h"
#include "storage/keys.h"
#include "tests/test_util.h"
#include "tools/process_stats.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

Receipt CommitEvent(Bus& bus, const std::string& subject) {
  Transaction tx = bus.Begin();
  EventSpec e;
  e.type = kType;
  e.subject = subject;
  EXPECT_TRUE(tx.Publish(e).ok());
  Result<Receipt> r = tx.Commit();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Receipt{};
}

class DispatcherTest : public ::testing::Test {
 protected:
  static constexpr std::chrono::milliseconds kWait = 20s;
};

// A started bus with two workers (one can be held in a handler while the
// other goes on) and one subscriber, "projection", running `handler`.
std::unique_ptr<Bus> StartWithTwoWorkers(const TempDir& dir, Handler handler) {
  Options opt = testing::TestOptions(dir);
  opt.worker_threads = 2;
  std::unique_ptr<Bus> bus = testing::OpenBus(opt);
  if (bus == nullptr) return nullptr;
  SubscriberOptions sub;
  sub.name = "projection";
  sub.handler = std::move(handler);
  EXPECT_TRUE(bus->Subscribe(std::move(sub)).ok());
  EXPECT_TRUE(bus->Start().ok());
  return bus;
}

// Keeps this thread busy (a handler's work, or a commit's exact moment).
void SpinFor(std::chrono::microseconds span) {
  for (auto until = std::chrono::steady_clock::now() + span; std::chrono::steady_clock::now() < until;) {
  }
}

// Holds the handlers that enter it until released, one at a time.
class Gate {
 public:
  // Blocks the calling handler until a release is granted. Returns false
  // if none came within the timeout.
  bool Enter() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    const bool released = cv_.wait_for(lock, 60s, [&] { return releases_ > 0; });
    if (released) --releases_;
    --waiting_;
    return released;
  }
  void ReleaseOne() {
    std::lock_guard<std::mutex> lock(mu_);
    ++releases_;
    cv_.notify_all();
  }
  void ReleaseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    releases_ += 1000;
    cv_.notify_all();
  }
  bool WaitForWaiting(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 30s, [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  int releases_ = 0;
};

TEST_F(DispatcherTest, EventsCommittedWhileWorkIsQueuedReachTheNextFreeWorker) {
  TempDir dir;
  Gate gate;
  std::mutex mu;
  std::multiset<std::string> handled;
  std::unique_ptr<Bus> bus = StartWithTwoWorkers(dir, [&](const Event& e, HandlerContext& ctx) {
    if (e.subject.rfind("held-", 0) == 0 && !gate.Enter()) return Outcome::RetryAfter(1ms);
    if (!ctx.Put("effects", e.subject, "done").ok()) return Outcome::RetryAfter(1ms);
    std::lock_guard<std::mutex> lock(mu);
    handled.insert(e.subject);
    return Outcome::Done();
  });
  ASSERT_NE(bus, nullptr);

  // Both workers block in a handler; more held events wait in the work
  // queue behind them (or in the same worker's batch).
  (void)CommitEvent(*bus, "held-0");
  ASSERT_TRUE(gate.WaitForWaiting(1));
  (void)CommitEvent(*bus, "held-1");
  ASSERT_TRUE(gate.WaitForWaiting(2));
  for (int i = 2; i < 6; ++i) (void)CommitEvent(*bus, "held-" + std::to_string(i));
  // Committed while every worker is busy and work is queued: the
  // dispatcher is not woken for them now, but must still deliver them.
  Receipt last;
  for (int i = 0; i < 20; ++i) last = CommitEvent(*bus, "free-" + std::to_string(i));
  // One handler at a time is released; the events behind keep coming.
  for (int i = 0; i < 6; ++i) gate.ReleaseOne();
  std::vector<DeliveryState> states;
  ASSERT_TRUE(bus->WaitHandled(last, {"projection"}, kWait, &states).ok());
  gate.ReleaseAll();
  ASSERT_TRUE(bus->WaitIdle(kWait).ok());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(handled.size(), 26u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(handled.count("free-" + std::to_string(i)), 1u) << i;
  for (int i = 0; i < 6; ++i) EXPECT_EQ(handled.count("held-" + std::to_string(i)), 1u) << i;
}

TEST_F(DispatcherTest, AFreeWorkerGetsNewEventsWhileAnotherHandlerStaysBlocked) {
  TempDir dir;
  Gate gate;
  std::atomic<int> free_handled{0};
  std::unique_ptr<Bus> bus = StartWithTwoWorkers(dir, [&](const Event& e, HandlerContext&) {
    if (e.subject == "held") return gate.Enter() ? Outcome::Done() : Outcome::RetryAfter(1ms);
    ++free_handled;
    return Outcome::Done();
  });
  ASSERT_NE(bus, nullptr);
  (void)CommitEvent(*bus, "held");
  ASSERT_TRUE(gate.WaitForWaiting(1));
  // One worker stays blocked for the whole test; the other handles a
  // stream of events committed one by one. (WaitHandled would wait for the
  // held event too: the checkpoint cannot pass it.)
  for (int i = 0; i < 200; ++i) {
    (void)CommitEvent(*bus, "free-" + std::to_string(i % 7));
    ASSERT_TRUE(testing::Eventually([&] { return free_handled.load() == i + 1; })) << i;
  }
  gate.ReleaseAll();
  ASSERT_TRUE(bus->WaitIdle(kWait).ok());
}

TEST_F(DispatcherTest, EventsCommittedAtAnyMomentOfAHandOutAreDelivered) {
  TempDir dir;
  Gate gate;
  std::atomic<int> handled{0};
  std::atomic<int> slow_started{0};
  std::unique_ptr<Bus> bus = StartWithTwoWorkers(dir, [&](const Event& e, HandlerContext&) {
    if (e.subject.rfind("held-", 0) == 0 && !gate.Enter()) return Outcome::RetryAfter(1ms);
    if (e.subject.rfind("slow-", 0) == 0) {
      ++slow_started;
      SpinFor(1ms);
    }
    ++handled;
    return Outcome::Done();
  });
  ASSERT_NE(bus, nullptr);
  // Each round holds one worker, gives the other a slow event, queues a
  // second one while it runs, and commits a last event after a delay that
  // varies from round to round: it lands while the queued one waits
  // unclaimed (its wake-up is then deferred), as it is claimed, or after.
  // Every commit must reach a worker without the idle poll.
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    const std::string n = std::to_string(round);
    (void)CommitEvent(*bus, "held-" + n);
    ASSERT_TRUE(gate.WaitForWaiting(1)) << round;
    (void)CommitEvent(*bus, "slow-" + n);
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (slow_started.load() != 2 * round + 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_EQ(slow_started.load(), 2 * round + 1) << round;
    (void)CommitEvent(*bus, "slow-queued-" + n);
    SpinFor(std::chrono::microseconds(10 * (round % 40)));
    (void)CommitEvent(*bus, "free-" + n);
    ASSERT_TRUE(testing::Eventually([&] { return handled.load() == 4 * round + 3; })) << round;
    gate.ReleaseOne();
    ASSERT_TRUE(testing::Eventually([&] { return handled.load() == 4 * round + 4; })) << round;
  }
  ASSERT_TRUE(bus->WaitIdle(kWait).ok());
}

// Whether the outbox of the bus running in `dir` holds no event, as a
// secondary instance reads it.
bool OutboxIsEmpty(const TempDir& dir) {
  storage::OpenOptions o;
  o.dir = dir.path();
  o.mode = storage::OpenOptions::Mode::kSecondary;
  o.secondary_dir = dir.root() + "/secondary";
  std::unique_ptr<storage::Db> db;
  if (!storage::Db::Open(o, &db).ok()) return false;
  bool empty = true;
  const Status scanned = db->ScanOutbox(0, 1, [&](uint64_t, std::string_view) { return empty = false; });
  return scanned.ok() && empty;
}

// Opens a bus with one subscriber, which handles a burst of 100 events.
void StartAfterABurst(const Options& opt, std::unique_ptr<Bus>* bus) {
  *bus = testing::OpenBus(opt);
  ASSERT_NE(*bus, nullptr);
  SubscriberOptions sub;
  sub.name = "projection";
  sub.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  ASSERT_TRUE((*bus)->Subscribe(std::move(sub)).ok());
  ASSERT_TRUE((*bus)->Start().ok());
  for (int i = 0; i < 100; ++i) CommitEvent(**bus, "order-" + std::to_string(i % 7));
  ASSERT_TRUE((*bus)->WaitIdle(std::chrono::seconds(20)).ok());
}

// Retaining handled events by age, an idle bus sleeps until the oldest of
// them is old enough to go, and then trims them: it does not judge their
// age again every trim_interval.
TEST_F(DispatcherTest, AnIdleBusRetainingByAgeSleepsUntilTheOldestAgesOut) {
  TempDir dir;
  Options opt = testing::TestOptions(dir);
  opt.trim_interval = 50ms;
  opt.retain_for = 4s;
  std::unique_ptr<Bus> bus;
  ASSERT_NO_FATAL_FAILURE(StartAfterABurst(opt, &bus));
  std::this_thread::sleep_for(500ms);  // the checkpoint, and the timed trim that keeps them all
  const uint64_t before = walbus::tools::BusThreadsWakeups();
  std::this_thread::sleep_for(2s);  // all 100 are younger than 4 s throughout
  const uint64_t wakeups = walbus::tools::BusThreadsWakeups() - before;
  EXPECT_LE(wakeups, 4u) << "judging the age every 50 ms wakes 40 times in 2 s";
  EXPECT_FALSE(OutboxIsEmpty(dir)) << "retained while younger than 4 s";
  EXPECT_TRUE(testing::Eventually([&] { return OutboxIsEmpty(dir); }, 20s)) << "trimmed once old enough";
}

// Idle means asleep: with nothing to do, the bus's threads (dispatcher,
// workers, RocksDB's) together wake at most about once a second. A
// fixed-rate poll shows here as tens of wake-ups a second.
TEST_F(DispatcherTest, AnIdleBusSleeps) {
  TempDir dir;
  Options opt = testing::TestOptions(dir);
  opt.trim_interval = 200ms;
  std::unique_ptr<Bus> bus;
  ASSERT_NO_FATAL_FAILURE(StartAfterABurst(opt, &bus));
  // What follows the last event: its checkpoint (5 ms) and its trim (200 ms).
  std::this_thread::sleep_for(1s);
  const uint64_t before = walbus::tools::BusThreadsWakeups();
  constexpr auto kIdle = 5s;
  std::this_thread::sleep_for(kIdle);
  const uint64_t wakeups = walbus::tools::BusThreadsWakeups() - before;
  RecordProperty("wakeups", std::to_string(wakeups));
  EXPECT_LE(wakeups, 5u) << "wake-ups in " << kIdle.count() << " s of an idle bus";

  // And asleep, it still wakes for work at once.
  const Receipt r = CommitEvent(*bus, "order-after-idle");
  std::vector<DeliveryState> states;
  EXPECT_TRUE(bus->WaitHandled(r, {}, kWait, &states).ok());
}

// Subscribers catching up over the same stored events share one read of
// the outbox: a stored event that fails verification is quarantined once,
// not once per subscriber, and each subscriber still gets every other
// event once.
TEST_F(DispatcherTest, SubscribersCatchingUpTogetherShareTheirReadsOfTheOutbox) {
  TempDir dir;
  constexpr int kEvents = 300;
  const std::vector<std::string> names = {"projection", "audit", "mailer"};
  uint64_t unreadable_seq = 0;
  auto subscribe_all = [&](Bus& bus, std::mutex* mu, std::map<std::string, std::multiset<uint64_t>>* seen) {
    for (const std::string& name : names) {
      SubscriberOptions sub;
      sub.name = name;
      sub.handler = [name, mu, seen](const Event& e, HandlerContext&) {
        if (seen != nullptr) {
          std::lock_guard<std::mutex> lock(*mu);
          (*seen)[name].insert(e.seq);
        }
        return Outcome::Done();
      };
      ASSERT_TRUE(bus.Subscribe(std::move(sub)).ok());
    }
  };
  {
    // Registered but never started: the events wait in the outbox.
    std::unique_ptr<Bus> bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    subscribe_all(*bus, nullptr, nullptr);
    for (int i = 0; i < kEvents; ++i) {
      const Receipt r = CommitEvent(*bus, "subject-" + std::to_string(i % 7));
      if (i == kEvents / 2) unreadable_seq = r.first_seq;
    }
    ASSERT_TRUE(bus->Close().ok());
  }
  {
    storage::OpenOptions options;
    options.dir = dir.path();
    std::unique_ptr<storage::Db> db;
    ASSERT_TRUE(storage::Db::Open(options, &db).ok());
    storage::Batch batch;
    batch.Put(db->cf(storage::Cf::kOutbox), storage::OutboxKey(unreadable_seq), "not an envelope");
    ASSERT_TRUE(batch.Commit(db.get(), true).ok());
  }
  std::mutex mu;
  std::map<std::string, std::multiset<uint64_t>> seen;
  std::unique_ptr<Bus> bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  subscribe_all(*bus, &mu, &seen);
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(testing::Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& name : names) {
      if (seen[name].size() < kEvents - 1) return false;
    }
    return true;
  }));
  ASSERT_TRUE(bus->WaitCaughtUp(kWait).ok());
  std::lock_guard<std::mutex> lock(mu);
  for (const std::string& name : names) {
    const std::multiset<uint64_t>& got = seen[name];
    EXPECT_EQ(got.size(), static_cast<size_t>(kEvents - 1)) << name;
    EXPECT_EQ(got.count(unreadable_seq), 0u) << name;
    EXPECT_EQ(std::set<uint64_t>(got.begin(), got.end()).size(), got.size()) << name << " got an event twice";
  }
  EXPECT_EQ(bus->Stats().quarantined, 1u);
}

}  // namespace
}  // namespace walbus
