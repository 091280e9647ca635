// bus/util/rfc3339.cc: the times of CloudEvents (the bridge's ce-time, the
// JSON export).
#include "bus/util/rfc3339.h"

#include <gtest/gtest.h>

namespace walbus::internal {
namespace {

using namespace std::chrono_literals;

TEST(Rfc3339Test, ParsesTheFormsCloudEventsUse) {
  std::chrono::system_clock::time_point t;
  ASSERT_TRUE(ParseRfc3339("2026-11-29T23:46:34Z", &t));
  std::chrono::system_clock::time_point with_offset;
  ASSERT_TRUE(ParseRfc3339("2026-11-30T01:46:34+02:00", &with_offset));
  EXPECT_EQ(t, with_offset);
  ASSERT_TRUE(ParseRfc3339("2026-11-29T23:46:34.5Z", &with_offset));
  EXPECT_EQ(with_offset - t, 500ms);
  EXPECT_EQ(FormatRfc3339(t), "2026-11-29T23:46:34.000000Z");
  for (const char* bad :
       {"", "2026-11-29", "2026-13-01T00:00:00Z", "2026-11-29T23:46:34", "2026-11-29T23:46:34.Z",
        "2026-11-29T23:46:34Zjunk", "2026-11-29T25:00:00Z", "4053-12-01T00:00:00Z" /* beyond the clock's range */}) {
    EXPECT_FALSE(ParseRfc3339(bad, &t)) << bad;
  }
}

TEST(Rfc3339Test, FormatsMicrosecondsAndRoundTrips) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(1796000000123456));
  const std::string text = FormatRfc3339(t);
  EXPECT_EQ(text.size(), 27u) << text;
  std::chrono::system_clock::time_point back;
  ASSERT_TRUE(ParseRfc3339(text, &back));
  EXPECT_EQ(back, t);
  const auto before_epoch = std::chrono::system_clock::time_point(-1500us);
  ASSERT_TRUE(ParseRfc3339(FormatRfc3339(before_epoch), &back));
  EXPECT_EQ(back, before_epoch);
}

}  // namespace
}  // namespace walbus::internal
