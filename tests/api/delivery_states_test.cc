// bus/api/delivery_states.cc: where an event stands for a subscriber, told
// from the records storage holds. Against a real database without a Bus:
// the records are written as the handler runner and the dispatcher write
// them.
#include "bus/api/delivery_states.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bus/core/envelope.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tests/storage_harness.h"
#include "tests/test_util.h"

namespace walbus {
namespace {

using testing::TempDir;

constexpr uint32_t kId = 4;
constexpr const char* kName = "billing";

class DeliveryStatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(storage_.opened().ok()) << storage_.opened().ToString();
    entry_.id = kId;
  }

  // Commits events on `subjects`, seqs 1..n; returns them.
  std::vector<Event> Publish(const std::vector<std::string>& subjects) {
    std::vector<Event> events;
    internal::WriteSet writes;
    for (const std::string& subject : subjects) {
      Event e;
      e.id = EventId::Generate();
      e.type = "billing.invoice-due.v1";
      e.source = "delivery-states-test";
      e.time = std::chrono::system_clock::now();
      e.subject = subject;
      events.push_back(e);
      writes.events.push_back(std::make_shared<Event>(e));
      writes.envelopes.push_back(internal::EncodeEnvelope(e));
    }
    EXPECT_TRUE(storage_.committer()->CommitOne(&writes, false).ok());
    for (size_t i = 0; i < events.size(); ++i) events[i].seq = writes.events[i]->seq;
    return events;
  }

  void Put(storage::Cf cf, const std::string& key, const std::string& value) {
    internal::WriteSet writes;
    writes.Put(storage_.db()->cf(cf), key, value);
    ASSERT_TRUE(storage_.committer()->CommitOne(&writes, false).ok());
  }
  void PutInbox(const Event& e) {
    Put(storage::Cf::kInbox, storage::InboxKey(storage_.db()->inbox_layout(), kId, storage::IdBytes(e.id)),
        storage::InboxValue(e.seq, 1000, 1));
  }
  void PutDeadLetter(const Event& e, uint32_t attempts, const std::string& error) {
    storage::DeadLetterRecord letter;
    letter.attempts = attempts;
    letter.error = error;
    letter.envelope = internal::EncodeEnvelope(e);
    Put(storage::Cf::kDeadLetters, storage::SubscriberSeqKey(kId, e.seq), storage::EncodeDeadLetter(letter));
  }

  DeliveryState StateOf(const Event& e, uint64_t seq) {
    DeliveryState st;
    Status s = states_.StateOf(kName, entry_, e.id, seq, &st);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(st.subscriber, kName);
    EXPECT_EQ(st.id, e.id);
    return st;
  }

  TempDir dir_;
  testing::StorageHarness storage_{dir_.path(), {}};
  internal::DeliveryStates states_{storage_.db(), 1 << 20};
  internal::Registry::Entry entry_;  // registered, not active here
};

TEST_F(DeliveryStatesTest, TheInboxTellsHandledAndTheDeadLetterStoreGaveUp) {
  std::vector<Event> e = Publish({"inv-1", "inv-2"});
  PutInbox(e[0]);
  EXPECT_EQ(StateOf(e[0], 0).state, Delivery::kHandled);
  EXPECT_EQ(StateOf(e[0], 0).seq, e[0].seq) << "the inbox record knows the seq";

  PutInbox(e[1]);  // a dead letter has an inbox record too
  PutDeadLetter(e[1], 3, "no such account");
  DeliveryState dead = StateOf(e[1], e[1].seq);
  EXPECT_EQ(dead.state, Delivery::kDeadLettered);
  EXPECT_EQ(dead.attempts, 3u);
  EXPECT_EQ(dead.last_error, "no such account");
}

TEST_F(DeliveryStatesTest, ARetryRecordTellsRetryingEvenWithoutTheSeq) {
  std::vector<Event> e = Publish({"inv-1", "inv-2"});
  storage::RetryRecord retry;
  retry.attempts = 2;
  retry.last_error = "timeout";
  retry.next_attempt_ms = 1'800'000'000'000;
  Put(storage::Cf::kRetries, storage::SubscriberSeqKey(kId, e[1].seq), storage::EncodeRetry(retry));
  DeliveryState st = StateOf(e[1], 0);  // found through the retry records and the outbox
  EXPECT_EQ(st.state, Delivery::kRetrying);
  EXPECT_EQ(st.seq, e[1].seq);
  EXPECT_EQ(st.attempts, 2u);
  EXPECT_EQ(st.last_error, "timeout");
  ASSERT_TRUE(st.next_attempt.has_value());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(st.next_attempt->time_since_epoch()).count(),
            1'800'000'000'000);
  EXPECT_EQ(StateOf(e[0], e[0].seq).state, Delivery::kPending);
}

TEST_F(DeliveryStatesTest, BelowTheWatermarkWithoutAnInboxRecordWasNotDelivered) {
  std::vector<Event> e = Publish({"inv-1", "inv-2"});
  entry_.durable.checkpoint = e[0].seq;  // passed over: a type it does not take
  EXPECT_EQ(StateOf(e[0], e[0].seq).state, Delivery::kNotDelivered);
  EXPECT_EQ(StateOf(e[1], e[1].seq).state, Delivery::kPending);
}

TEST_F(DeliveryStatesTest, PendingListsWhatWaitsAndWhatIsParkedInSeqOrder) {
  std::vector<Event> e = Publish({"inv-1", "inv-1", "inv-2", "inv-3"});
  // inv-1 is parked behind the dead letter of its first event; its second
  // waits with it in the dead-letter store (PoisonPolicy::kParkKey).
  PutInbox(e[0]);
  PutDeadLetter(e[0], 5, "poison");
  PutInbox(e[1]);
  PutDeadLetter(e[1], 0, "held");
  std::string behind;
  storage::PutBe64(&behind, e[0].seq);
  Put(storage::Cf::kCheckpoints, storage::CheckpointKey(kId, storage::CheckpointField::kParked, "inv-1"), behind);
  PutInbox(e[2]);  // handled
  entry_.durable.checkpoint = e[2].seq;

  DeliveryState parked = StateOf(e[1], e[1].seq);
  EXPECT_EQ(parked.state, Delivery::kParked);
  EXPECT_EQ(parked.parked_behind, e[0].seq);
  EXPECT_EQ(StateOf(e[0], e[0].seq).state, Delivery::kDeadLettered) << "the dead letter itself is not parked";

  Result<std::vector<DeliveryState>> pending = states_.Pending(kName, entry_, 0);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  ASSERT_EQ(pending->size(), 2u);
  EXPECT_EQ((*pending)[0].seq, e[1].seq);
  EXPECT_EQ((*pending)[0].state, Delivery::kParked);
  EXPECT_EQ((*pending)[1].seq, e[3].seq);
  EXPECT_EQ((*pending)[1].state, Delivery::kPending);

  Result<std::vector<DeliveryState>> first = states_.Pending(kName, entry_, 1);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].seq, e[1].seq) << "the limit keeps the lowest seqs";
}

}  // namespace
}  // namespace walbus
