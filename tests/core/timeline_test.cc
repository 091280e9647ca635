// bus/core/timeline.cc: the time scheduled events fall due in, against a
// clock moved by hand.
#include "bus/core/timeline.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace walbus::internal {
namespace {

using namespace std::chrono_literals;
using testing::ManualClock;

uint64_t WallMs(const ManualClock& clock) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch()).count());
}

TEST(TimelineTest, FollowsTheWallClock) {
  ManualClock clock;
  Timeline timeline(&clock, {});
  EXPECT_EQ(timeline.NowMs(), WallMs(clock));
  clock.Advance(1500ms);
  EXPECT_EQ(timeline.NowMs(), WallMs(clock));
  const auto whole_ms = std::chrono::floor<std::chrono::milliseconds>(clock.WallNow());
  EXPECT_EQ(timeline.AtWall(whole_ms + 1min), WallMs(clock) + 60000);
  // A moment between two milliseconds falls due at the later one.
  EXPECT_EQ(timeline.AtWall(whole_ms + 1min + 1us), WallMs(clock) + 60001);
}

TEST(TimelineTest, AStepBackIsRewoundAndTimeGoesOnAtTheMonotonicPace) {
  ManualClock clock;
  Timeline timeline(&clock, {});
  const uint64_t start = timeline.NowMs();
  clock.StepWall(-7 * 24h);
  EXPECT_EQ(timeline.NowMs(), start);
  clock.Advance(10s);
  EXPECT_EQ(timeline.NowMs(), start + 10000);
  EXPECT_EQ(timeline.state().rewind_ms, uint64_t{7 * 24 * 3600 * 1000});
  // A wall-clock time names the same moment as the rewound wall clock.
  EXPECT_EQ(timeline.AtWall(std::chrono::floor<std::chrono::milliseconds>(clock.WallNow())), timeline.NowMs());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(timeline.ToWall(timeline.NowMs()) - clock.WallNow()),
            0ms);
}

TEST(TimelineTest, JitterWithinTheToleranceNeitherRewindsNorRunsBack) {
  ManualClock clock;
  Timeline timeline(&clock, {});
  const uint64_t start = timeline.NowMs();
  clock.StepWall(-100ms);
  EXPECT_EQ(timeline.NowMs(), start);  // stands still
  clock.Advance(50ms);
  EXPECT_EQ(timeline.NowMs(), start);
  clock.Advance(100ms);
  EXPECT_EQ(timeline.NowMs(), start + 50);  // the wall clock passed it again
  EXPECT_EQ(timeline.state().rewind_ms, 0u);
}

TEST(TimelineTest, AForwardStepMovesItForward) {
  ManualClock clock;
  Timeline timeline(&clock, {});
  const uint64_t start = timeline.NowMs();
  clock.StepWall(2h);
  EXPECT_EQ(timeline.NowMs(), start + 2 * 3600 * 1000);
  EXPECT_EQ(timeline.state().rewind_ms, 0u);
}

TEST(TimelineTest, AStartBehindTheStoredMomentTakesItAsAStep) {
  ManualClock before;
  Timeline first(&before, {});
  before.Advance(5min);
  const Timeline::State stored = first.state();
  ManualClock after;
  after.StepWall(-30 * 24h);
  Timeline second(&after, stored);
  EXPECT_EQ(second.NowMs(), stored.last_ms);
  after.Advance(1s);
  EXPECT_EQ(second.NowMs(), stored.last_ms + 1000);
}

TEST(TimelineTest, TheStoredFormRoundTrips) {
  Timeline::State s{123456789, 42};
  Timeline::State back;
  ASSERT_TRUE(Timeline::Decode(Timeline::Encode(s), &back));
  EXPECT_EQ(back.last_ms, s.last_ms);
  EXPECT_EQ(back.rewind_ms, s.rewind_ms);
  EXPECT_FALSE(Timeline::Decode("short", &back));
}

}  // namespace
}  // namespace walbus::internal
