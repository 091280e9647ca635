// bus/util/bounds.cc: option values checked from tables.
#include "bus/util/bounds.h"

#include <gtest/gtest.h>

namespace walbus::internal {
namespace {

using std::chrono::milliseconds;

TEST(BoundsTest, TheFirstValueOutOfRangeIsNamedWithItsRange) {
  EXPECT_TRUE(CheckBounds("X", {{"a", 1, 1, 2}}, {{"d", milliseconds(5), milliseconds(0), kNoLongest}}).ok());
  Status s = CheckBounds("X", {{"a", 1, 1, 2}, {"b", -4, 0, kNoMax}, {"c", 9, 0, 1}}, {});
  EXPECT_EQ(s.ToString(), "InvalidArgument: X::b is -4; it must be >= 0");
  s = CheckBounds("X", {}, {{"d", milliseconds(0), milliseconds(1), kDay}});
  EXPECT_EQ(s.ToString(), "InvalidArgument: X::d is 0 ms; it must be 1 ms..86400000 ms");
  EXPECT_EQ(CountValue(UINT64_MAX), INT64_MAX);
  EXPECT_EQ(CountValue(7), 7);
}

}  // namespace
}  // namespace walbus::internal
