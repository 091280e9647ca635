// The operator's actions (bus/api/operator_actions.cc) through
// Bus::Operator(), against a real RocksDB: removing a subscriber and what
// it takes away, the records every action leaves under one sequence of
// ids, what every action refuses. Dead letters and replays have their
// their own tests (tests/dispatch/handler_runner_test.cc, replay_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
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

void Publish(Bus& bus, int n) { testing::PublishEach(bus, kType, n); }

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
  std::unique_ptr<storage::Db> db;
};

TEST(OperatorActionsTest, RemovingASubscriberFreesWhatItHeld) {
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
    EXPECT_TRUE(bus->Operator().RemoveSubscriber("typo", Operator()).status().IsBusy());  // active here
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
    EXPECT_EQ(testing::OutboxSize(*db.db), 3u);  // held at typo's checkpoint
    EXPECT_EQ(db.RecordsOf(storage::Cf::kDeadLetters, typo_id), 1u);
    EXPECT_EQ(db.InboxRecordsOf(typo_id), 2u);
  }
  auto bus = OpenBus(o);
  EXPECT_TRUE(bus->Operator().RemoveSubscriber("nobody", Operator()).status().IsInvalidArgument());
  EXPECT_TRUE(bus->Operator().RemoveSubscriber("typo", OperatorAction{}).status().IsInvalidArgument());
  Result<ActionReport> dry = bus->Operator().RemoveSubscriber("typo", Operator(/*dry_run=*/true));
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_EQ(dry->action_id, 0u);
  EXPECT_EQ(dry->seqs, (std::vector<uint64_t>{2}));
  Result<ActionReport> removed = bus->Operator().RemoveSubscriber("typo", Operator());
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_GT(removed->action_id, 0u);
  EXPECT_EQ(removed->seqs, (std::vector<uint64_t>{2}));
  EXPECT_TRUE(bus->Pending("typo", 0).status().IsInvalidArgument());
  EXPECT_TRUE(bus->Operator().RemoveSubscriber("typo", Operator()).status().IsInvalidArgument());
  ASSERT_TRUE(bus->Subscribe(Idle("kept")).ok());
  ASSERT_TRUE(bus->Start().ok());
  Publish(*bus, 1);  // a commit: the trim runs without typo
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  ASSERT_TRUE(bus->Close().ok());
  bus.reset();
  Inspector db(dir.path());
  EXPECT_EQ(db.IdOf("typo"), 0u);
  EXPECT_EQ(db.IdOf("kept"), kept_id);
  EXPECT_EQ(testing::OutboxSize(*db.db), 0u);
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

