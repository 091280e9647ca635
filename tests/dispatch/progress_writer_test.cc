// bus/dispatch/progress_writer.cc: what the dispatcher makes durable of
// delivery (checkpoints, horizons, pause and clean-stop records, trims),
// and when it asks to be woken for it. Against a real database, without a
// Bus, on a clock the test moves.
#include "bus/dispatch/progress_writer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "storage/keys.h"
#include "storage/records.h"
#include "tests/storage_harness.h"
#include "tests/test_util.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using internal::MutexLock;
using internal::ProgressWriter;
using storage::CheckpointField;
using testing::TempDir;

constexpr uint32_t kSubscriberId = 3;

class ProgressWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(storage_.opened().ok()) << storage_.opened().ToString();
    SubscriberOptions o;
    o.name = "progress";
    o.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
    subs_.push_back(std::make_shared<internal::Subscriber>(std::move(o), kSubscriberId, internal::DurableCounters{}));
    MutexLock lock(&registry_.mu);
    registry_.by_name["progress"].id = kSubscriberId;
    writer_.Start();
  }

  internal::ProgressWriterConfig Config() {
    return internal::ProgressWriterConfig{.checkpoint_interval = 100ms,
                                          .trim_interval = 1s,
                                          .trim_every_events = 1000,
                                          .retention = {},
                                          .inbox_window = nullptr,
                                          .disk_budget = &budget_,
                                          .max_in_flight_per_subscriber = 16,
                                          .max_payload_bytes = 1 << 20,
                                          .trimmed_below = 1,
                                          .clock = &clock_,
                                          .log = &log_};
  }

  // Completes seqs 1..n for the subscriber, in memory (as deliveries do).
  void CompleteUpTo(uint64_t n) {
    internal::Subscriber& sub = *subs_[0];
    for (uint64_t seq = sub.progress.next(); seq <= n; ++seq) {
      sub.progress.Fetched(seq);
      sub.progress.Complete(seq);
    }
  }

  std::optional<uint64_t> StoredField(CheckpointField field) {
    std::optional<std::string> v =
        storage_.Read(storage::Cf::kCheckpoints, storage::CheckpointKey(kSubscriberId, field));
    if (!v) return std::nullopt;
    EXPECT_EQ(v->size(), 8u);
    return storage::GetBe64(*v);
  }

  // Commits n events, seqs 1..n (their bytes do not matter to trimming by
  // count).
  void FillOutbox(uint64_t n) {
    internal::WriteSet writes;
    for (uint64_t i = 0; i < n; ++i) {
      writes.events.push_back(std::make_shared<Event>());
      writes.envelopes.push_back("event");
    }
    ASSERT_TRUE(storage_.committer()->CommitOne(&writes, false).ok());
    ASSERT_EQ(storage_.committer()->last_seq(), n);
  }

  TempDir dir_;
  testing::StorageHarness storage_{dir_.path(), {}};
  ManualClock clock_;
  internal::BusLog log_{nullptr, false};
  internal::Registry registry_;
  ProgressWriter::Subscribers subs_;
  internal::DiskBudget budget_{storage_.db(), 0, 1, 0};
  ProgressWriter writer_{storage_.db(), storage_.committer(), &registry_, Config()};
};

TEST_F(ProgressWriterTest, ACheckpointIsWrittenWhenDueAndOnlyWhenItMoved) {
  EXPECT_FALSE(writer_.NextDueMoment(subs_).has_value()) << "nothing moved: nothing to wake for";
  CompleteUpTo(5);
  const auto due = writer_.NextDueMoment(subs_);
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(*due, clock_.Now() + 100ms);

  writer_.Checkpoint(subs_, /*force=*/false);
  EXPECT_FALSE(StoredField(CheckpointField::kWatermark).has_value()) << "not due yet";
  clock_.Advance(100ms);
  writer_.Checkpoint(subs_, /*force=*/false);
  EXPECT_EQ(StoredField(CheckpointField::kWatermark), std::optional<uint64_t>(5));
  EXPECT_EQ(subs_[0]->durable_checkpoint, 5u);
  {
    MutexLock lock(&registry_.mu);
    EXPECT_EQ(registry_.by_name.at("progress").durable.checkpoint, 5u);
  }
  EXPECT_FALSE(writer_.NextDueMoment(subs_).has_value()) << "written: clean again";

  CompleteUpTo(7);
  writer_.Checkpoint(subs_, /*force=*/true);  // Stop's: not waiting for the timer
  EXPECT_EQ(StoredField(CheckpointField::kWatermark), std::optional<uint64_t>(7));
}

