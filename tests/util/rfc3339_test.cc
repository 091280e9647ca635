// bus/util/rfc3339.cc: the times of CloudEvents (the bridge's ce-time, the
// JSON export).
#include "bus/util/rfc3339.h"

#include <gtest/gtest.h>

#include <cstdint>

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
  for (const char* bad : {"", "2026-11-29", "2026-13-01T00:00:00Z", "2026-11-29T23:46:34", "2026-11-29T23:46:34.Z",
                          "2026-11-29T23:46:34Zjunk", "2026-11-29T25:00:00Z", "2026-02-29T00:00:00Z" /* no such day */,
                          "4053-12-01T00:00:00Z" /* beyond the clock's range */}) {
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

// A 32-bit time_t ends in January 2038; the clock's range goes on to 2262
// on every platform.
TEST(Rfc3339Test, TimesPast2038AndBefore1901RoundTripEverywhere) {
  for (const char* text :
       {"2038-01-19T03:14:08.000000Z", "2100-02-28T12:00:00.000001Z", "2250-12-31T23:59:59.000000Z",
        "1901-12-13T20:45:51.000000Z", "1700-03-01T00:00:00.000000Z", "2024-02-29T23:59:59.999999Z"}) {
    std::chrono::system_clock::time_point t;
    ASSERT_TRUE(ParseRfc3339(text, &t)) << text;
    EXPECT_EQ(FormatRfc3339(t), text);
  }
  std::chrono::system_clock::time_point t;
  ASSERT_TRUE(ParseRfc3339("2038-01-19T03:14:08Z", &t));
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count(), int64_t{1} << 31);
}

TEST(Rfc3339Test, MillisecondsOfAnyCountAreFormattedOrRefused) {
  EXPECT_EQ(FormatRfc3339Millis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Millis(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatRfc3339Millis(253402300799999), "9999-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatRfc3339Millis(-62167219200000), "0000-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Millis(253402300800000), "");  // the year 10000
  EXPECT_EQ(FormatRfc3339Millis(-62167219200001), "");
  EXPECT_EQ(FormatRfc3339Millis(INT64_MAX), "");
  EXPECT_EQ(FormatRfc3339Millis(INT64_MIN), "");
}

}  // namespace
}  // namespace walbus::internal
