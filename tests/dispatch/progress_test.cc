#include "bus/dispatch/progress.h"

#include <gtest/gtest.h>

namespace walbus::internal {
namespace {

TEST(ProgressTest, WatermarkAdvancesOnlyOverContiguousCompletions) {
  Progress p(10);
  EXPECT_EQ(p.next(), 11u);
  for (uint64_t s = 11; s <= 15; ++s) p.Fetched(s);
  EXPECT_EQ(p.window(), 5u);
  p.Complete(13);
  p.Complete(12);
  EXPECT_EQ(p.watermark(), 10u) << "11 is still open";
  p.Complete(11);
  EXPECT_EQ(p.watermark(), 13u);
  p.Complete(15);
  EXPECT_EQ(p.watermark(), 13u);
  p.Complete(14);
  EXPECT_EQ(p.watermark(), 15u);
  EXPECT_EQ(p.window(), 0u);
  EXPECT_EQ(p.next(), 16u);
}

}  // namespace
}  // namespace walbus::internal
