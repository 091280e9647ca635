// bus/util/closest.cc: the names nearest a mistyped one.
#include "bus/util/closest.h"

#include <gtest/gtest.h>

namespace walbus::internal {
namespace {

TEST(ClosestTest, NearestFirstAndOnlyNearEnough) {
  const std::vector<std::string> types = {"orders.order-shipped.v1", "orders.order-placed.v1", "orders.order-placed.v2",
                                          "billing.invoice-raised.v1"};
  EXPECT_EQ(ClosestNames("orders.order-placd.v1", types, 2),
            (std::vector<std::string>{"orders.order-placed.v1", "orders.order-placed.v2"}));
  EXPECT_EQ(ClosestNames("orders.order-placed.v1", types, 1), (std::vector<std::string>{"orders.order-placed.v1"}));
  EXPECT_TRUE(ClosestNames("inventory.stock-counted.v1", types, 3).empty());
  EXPECT_TRUE(ClosestNames("ab", {}, 3).empty());
  // Short names allow two edits.
  EXPECT_EQ(ClosestNames("ab", {"xy", "abc", "a"}, 3), (std::vector<std::string>{"abc", "a", "xy"}));
}

}  // namespace
}  // namespace walbus::internal
