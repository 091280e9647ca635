// Subscriber registrations through the public API (bus/api/
// bus_subscribers.cc): where a new subscriber starts, and what removing
// one takes away, against a real RocksDB.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "storage/db.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using testing::OpenBus;
using testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";

void Publish(Bus& bus, int n) {
  for (int i = 0; i < n; ++i) {
    Transaction tx = bus.Begin();
    EventSpec e;
    e.type = kType;
    e.subject = "order-" + std::to_string(i);
    e.data = "x";
    ASSERT_TRUE(tx.Publish(std::move(e)).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
}

// A subscriber that records the seqs it handled.
struct Recorder {
  SubscriberOptions Options(std::string name, StartPosition start = {}) {
    SubscriberOptions s;
    s.name = std::move(name);
    s.start = start;
    s.handler = [this](const Event& e, HandlerContext&) {
      std::lock_guard<std::mutex> lock(mu);
      seqs.push_back(e.seq);
      return Outcome::Done();
    };
    return s;
  }
  // In seq order: events of different subjects may complete in any.
  std::vector<uint64_t> Seqs() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<uint64_t> sorted = seqs;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }
  std::mutex mu;
  std::vector<uint64_t> seqs;
};

SubscriberOptions Idle(std::string name) {
  SubscriberOptions s;
  s.name = std::move(name);
  s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  return s;
}

OperatorAction Operator(bool dry_run = false) { return OperatorAction{"ops", "subscribed by mistake", dry_run}; }

// Reads the stopped database directly.
struct Inspector {
  explicit Inspector(const std::string& dir) : db(testing::OpenStoppedDatabase(dir)) {}
  // The id the meta record gives `name`; 0 when it has none.
  uint32_t IdOf(const std::string& name) {
    std::string v;
    bool found = false;
    EXPECT_TRUE(db->Get(db->cf(storage::Cf::kMeta), storage::SubscriberMetaKey(name), &v, &found).ok());
    return found && v.size() == 12 ? storage::GetBe32(v) : 0;
  }
  // Records keyed by be32(subscriber id) first in `cf`.
  size_t RecordsOf(storage::Cf cf, uint32_t id) {
    std::string prefix;
    storage::PutBe32(&prefix, id);
    size_t n = 0;
    EXPECT_TRUE(db->Scan(cf, prefix, SIZE_MAX, [&](std::string_view, std::string_view) { return ++n, true; }).ok());
    return n;
  }
  size_t InboxRecordsOf(uint32_t id) {
    size_t n = 0;
    Status s = db->Scan(storage::Cf::kInbox, {}, SIZE_MAX, [&](std::string_view key, std::string_view) {
      uint32_t sub = 0;
      if (storage::ParseInboxKey(db->inbox_layout(), key, &sub) && sub == id) ++n;
      return true;
    });
    EXPECT_TRUE(s.ok());
    return n;
  }
  size_t OutboxSize() {
    size_t n = 0;
    EXPECT_TRUE(db->ScanOutbox(0, SIZE_MAX, [&](uint64_t, std::string_view) { return ++n, true; }).ok());
    return n;
  }
  std::unique_ptr<storage::Db> db;
};

TEST(BusSubscribersTest, AStartPositionChoosesTheFirstEventDelivered) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  o.retain_events = 1000;  // keep the history for the later starts
  auto bus = OpenBus(o);
  Publish(*bus, 5);
  Recorder now, oldest, at3;
  ASSERT_TRUE(bus->Subscribe(now.Options("now")).ok());
  ASSERT_TRUE(bus->Subscribe(oldest.Options("oldest", StartPosition::OldestRetained())).ok());
  ASSERT_TRUE(bus->Subscribe(at3.Options("at3", StartPosition::AtSeq(3))).ok());
  // Outside what the outbox holds: seq 0, and beyond the next one.
  Recorder refused;
  EXPECT_TRUE(bus->Subscribe(refused.Options("zero", StartPosition::AtSeq(0))).IsInvalidArgument());
  Status beyond = bus->Subscribe(refused.Options("beyond", StartPosition::AtSeq(7)));
  EXPECT_TRUE(beyond.IsInvalidArgument());
  EXPECT_NE(beyond.message().find("seq 1 to 6"), std::string::npos) << beyond.message();
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, 1);
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(now.Seqs(), (std::vector<uint64_t>{6}));
  EXPECT_EQ(oldest.Seqs(), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(at3.Seqs(), (std::vector<uint64_t>{3, 4, 5, 6}));
  ASSERT_TRUE(bus->Close().ok());

  // A known subscriber resumes after its checkpoint, whatever its start.
  auto again = OpenBus(o);
  Recorder resumed;
  ASSERT_TRUE(again->Subscribe(resumed.Options("now", StartPosition::OldestRetained())).ok());
  ASSERT_TRUE(again->Start().ok());
  Publish(*again, 1);
  ASSERT_TRUE(again->WaitIdle(10s).ok());
  EXPECT_EQ(resumed.Seqs(), (std::vector<uint64_t>{7}));
}

