// bus/dispatch/event_source.cc against a real RocksDB, without a Bus: the
// tail cache answers first; what the outbox gives is held for the next
// reader of the same seqs; an unreadable entry is a null slot and goes to
// the quarantine; what every subscriber fetched is freed.
#include "bus/dispatch/event_source.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "bus/core/envelope.h"
#include "storage/keys.h"
#include "tests/storage_harness.h"
#include "tests/test_util.h"

namespace walbus {
namespace {

using testing::TempDir;
using Slots = std::vector<internal::BacklogWindow::Slot>;

class EventSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(storage_.opened().ok()) << storage_.opened().ToString();
    ASSERT_TRUE(quarantine_.Load().ok());
  }

  // Commits `n` events to the outbox, seqs 1..n; returns them.
  std::vector<std::shared_ptr<const Event>> Commit(int n) {
    internal::WriteSet writes;
    for (int i = 0; i < n; ++i) {
      auto e = std::make_shared<Event>();
      e->id = EventId::Generate();
      e->type = "meters.reading-taken.v1";
      e->source = "event-source-test";
      e->time = std::chrono::system_clock::now();
      e->subject = "meter-" + std::to_string(i);
      writes.envelopes.push_back(internal::EncodeEnvelope(*e));
      writes.events.push_back(std::move(e));
    }
    EXPECT_TRUE(storage_.committer()->CommitOne(&writes, false).ok());
    return {writes.events.begin(), writes.events.end()};
  }

  // Deletes outbox entries [from, to): a read of them can then only come
  // from memory.
  void EraseOutbox(uint64_t from, uint64_t to) {
    internal::WriteSet writes;
    writes.DeleteRange(storage_.db()->cf(storage::Cf::kOutbox), storage::OutboxKey(from), storage::OutboxKey(to));
    ASSERT_TRUE(storage_.committer()->CommitOne(&writes, false).ok());
  }

  static std::vector<uint64_t> SeqsOf(const Slots& slots) {
    std::vector<uint64_t> seqs;
    for (const auto& slot : slots) seqs.push_back(slot ? slot->seq : 0);
    return seqs;
  }

  // The seqs a read returns (0: a null slot).
  std::vector<uint64_t> SeqsRead(uint64_t from, size_t limit) {
    Slots slots;
    EXPECT_TRUE(source_.Read(from, limit, &slots));
    return SeqsOf(slots);
  }

  TempDir dir_;
  testing::StorageHarness storage_{dir_.path(), {}};
  std::shared_ptr<Clock> clock_ = std::make_shared<testing::ManualClock>();
  internal::BusLog log_{nullptr, false};
  internal::Quarantine quarantine_{storage_.db(), storage_.committer(), clock_.get(), &log_, 16, 1 << 20};
  internal::TailCache tail_{1024, 1 << 20};
  internal::EventSource source_{
      internal::EventSource::Parts{storage_.db(), storage_.committer(), &tail_, &quarantine_, &log_},
      /*window_events=*/64, /*window_bytes=*/1 << 20, /*max_payload_bytes=*/1 << 20};
};