TEST(OperatorActionsTest, ARemovedSubscribersIdIsNeverGivenAgain) {
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
    ASSERT_TRUE(bus->Operator().RemoveSubscriber("typo", Operator()).ok());
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

TEST(OperatorActionsTest, AnOpenFinishesARemovalACrashCutShort) {
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
    ASSERT_TRUE(bus->Operator().RemoveSubscriber("typo", Operator()).ok());
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

TEST(OperatorActionsTest, ASubscriberWithARunningReplayIsNotRemoved) {
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
  Result<ReplayReport> recorded = bus->Operator().StartReplay(replay);  // runs once typo is active again
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  Status busy = bus->Operator().RemoveSubscriber("typo", Operator()).status();
  EXPECT_TRUE(busy.IsBusy()) << busy.ToString();
  ASSERT_TRUE(bus->Operator().CancelReplay(recorded->replay_id, Operator()).ok());
  EXPECT_TRUE(bus->Operator().RemoveSubscriber("typo", Operator()).ok());
}

// The record of action `id`, as walbus.replays holds it ("" when none).
std::string ActionRecordText(const std::string& dir, uint64_t id) {
  std::unique_ptr<storage::Db> db = testing::OpenStoppedDatabase(dir);
  std::string value;
  bool found = false;
  EXPECT_TRUE(db->Get(db->cf(storage::Cf::kReplays), storage::ActionKey(id), &value, &found).ok());
  return found ? value : std::string();
}

TEST(OperatorActionsTest, ActionsOfEveryKindShareOneSequenceOfIdsAndRecordWhoAndWhy) {
  TempDir dir;
  EventId scheduled;
  {
    auto bus = OpenBus(testing::TestOptions(dir));
    ASSERT_TRUE(bus->Subscribe(Idle("typo")).ok());
    ASSERT_TRUE(bus->Subscribe(Idle("kept")).ok());
    EventSpec later;
    later.type = kType;
    later.subject = "order-1";
    later.deliver_after = 1h;
    scheduled = testing::PublishAlone(*bus, later);
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = OpenBus(testing::TestOptions(dir));
  OperatorActions& actions = bus->Operator();
  // A dry run takes no id.
  Result<uint64_t> dry = actions.CancelScheduled(scheduled, Operator(/*dry_run=*/true));
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_EQ(*dry, 0u);
  Result<uint64_t> cancelled = actions.CancelScheduled(scheduled, Operator());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  Result<ActionReport> removed = actions.RemoveSubscriber("typo", Operator());
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  ReplayRequest replay;
  replay.subscriber = "kept";
  replay.action = Operator();
  Result<ReplayReport> recorded = actions.StartReplay(replay);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_EQ(*cancelled, 1u);
  EXPECT_EQ(removed->action_id, 2u);
  EXPECT_EQ(recorded->replay_id, 3u);
  Result<ReplayReport> read = actions.Replay(3);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->operator_name, "ops");
  EXPECT_NE(read->started, std::chrono::system_clock::time_point{});
  EXPECT_TRUE(actions.Replay(4).status().IsNotFound());
  ASSERT_TRUE(bus->Close().ok());
  const std::string cancel = ActionRecordText(dir.path(), 1);
  EXPECT_NE(cancel.find("\"action\":\"scheduled-cancel\",\"operator\":\"ops\",\"reason\":\"subscribed by mistake\""),
            std::string::npos)
      << cancel;
  EXPECT_NE(cancel.find(scheduled.ToString()), std::string::npos) << cancel;
  EXPECT_NE(ActionRecordText(dir.path(), 2).find("\"action\":\"subscriber-remove\""), std::string::npos);
}

TEST(OperatorActionsTest, EveryActionWantsAnOperatorAndAReasonAndChangesNothingWithout) {
  TempDir dir;
  auto bus = OpenBus(testing::TestOptions(dir));
  ASSERT_TRUE(bus->Subscribe(Idle("kept")).ok());
  Publish(*bus, 1);
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(10s).ok());
  OperatorActions& actions = bus->Operator();
  const OperatorAction nobody;
  const OperatorAction no_reason{"ops", "", false};
  for (const OperatorAction& action : {nobody, no_reason}) {
    const DeadLetterSelection all{"kept", {}, "", ""};
    EXPECT_TRUE(actions.RedriveDeadLetters(all, action).status().IsInvalidArgument());
    EXPECT_TRUE(actions.SkipDeadLetters(all, action).status().IsInvalidArgument());
    EXPECT_TRUE(actions.PurgeDeadLetters(all, action).status().IsInvalidArgument());
    EXPECT_TRUE(actions.RemoveSubscriber("kept", action).status().IsInvalidArgument());
    ReplayRequest replay;
    replay.subscriber = "kept";
    replay.action = action;
    EXPECT_TRUE(actions.StartReplay(replay).status().IsInvalidArgument());
    EXPECT_TRUE(actions.CancelReplay(1, action).IsInvalidArgument());
    EXPECT_TRUE(actions.CancelScheduled(EventId::Generate(), action).status().IsInvalidArgument());
    EXPECT_TRUE(actions.AbandonProcess("sale", "order-1", action).status().IsInvalidArgument());
  }
  ASSERT_TRUE(bus->Close().ok());
  std::unique_ptr<storage::Db> db = testing::OpenStoppedDatabase(dir.path());
  size_t records = 0;
  ASSERT_TRUE(db->Scan(storage::Cf::kReplays, {}, SIZE_MAX, [&](std::string_view, std::string_view) {
                  ++records;
                  return true;
                }).ok());
  EXPECT_EQ(records, 0u);
}

TEST(OperatorActionsTest, AfterCloseEveryActionIsClosed) {
  TempDir dir;
  auto bus = OpenBus(testing::TestOptions(dir));
  ASSERT_TRUE(bus->Subscribe(Idle("kept")).ok());
  ASSERT_TRUE(bus->Close().ok());
  OperatorActions& actions = bus->Operator();
  const DeadLetterSelection all{"kept", {}, "", ""};
  EXPECT_TRUE(actions.RedriveDeadLetters(all, Operator()).status().IsClosed());
  EXPECT_TRUE(actions.PurgeDeadLetters(all, Operator()).status().IsClosed());
  EXPECT_TRUE(actions.RemoveSubscriber("kept", Operator()).status().IsClosed());
  ReplayRequest replay;
  replay.subscriber = "kept";
  replay.action = Operator();
  EXPECT_TRUE(actions.StartReplay(replay).status().IsClosed());
  EXPECT_TRUE(actions.Replay(1).status().IsClosed());
  EXPECT_TRUE(actions.CancelReplay(1, Operator()).IsClosed());
  EXPECT_TRUE(actions.CancelScheduled(EventId::Generate(), Operator()).status().IsClosed());
  EXPECT_TRUE(actions.AbandonProcess("sale", "order-1", Operator()).status().IsClosed());
}

}  // namespace
}  // namespace walbus
