// bus/api/unit_host.cc against a real RocksDB, without a Bus: a
// Transaction made on the host commits its writes and events once, in one
// batch, reads through the host's storage, reports its first failed call,
// and is refused once the gate is shut.
#include "bus/api/unit_host.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/storage_harness.h"
#include "tests/test_util.h"
#include "walbus/scope.h"

namespace walbus {
namespace {

using testing::TempDir;

class UnitHostTest : public ::testing::Test {
 protected:
  UnitHostTest()
      : storage_(dir_.path(), {"orders"}),
        app_cfs_(*storage_.db(), {"orders"}),
        timeline_(clock_.get(), internal::Timeline::State{}),
        budget_(storage_.db(), 0, 1, 0),
        units_(internal::UnitHost::Parts{&gate_, storage_.db(), storage_.committer(), &options_, &schemas_, &app_cfs_,
                                         &timeline_, &budget_}) {
    EXPECT_TRUE(storage_.opened().ok()) << storage_.opened().ToString();
    options_.clock = clock_;  // as Bus::Open resolves it
  }

  Transaction Begin() { return internal::ScopeAccess::NewTransaction(std::make_unique<internal::ScopeRep>(&units_)); }

  TempDir dir_;
  testing::StorageHarness storage_;
  Options options_;
  std::shared_ptr<const Clock> clock_ = Clock::System();
  internal::SchemaRegistry schemas_{false};
  internal::AppColumnFamilies app_cfs_;
  internal::Timeline timeline_;
  internal::CallGate gate_;
  internal::DiskBudget budget_;
  internal::UnitHost units_;
};

TEST_F(UnitHostTest, ATransactionCommitsItsWritesAndEventsOnceInOneBatch) {
  Transaction tx = Begin();
  ASSERT_TRUE(tx.Put("orders", "o-1", "placed").ok());
  EventSpec placed{.type = "orders.order-placed.v1", .subject = "o-1", .data = "x"};
  Result<EventId> id = tx.Publish(placed);
  ASSERT_TRUE(id.ok());
  Result<Receipt> receipt = tx.Commit();
  ASSERT_TRUE(receipt.ok()) << receipt.status().ToString();
  EXPECT_EQ(receipt->first_seq, 1u);
  ASSERT_EQ(receipt->event_ids.size(), 1u);
  EXPECT_EQ(receipt->event_ids[0], *id);
  EXPECT_EQ(storage_.Read(*app_cfs_.Find("orders"), "o-1"), "placed");
  EXPECT_EQ(testing::OutboxSize(*storage_.db()), 1u);
  EXPECT_TRUE(tx.Commit().status().IsInvalidArgument()) << "nothing is written twice";
  EXPECT_EQ(testing::OutboxSize(*storage_.db()), 1u);
}

TEST_F(UnitHostTest, ATransactionReadsThroughTheHostsStorage) {
  Transaction writer = Begin();
  ASSERT_TRUE(writer.Put("orders", "o-2", "paid").ok());
  ASSERT_TRUE(writer.Commit().ok());
  Transaction reader = Begin();
  Result<std::optional<std::string>> value = reader.Get("orders", "o-2");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "paid");
  EXPECT_TRUE(reader.Get("invoices", "o-2").status().IsInvalidArgument()) << "not a listed column family";
}

TEST_F(UnitHostTest, AnEmptyUnitCommitsNothingAndAFailedCallFailsTheCommit) {
  Result<Receipt> empty = Begin().Commit();
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->first_seq, 0u);
  EXPECT_TRUE(empty->event_ids.empty());
  Transaction failed = Begin();
  ASSERT_TRUE(failed.Put("orders", "o-3", "x").ok());
  EXPECT_FALSE(failed.Publish(EventSpec{.type = "Not A Type", .subject = "o-3"}).ok());
  EXPECT_TRUE(failed.Commit().status().IsInvalidArgument());
  EXPECT_EQ(storage_.Read(*app_cfs_.Find("orders"), "o-3"), std::nullopt) << "the unit wrote nothing";
}

TEST_F(UnitHostTest, OnceTheGateIsShutACommitIsClosedAndWritesNothing) {
  Transaction tx = Begin();
  ASSERT_TRUE(tx.Put("orders", "o-4", "x").ok());
  gate_.Shut();
  EXPECT_TRUE(tx.Commit().status().IsClosed());
  EXPECT_EQ(storage_.Read(*app_cfs_.Find("orders"), "o-4"), std::nullopt);
}

}  // namespace
}  // namespace walbus