TEST_F(EventSourceTest, TheTailCacheAnswersBeforeTheOutbox) {
  std::vector<std::shared_ptr<const Event>> committed = Commit(3);
  tail_.Append(committed);
  EraseOutbox(1, 4);
  Slots slots;
  ASSERT_TRUE(source_.Read(1, 10, &slots));
  EXPECT_EQ(SeqsOf(slots), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(slots[0], committed[0]) << "the very event the tail holds";
}

TEST_F(EventSourceTest, WhatTheOutboxGaveIsHeldForTheNextReaderUntilDropped) {
  Commit(5);
  Slots first;
  ASSERT_TRUE(source_.Read(1, 5, &first));
  EXPECT_EQ(SeqsOf(first), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EraseOutbox(1, 6);
  Slots second;  // another subscriber over the same seqs
  ASSERT_TRUE(source_.Read(2, 5, &second));
  EXPECT_EQ(SeqsOf(second), (std::vector<uint64_t>{2, 3, 4, 5}));
  EXPECT_EQ(second[0], first[1]) << "shared, not read again";
  source_.DropBelow(6);  // every subscriber has fetched them
  Slots after;
  ASSERT_TRUE(source_.Read(2, 5, &after));
  EXPECT_EQ(SeqsOf(after), (std::vector<uint64_t>{0, 0, 0, 0})) << "freed, and the outbox no longer has them";
}

TEST_F(EventSourceTest, AnUnreadableEntryIsANullSlotAndIsQuarantined) {
  Commit(3);
  internal::WriteSet garbage;
  garbage.Put(storage_.db()->cf(storage::Cf::kOutbox), storage::OutboxKey(2), "not an envelope");
  ASSERT_TRUE(storage_.committer()->CommitOne(&garbage, false).ok());
  Slots slots;
  ASSERT_TRUE(source_.Read(1, 3, &slots));
  EXPECT_EQ(SeqsOf(slots), (std::vector<uint64_t>{1, 0, 3}));
  EXPECT_EQ(quarantine_.added(), 1u);
}

TEST_F(EventSourceTest, ASeqTrimmedAwayIsANullSlot) {
  Commit(4);
  EraseOutbox(2, 3);
  Slots slots;
  ASSERT_TRUE(source_.Read(1, 4, &slots));
  EXPECT_EQ(SeqsOf(slots), (std::vector<uint64_t>{1, 0, 3, 4}));
  EXPECT_EQ(quarantine_.added(), 0u) << "a gap is not a bad entry";
}

// Days of drops leave one gap over most of the outbox: a read holds no
// more of it than the limit, gaps and events alike, and the next read
// goes on from there.
TEST_F(EventSourceTest, AGapLongerThanTheLimitIsReadInPieces) {
  Commit(10);
  EraseOutbox(2, 9);
  EXPECT_EQ(SeqsRead(1, 4), (std::vector<uint64_t>{1, 0, 0, 0}));
  EXPECT_EQ(SeqsRead(5, 4), (std::vector<uint64_t>{0, 0, 0, 0}));
  EXPECT_EQ(SeqsRead(9, 4), (std::vector<uint64_t>{9, 10}));
  source_.DropBelow(11);       // read again from the outbox, not the window
  Slots appended = {nullptr};  // a read appends: what *out held does not count
  ASSERT_TRUE(source_.Read(2, 3, &appended));
  EXPECT_EQ(appended.size(), 4u);
}

// Committed seqs missing at the outbox's end (dropped, Options::
// drop_oldest_types) are gaps too: without them a subscriber would wait
// there for the next commit.
TEST_F(EventSourceTest, CommittedSeqsMissingAtTheEndAreNullSlots) {
  Commit(4);
  EraseOutbox(3, 5);
  EXPECT_EQ(SeqsRead(1, 10), (std::vector<uint64_t>{1, 2, 0, 0}));
  EXPECT_EQ(SeqsRead(3, 1), (std::vector<uint64_t>{0})) << "within the limit";
}

// A forgotten seq is read from neither cache again: the tail stops before
// it, the backlog window holds it empty.
TEST_F(EventSourceTest, AForgottenSeqIsANullSlotFromEveryCache) {
  std::vector<std::shared_ptr<const Event>> committed = Commit(3);
  tail_.Append(committed);
  EraseOutbox(2, 3);
  source_.Forget(2);
  Slots from_tail;
  ASSERT_TRUE(source_.Read(1, 10, &from_tail));
  EXPECT_EQ(SeqsOf(from_tail), (std::vector<uint64_t>{1}));
  Slots past_it;
  ASSERT_TRUE(source_.Read(2, 10, &past_it));
  EXPECT_EQ(SeqsOf(past_it), (std::vector<uint64_t>{0, 3}));

  Commit(3);  // seqs 4..6, read from the outbox and held in the window
  Slots held;
  ASSERT_TRUE(source_.Read(4, 3, &held));
  EraseOutbox(5, 6);
  source_.Forget(5);
  Slots again;
  ASSERT_TRUE(source_.Read(4, 3, &again));
  EXPECT_EQ(SeqsOf(again), (std::vector<uint64_t>{4, 0, 6}));
  EXPECT_EQ(again[0], held[0]) << "from the window, not read again";
}

}  // namespace
}  // namespace walbus
