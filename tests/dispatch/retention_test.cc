// bus/dispatch/retention.cc: outbox retention for replay (Options::retain_*) and the
// inbox window (Options::inbox_window), against a real database.
#include "bus/dispatch/retention.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "storage/db.h"
#include "storage/keys.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::ManualClock;
using testing::TempDir;

// The seqs the outbox holds, read from a closed database.
std::vector<uint64_t> OutboxSeqs(const std::string& dir) {
  std::unique_ptr<storage::Db> db;
  storage::OpenOptions o;
  o.dir = dir;
  o.create_if_missing = false;
  EXPECT_TRUE(storage::Db::Open(o, &db).ok());
  std::vector<uint64_t> seqs;
  if (db == nullptr) return seqs;
  EXPECT_TRUE(db->ScanOutbox(0, SIZE_MAX, [&](uint64_t seq, std::string_view) {
                  seqs.push_back(seq);
                  return true;
                }).ok());
  return seqs;
}

Options RetentionOptions(const TempDir& dir) {
  Options o;
  o.dir = dir.path();
  o.durability = Durability::kBuffered;
  o.trim_every_events = 1;
  o.trim_interval = 10ms;
  o.checkpoint_interval = 5ms;
  return o;
}

// Publishes `n` events of `payload_bytes` each and waits for `bus`'s
// subscribers to handle them.
void PublishAndDrain(Bus& bus, int n, size_t payload_bytes = 16) {
  for (int i = 0; i < n; ++i) {
    Transaction tx = bus.Begin();
    ASSERT_TRUE(tx.Publish({.type = "orders.order-placed.v1",
                            .subject = "order-" + std::to_string(i % 7),
                            .data = std::string(payload_bytes, 'x')})
                    .ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(bus.WaitIdle(30s).ok());
}

SubscriberOptions Counting(std::atomic<int>* handled) {
  SubscriberOptions s;
  s.name = "projection";
  s.handler = [handled](const Event&, HandlerContext&) {
    handled->fetch_add(1);
    return Outcome::Done();
  };
  return s;
}

TEST(RetentionTest, WithoutALimitHandledEventsAreRemoved) {
  TempDir dir;
  std::atomic<int> handled{0};
  {
    auto bus = testing::OpenBus(RetentionOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Counting(&handled)).ok());
    ASSERT_TRUE(bus->Start().ok());
    PublishAndDrain(*bus, 300);
    ASSERT_TRUE(bus->Close().ok());
  }
  EXPECT_EQ(handled.load(), 300);
  EXPECT_TRUE(OutboxSeqs(dir.path()).empty());
}

TEST(RetentionTest, ByCountKeepsTheNewestHandledEvents) {
  TempDir dir;
  std::atomic<int> handled{0};
  Options o = RetentionOptions(dir);
  o.retain_events = 100;
  {
    auto bus = testing::OpenBus(o);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Counting(&handled)).ok());
    ASSERT_TRUE(bus->Start().ok());
    PublishAndDrain(*bus, 1000);
    ASSERT_TRUE(bus->Close().ok());
  }
  std::vector<uint64_t> seqs = OutboxSeqs(dir.path());
  ASSERT_EQ(seqs.size(), 100u);
  EXPECT_EQ(seqs.front(), 901u);
  EXPECT_EQ(seqs.back(), 1000u);
}

TEST(RetentionTest, ByCountDoesNotHoldUnhandledEventsBack) {
  // A subscriber that has not passed events keeps them whatever the
  // retention: retention only decides about handled ones.
  TempDir dir;
  Options o = RetentionOptions(dir);
  o.retain_events = 10;
  {
    auto bus = testing::OpenBus(o);
    ASSERT_NE(bus, nullptr);
    std::atomic<int> handled{0};
    ASSERT_TRUE(bus->Subscribe(Counting(&handled)).ok());
    // Registered, never started: nothing is handled.
    for (int i = 0; i < 50; ++i) {
      Transaction tx = bus->Begin();
      ASSERT_TRUE(tx.Publish({.type = "orders.order-placed.v1", .subject = "o", .data = "{}"}).ok());
      ASSERT_TRUE(tx.Commit().ok());
    }
    ASSERT_TRUE(bus->Close().ok());
  }
  EXPECT_EQ(OutboxSeqs(dir.path()).size(), 50u);
}

TEST(RetentionTest, ByAgeKeepsEventsYoungerThanTheLimit) {
  TempDir dir;
  auto clock = std::make_shared<ManualClock>();
  Options o = RetentionOptions(dir);
  o.clock = clock;
  o.retain_for = 1h;
  std::atomic<int> handled{0};
  {
    auto bus = testing::OpenBus(o);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Counting(&handled)).ok());
    ASSERT_TRUE(bus->Start().ok());
    PublishAndDrain(*bus, 200);  // seqs 1..200, at t0
    clock->Advance(2h);
    PublishAndDrain(*bus, 50);  // seqs 201..250, two hours later
    clock->Advance(30min);      // the first 200 are 2.5 h old, the rest 0.5 h
    ASSERT_TRUE(bus->Close().ok());
  }
  std::vector<uint64_t> seqs = OutboxSeqs(dir.path());
  ASSERT_EQ(seqs.size(), 50u);
  EXPECT_EQ(seqs.front(), 201u);
}

