// bus/api/memory_budget.cc: Options::memory_budget shared out among what
// grows with load, and a bus that runs within the smallest budget.
#include "bus/api/memory_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using namespace std::chrono_literals;
using internal::StorageShare;
using internal::WithinMemoryBudget;

TEST(MemoryBudgetTest, TheDefaultBudgetKeepsEveryDefaultBound) {
  const Options defaults;
  const Options within = WithinMemoryBudget(defaults);
  EXPECT_EQ(within.tail_cache_bytes, defaults.tail_cache_bytes);
  EXPECT_EQ(within.tail_cache_events, defaults.tail_cache_events);
  EXPECT_EQ(within.max_in_flight_per_subscriber, defaults.max_in_flight_per_subscriber);
  EXPECT_EQ(within.max_group_bytes, defaults.max_group_bytes);
  EXPECT_EQ(StorageShare(defaults.memory_budget), size_t{128} << 20);
}

TEST(MemoryBudgetTest, ASmallBudgetLowersEachBoundToItsShare) {
  Options o;
  o.memory_budget = size_t{16} << 20;
  const Options within = WithinMemoryBudget(o);
  EXPECT_EQ(StorageShare(o.memory_budget), size_t{8} << 20);
  EXPECT_EQ(within.tail_cache_bytes, size_t{4} << 20);
  EXPECT_EQ(within.tail_cache_events, 16384u);
  EXPECT_EQ(within.max_in_flight_per_subscriber, 4096u);
  EXPECT_EQ(within.max_group_bytes, size_t{512} << 10);
  const size_t shared = StorageShare(o.memory_budget) + within.tail_cache_bytes + within.max_group_bytes;
  EXPECT_LT(shared, o.memory_budget) << "what is shared out fits the budget";
}

TEST(MemoryBudgetTest, ABoundSetLowerThanItsShareKeepsItsValue) {
  Options o;
  o.memory_budget = size_t{16} << 20;
  o.tail_cache_bytes = size_t{1} << 20;
  o.max_in_flight_per_subscriber = 100;
  const Options within = WithinMemoryBudget(o);
  EXPECT_EQ(within.tail_cache_bytes, size_t{1} << 20);
  EXPECT_EQ(within.tail_cache_events, 4096u) << "its ring follows its bytes";
  EXPECT_EQ(within.max_in_flight_per_subscriber, 100u);
}

TEST(MemoryBudgetTest, ABudgetBelowTheSmallestIsRefused) {
  testing::TempDir dir;
  Options o = testing::TestOptions(dir);
  o.memory_budget = kMinMemoryBudget - 1;
  std::unique_ptr<Bus> bus;
  Status s = Bus::Open(o, &bus);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("memory_budget"), std::string::npos) << s.ToString();
}

// The smallest budget bounds every part tightly (a 256 KiB commit group, a
// 2048-event in-flight window): events larger than a group and more than
// a window are still all delivered, once each.
TEST(MemoryBudgetTest, ABusRunsWithinTheSmallestBudget) {
  testing::TempDir dir;
  Options o = testing::TestOptions(dir);
  o.memory_budget = kMinMemoryBudget;
  auto bus = testing::OpenBus(o);
  ASSERT_NE(bus, nullptr);
  std::atomic<int> handled{0};
  SubscriberOptions sub;
  sub.name = "counter";
  sub.handler = [&](const Event&, HandlerContext&) {
    handled.fetch_add(1);
    return Outcome::Done();
  };
  ASSERT_TRUE(bus->Subscribe(sub).ok());
  constexpr int kEvents = 6000;
  const std::string big(300 << 10, 'b');  // above the group bound
  for (int i = 0; i < kEvents; ++i) {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish({.type = "test.sized.v1",
                            .subject = "s-" + std::to_string(i % 50),
                            .data = i % 1000 == 0 ? big : std::string(200, 'd')})
                    .ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  EXPECT_EQ(handled.load(), kEvents);
}

}  // namespace
}  // namespace walbus