TEST_F(ProgressWriterTest, AHorizonCoversWhatIsHandedOutAWindowAtATime) {
  auto event = std::make_shared<Event>();
  event->seq = 1;
  internal::WorkItem item;
  item.sub = subs_[0].get();
  item.event = event;
  subs_[0]->progress.Fetched(1);
  ASSERT_TRUE(writer_.AdvanceHorizons({item}));
  // next() is 2 with seq 1 fetched: the horizon covers a whole window past it.
  EXPECT_EQ(StoredField(CheckpointField::kHorizon), std::optional<uint64_t>(2 + 16));
  EXPECT_EQ(subs_[0]->durable_horizon, 18u);

  // Seqs within the horizon write nothing.
  internal::WriteSet erase;
  erase.Delete(storage_.db()->cf(storage::Cf::kCheckpoints),
               storage::CheckpointKey(kSubscriberId, CheckpointField::kHorizon));
  ASSERT_TRUE(storage_.committer()->CommitOne(&erase, false).ok());
  auto within = std::make_shared<Event>();
  within->seq = 18;
  item.event = within;
  ASSERT_TRUE(writer_.AdvanceHorizons({item}));
  EXPECT_FALSE(StoredField(CheckpointField::kHorizon).has_value());
}

TEST_F(ProgressWriterTest, PauseAndCleanStopRecordsComeAndGo) {
  Event at;
  at.seq = 4;
  at.type = "orders.order-placed.v2";
  writer_.RecordPause(subs_[0].get(), at);
  std::optional<std::string> pause =
      storage_.Read(storage::Cf::kCheckpoints, storage::CheckpointKey(kSubscriberId, CheckpointField::kPausedOn));
  ASSERT_TRUE(pause.has_value());
  storage::PauseRecord record;
  ASSERT_TRUE(storage::DecodePause(*pause, &record));
  EXPECT_EQ(record.seq, 4u);
  EXPECT_EQ(record.type, at.type);
  writer_.RecordPause(subs_[0].get(), std::nullopt);
  EXPECT_FALSE(
      storage_.Read(storage::Cf::kCheckpoints, storage::CheckpointKey(kSubscriberId, CheckpointField::kPausedOn))
          .has_value());

  subs_[0]->durable_horizon = 9;
  writer_.RecordCleanStop(subs_);
  EXPECT_EQ(StoredField(CheckpointField::kStoppedAt), std::optional<uint64_t>(9));
}

TEST_F(ProgressWriterTest, TrimsBelowTheLowestCheckpointOnly) {
  FillOutbox(20);
  {
    MutexLock lock(&registry_.mu);
    registry_.by_name["progress"].durable.checkpoint = 12;
    registry_.by_name["slower"].durable.checkpoint = 8;  // registered, not running here
  }
  writer_.Trim(subs_, /*force=*/true);
  EXPECT_EQ(writer_.trimmed_below(), 9u);
  EXPECT_FALSE(storage_.Read(storage::Cf::kOutbox, storage::OutboxKey(8)).has_value());
  EXPECT_TRUE(storage_.Read(storage::Cf::kOutbox, storage::OutboxKey(9)).has_value());
  std::optional<std::string> stored = storage_.Read(storage::Cf::kMeta, std::string(storage::kMetaTrimmedBelow));
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(storage::GetBe64(*stored), 9u);
}

}  // namespace
}  // namespace walbus