TEST(RetentionTest, ByBytesKeepsAboutTheNewestThatFit) {
  TempDir dir;
  Options o = RetentionOptions(dir);
  o.retain_bytes = 256 << 10;
  std::atomic<int> handled{0};
  {
    auto bus = testing::OpenBus(o);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Subscribe(Counting(&handled)).ok());
    ASSERT_TRUE(bus->Start().ok());
    PublishAndDrain(*bus, 4000, 1024);  // about 4 MiB of events
    ASSERT_TRUE(bus->Close().ok());
  }
  std::vector<uint64_t> seqs = OutboxSeqs(dir.path());
  // About 230 events of 1 KiB and their envelope fit in 256 KiB; what is
  // kept is the newest.
  ASSERT_FALSE(seqs.empty());
  EXPECT_EQ(seqs.back(), 4000u);
  EXPECT_LE(seqs.size(), 256u);
  EXPECT_GE(seqs.size(), 200u);
  for (size_t i = 1; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], seqs[i - 1] + 1) << "kept events are contiguous";
}

TEST(RetentionTest, InvalidLimitsAreRefused) {
  TempDir dir;
  Options o = RetentionOptions(dir);
  o.retain_for = -1ms;
  std::unique_ptr<Bus> bus;
  EXPECT_TRUE(Bus::Open(o, &bus).IsInvalidArgument());
  o.retain_for = 0ms;
  o.inbox_window = -5ms;
  EXPECT_TRUE(Bus::Open(o, &bus).IsInvalidArgument());
}

TEST(InboxWindowTest, DropsOnlyOldRecordsAtOrBelowTheCheckpoint) {
  ManualClock clock;
  internal::InboxWindow window(1h, &clock);
  const uint64_t now_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch()).count());
  const uint64_t old_ms = now_ms - 2 * 3600 * 1000;
  EXPECT_FALSE(window.MayDrop(7, 5, old_ms)) << "an unknown subscriber's records are kept";
  window.SetCheckpoint(7, 100);
  EXPECT_TRUE(window.MayDrop(7, 100, old_ms));
  EXPECT_TRUE(window.MayDrop(7, 1, old_ms));
  EXPECT_FALSE(window.MayDrop(7, 101, old_ms)) << "above the checkpoint: may be redelivered after a crash";
  EXPECT_FALSE(window.MayDrop(7, 50, now_ms - 60 * 1000)) << "inside the window";
  EXPECT_FALSE(window.MayDrop(8, 1, old_ms)) << "another subscriber";
  clock.StepWall(-3h);  // the wall clock stepped back: everything is young
  EXPECT_FALSE(window.MayDrop(7, 1, old_ms));
  window.Forget(7);  // removed: every record of it goes, young or above
  EXPECT_TRUE(window.MayDrop(7, 1, now_ms));
  EXPECT_TRUE(window.MayDrop(7, 1000, old_ms));
  EXPECT_FALSE(window.MayDrop(8, 1, old_ms)) << "another subscriber";
}

// Writes inbox records for subscriber 1: seqs 1..n, handled at `handled_ms`.
void WriteInbox(storage::Db* db, uint64_t n, uint64_t handled_ms) {
  for (uint64_t seq = 1; seq <= n; ++seq) {
    std::string id(16, '\0');
    for (int b = 0; b < 8; ++b) id[15 - b] = static_cast<char>((seq >> (8 * b)) & 0xFF);
    storage::Batch batch;
    batch.Put(db->cf(storage::Cf::kInbox), storage::InboxKey(db->inbox_layout(), 1, id),
              storage::InboxValue(seq, handled_ms, 1));
    ASSERT_TRUE(batch.Commit(db, false).ok());
  }
}

size_t CountInbox(const storage::Db& db) {
  size_t n = 0;
  EXPECT_TRUE(db.Scan(storage::Cf::kInbox, {}, SIZE_MAX, [&](std::string_view, std::string_view) {
                  ++n;
                  return true;
                }).ok());
  return n;
}

// On databases of either inbox layout (format 1 puts the subscriber
// first): the filter reads the subscriber from where the format puts it.
class InboxWindowCompactionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(InboxWindowCompactionTest, CompactionsDropOnlyWhatTheWindowAllows) {
  // Records above the checkpoint are what a redelivery after a crash
  // looks up: a compaction never takes them, however old.
  TempDir dir;
  testing::CreateDatabaseOfFormat(dir.path(), GetParam());
  ManualClock clock;
  auto window = std::make_shared<internal::InboxWindow>(1h, &clock);
  window->SetCheckpoint(1, 60);
  storage::OpenOptions o;
  o.dir = dir.path();
  o.inbox_retention = window;
  o.upgrade_format = false;
  std::unique_ptr<storage::Db> db;
  ASSERT_TRUE(storage::Db::Open(o, &db).ok());
  const uint64_t now_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch()).count());
  WriteInbox(db.get(), 100, now_ms - 3 * 3600 * 1000);
  ASSERT_EQ(CountInbox(*db), 100u);
  ASSERT_TRUE(db->Compact(storage::Cf::kInbox).ok());
  EXPECT_EQ(CountInbox(*db), 40u) << "seqs 61..100 are above the checkpoint";
  window->SetCheckpoint(1, 100);
  clock.StepWall(-150min);  // now they are 30 minutes old: inside the window
  ASSERT_TRUE(db->Compact(storage::Cf::kInbox).ok());
  EXPECT_EQ(CountInbox(*db), 40u);
}

INSTANTIATE_TEST_SUITE_P(Formats, InboxWindowCompactionTest, ::testing::ValuesIn(testing::ReadableFormats()),
                         testing::FormatName);

}  // namespace
}  // namespace walbus