TEST(BusSubscribersTest, OldestRetainedStartsAtTheTrimmedFloor) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  o.retain_events = 3;
  o.trim_every_events = 1;
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Start().ok());
    Publish(*bus, 10);
    ASSERT_TRUE(bus->Close().ok());  // trims to the newest 3
  }
  ASSERT_EQ(Inspector(dir.path()).OutboxSize(), 3u);
  auto bus = OpenBus(o);
  Recorder oldest, trimmed;
  Status gone = bus->Subscribe(trimmed.Options("trimmed", StartPosition::AtSeq(2)));
  EXPECT_TRUE(gone.IsInvalidArgument());
  EXPECT_NE(gone.message().find("seq 8 to 11"), std::string::npos) << gone.message();
  ASSERT_TRUE(bus->Subscribe(oldest.Options("oldest", StartPosition::OldestRetained())).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  EXPECT_EQ(oldest.Seqs(), (std::vector<uint64_t>{8, 9, 10}));
}

TEST(BusSubscribersTest, RemovingASubscriberFreesWhatItHeld) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  o.trim_every_events = 1;
  uint32_t typo_id = 0, kept_id = 0;
  {
    // "typo" handles one event (an inbox record), dead-letters another,
    // then is never subscribed again: it holds the outbox.
    auto bus = OpenBus(o);
    SubscriberOptions typo = Idle("typo");
    typo.handler = [](const Event& e, HandlerContext&) { return e.seq == 2 ? Outcome::Reject("no") : Outcome::Done(); };
    ASSERT_TRUE(bus->Subscribe(std::move(typo)).ok());
    ASSERT_TRUE(bus->Subscribe(Idle("kept")).ok());
    ASSERT_TRUE(bus->Start().ok());
    Publish(*bus, 2);
    ASSERT_TRUE(bus->WaitIdle(10s).ok());
    EXPECT_TRUE(bus->RemoveSubscriber("typo", Operator()).status().IsBusy());  // active here
    ASSERT_TRUE(bus->Close().ok());
  }
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Subscribe(Idle("kept")).ok());
    ASSERT_TRUE(bus->Start().ok());
    Publish(*bus, 3);
    ASSERT_TRUE(bus->WaitIdle(10s).ok());
    ASSERT_TRUE(bus->Close().ok());
    Inspector db(dir.path());
    typo_id = db.IdOf("typo");
    kept_id = db.IdOf("kept");
    ASSERT_NE(typo_id, 0u);
    EXPECT_EQ(db.OutboxSize(), 3u);  // held at typo's checkpoint
    EXPECT_EQ(db.RecordsOf(storage::Cf::kDeadLetters, typo_id), 1u);
    EXPECT_EQ(db.InboxRecordsOf(typo_id), 2u);
  }
  auto bus = OpenBus(o);
  EXPECT_TRUE(bus->RemoveSubscriber("nobody", Operator()).status().IsInvalidArgument());
  EXPECT_TRUE(bus->RemoveSubscriber("typo", OperatorAction{}).status().IsInvalidArgument());
  Result<ActionReport> dry = bus->RemoveSubscriber("typo", Operator(/*dry_run=*/true));
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_EQ(dry->action_id, 0u);
  EXPECT_EQ(dry->seqs, (std::vector<uint64_t>{2}));
  Result<ActionReport> removed = bus->RemoveSubscriber("typo", Operator());
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_GT(removed->action_id, 0u);
  EXPECT_EQ(removed->seqs, (std::vector<uint64_t>{2}));
  EXPECT_TRUE(bus->Pending("typo", 0).status().IsInvalidArgument());
  EXPECT_TRUE(bus->RemoveSubscriber("typo", Operator()).status().IsInvalidArgument());
  ASSERT_TRUE(bus->Subscribe(Idle("kept")).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, 1);  // a commit: the trim runs without typo
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  ASSERT_TRUE(bus->Close().ok());
  bus.reset();
  Inspector db(dir.path());
  EXPECT_EQ(db.IdOf("typo"), 0u);
  EXPECT_EQ(db.IdOf("kept"), kept_id);
  EXPECT_EQ(db.OutboxSize(), 0u);
  for (storage::Cf cf : {storage::Cf::kCheckpoints, storage::Cf::kRetries, storage::Cf::kDeadLetters}) {
    EXPECT_EQ(db.RecordsOf(cf, typo_id), 0u) << storage::CfName(cf);
  }
  EXPECT_EQ(db.InboxRecordsOf(typo_id), 0u);
  std::string action;
  bool found = false;
  ASSERT_TRUE(
      db.db->Get(db.db->cf(storage::Cf::kReplays), storage::ActionKey(removed->action_id), &action, &found).ok());
  ASSERT_TRUE(found);
  EXPECT_NE(action.find("\"action\":\"subscriber-remove\""), std::string::npos) << action;
  EXPECT_NE(action.find("\"operator\":\"ops\""), std::string::npos) << action;
}

