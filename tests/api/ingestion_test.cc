// bus/api/ingestion.cc without a Bus: what arrives is verified, refused
// into the quarantine, or committed once per dedup scope and in order per
// order key. (Through a Bus, with concurrency and restarts:
// tests/core/quarantine_test.cc.)
#include "bus/api/ingestion.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "bus/core/envelope.h"
#include "tests/storage_harness.h"
#include "tests/test_util.h"

namespace walbus {
namespace {

using testing::TempDir;

class IngestionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(storage_.opened().ok()) << storage_.opened().ToString();
    ASSERT_TRUE(quarantine_.Load().ok());
  }

  static Event Arrived(std::string subject) {
    Event e;
    e.id = EventId::Generate();
    e.type = "meters.reading-taken.v1";
    e.source = "meter-12";
    e.subject = std::move(subject);
    e.time = std::chrono::system_clock::now();
    e.data = "{\"kwh\":3}";
    return e;
  }
  static IngestOptions Scoped(std::string order_key = {}, uint64_t position = 0) {
    IngestOptions o;
    o.source = "bridge:test";
    o.dedup_scope = "meters";
    o.order_key = std::move(order_key);
    o.position = position;
    return o;
  }

  TempDir dir_;
  testing::StorageHarness storage_{dir_.path(), {}};
  std::shared_ptr<Clock> clock_ = std::make_shared<testing::ManualClock>();
  internal::BusLog log_{nullptr, false};
  internal::SchemaRegistry schemas_;
  internal::Quarantine quarantine_{storage_.db(), storage_.committer(), clock_.get(), &log_, 16, 1 << 20};
  internal::Ingestion ingestion_{storage_.db(), &schemas_, &quarantine_, 1 << 20, [this](internal::WriteSet* w) {
                                   Receipt receipt;
                                   Status s = storage_.committer()->CommitOne(w, false, &receipt.first_seq);
                                   if (!s.ok()) return Result<Receipt>(s);
                                   for (const auto& e : w->events) receipt.event_ids.push_back(e->id);
                                   return Result<Receipt>(receipt);
                                 }};
};

TEST_F(IngestionTest, AnIdIsTakenOncePerDedupScope) {
  const Event e = Arrived("meter-12");
  Result<IngestResult> first = ingestion_.FromEvent(e, Scoped());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->disposition, IngestDisposition::kTaken);
  ASSERT_EQ(first->receipt.event_ids.size(), 1u);
  EXPECT_EQ(first->receipt.event_ids[0], e.id) << "its identity is kept";

  Result<IngestResult> again = ingestion_.FromEnvelope(internal::EncodeEnvelope(e), Scoped());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->disposition, IngestDisposition::kDuplicate);
  EXPECT_TRUE(again->receipt.event_ids.empty());
  EXPECT_EQ(storage_.committer()->last_seq(), 1u) << "committed once";
}

TEST_F(IngestionTest, AnOrderKeyTakesPositionsInTheSendersOrder) {
  Result<IngestResult> ahead = ingestion_.FromEvent(Arrived("m"), Scoped("meter-12", 2));
  ASSERT_TRUE(ahead.ok());
  EXPECT_EQ(ahead->disposition, IngestDisposition::kAhead) << "position 1 has not come";
  EXPECT_EQ(ahead->next_position, 1u);

  Result<IngestResult> first = ingestion_.FromEvent(Arrived("m"), Scoped("meter-12", 1));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->disposition, IngestDisposition::kTaken);
  EXPECT_EQ(first->next_position, 2u);

  Result<IngestResult> second = ingestion_.FromEvent(Arrived("m"), Scoped("meter-12", 2));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->disposition, IngestDisposition::kTaken);

  Result<IngestResult> late = ingestion_.FromEvent(Arrived("m"), Scoped("meter-12", 1));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->disposition, IngestDisposition::kLate) << "a new id at a passed position";
  EXPECT_EQ(late->next_position, 3u);
  EXPECT_EQ(storage_.committer()->last_seq(), 3u);
}

TEST_F(IngestionTest, WhatFailsVerificationGoesToTheQuarantineAndIsNotCommitted) {
  Event no_type = Arrived("m");
  no_type.type = "not a type";
  Result<IngestResult> refused = ingestion_.FromEvent(no_type, Scoped());
  EXPECT_TRUE(refused.status().IsInvalidArgument()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("quarantined input from bridge:test"), std::string::npos);

  Result<IngestResult> garbage = ingestion_.FromEnvelope("not an envelope", Scoped());
  EXPECT_TRUE(garbage.status().IsInvalidArgument());

  IngestOptions bad = Scoped();
  bad.order_key = "meter-12";  // without a position
  EXPECT_TRUE(ingestion_.FromEvent(Arrived("m"), bad).status().IsInvalidArgument());

  EXPECT_EQ(quarantine_.added(), 2u) << "bad options are the caller's error, not input to keep";
  EXPECT_EQ(storage_.committer()->last_seq(), 0u);
}

}  // namespace
}  // namespace walbus