TEST(BusSubscribersTest, ARemovedSubscribersIdIsNeverGivenAgain) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Subscribe(Idle("first")).ok());
    ASSERT_TRUE(bus->Subscribe(Idle("typo")).ok());  // the highest id
    ASSERT_TRUE(bus->Close().ok());
  }
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->RemoveSubscriber("typo", Operator()).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Subscribe(Idle("typo")).ok());  // the same name: a new subscriber
    ASSERT_TRUE(bus->Close().ok());
  }
  Inspector db(dir.path());
  EXPECT_EQ(db.IdOf("first"), 1u);
  EXPECT_EQ(db.IdOf("typo"), 3u);
}

TEST(BusSubscribersTest, AnOpenFinishesARemovalACrashCutShort) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  uint32_t id = 0;
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Subscribe(Idle("typo")).ok());
    ASSERT_TRUE(bus->Start().ok());
    Publish(*bus, 3);
    ASSERT_TRUE(bus->WaitIdle(10s).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->RemoveSubscriber("typo", Operator()).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  {
    // As a crash after the removal's commit leaves it: the inbox records
    // back, the tombstone not marked done.
    Inspector db(dir.path());
    std::string tombstone;
    bool found = false;
    for (uint32_t candidate = 1; candidate < 4 && !found; ++candidate) {
      ASSERT_TRUE(
          db.db->Get(db.db->cf(storage::Cf::kMeta), storage::RemovedSubscriberKey(candidate), &tombstone, &found).ok());
      id = candidate;
    }
    ASSERT_TRUE(found);
    ASSERT_EQ(tombstone.size(), 9u);
    EXPECT_EQ(tombstone[8], 1);
    tombstone[8] = 0;
    storage::Batch batch;
    batch.Put(db.db->cf(storage::Cf::kMeta), storage::RemovedSubscriberKey(id), tombstone);
    const EventId event = EventId::Generate();
    batch.Put(db.db->cf(storage::Cf::kInbox), storage::InboxKey(db.db->inbox_layout(), id, storage::IdBytes(event)),
              storage::InboxValue(1, 1, 1));
    ASSERT_TRUE(batch.Commit(db.db.get(), /*sync=*/true).ok());
    EXPECT_EQ(db.InboxRecordsOf(id), 1u);
  }
  { auto bus = OpenBus(o); }
  Inspector db(dir.path());
  EXPECT_EQ(db.InboxRecordsOf(id), 0u);
}

TEST(BusSubscribersTest, ASubscriberWithARunningReplayIsNotRemoved) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  o.retain_events = 100;
  {
    auto bus = OpenBus(o);
    ASSERT_TRUE(bus->Subscribe(Idle("typo")).ok());
    ASSERT_TRUE(bus->Start().ok());
    Publish(*bus, 2);
    ASSERT_TRUE(bus->WaitIdle(10s).ok());
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = OpenBus(o);
  ReplayRequest replay;
  replay.subscriber = "typo";
  replay.action = Operator();
  Result<ReplayReport> recorded = bus->Replay(replay);  // runs once typo is active again
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  Status busy = bus->RemoveSubscriber("typo", Operator()).status();
  EXPECT_TRUE(busy.IsBusy()) << busy.ToString();
  ASSERT_TRUE(bus->CancelReplay(recorded->replay_id, Operator()).ok());
  EXPECT_TRUE(bus->RemoveSubscriber("typo", Operator()).ok());
}

}  // namespace
}  // namespace walbus
