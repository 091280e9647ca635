// bridge/byte_rate.cc: the relay's bandwidth cap, on a clock the test moves.
#include "bridge/byte_rate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace walbus::bridge {
namespace {

using namespace std::chrono_literals;
using Clock = ByteRate::Clock;

TEST(ByteRateTest, AFullBucketLetsTheBurstGoThenTheDebtSetsTheWait) {
  const Clock::time_point t0{};
  ByteRate rate(1000, 500, t0);
  EXPECT_EQ(rate.Take(300, t0).count(), 0);
  EXPECT_EQ(rate.Take(300, t0).count(), 0) << "not in debt yet: goes, and leaves 100 bytes of debt";
  EXPECT_EQ(rate.Take(1, t0), 100ms) << "100 bytes of debt at 1000 bytes/s";
  EXPECT_EQ(rate.Take(1, t0 + 50ms), 50ms) << "refused takes took nothing";
  EXPECT_EQ(rate.Take(1, t0 + 100ms).count(), 0);
}

TEST(ByteRateTest, AMessageLargerThanTheBurstGoesAloneAndIsPaidFor) {
  const Clock::time_point t0{};
  ByteRate rate(1000, 100, t0);
  EXPECT_EQ(rate.Take(5000, t0).count(), 0) << "never held back forever";
  EXPECT_EQ(rate.Take(1, t0 + 1s), 3900ms) << "4900 bytes of debt, 1000 paid";
}

TEST(ByteRateTest, AChargeCountsEvenInDebtAndLaterTakesWaitForIt) {
  const Clock::time_point t0{};
  ByteRate rate(1000, 100, t0);
  EXPECT_EQ(rate.Take(300, t0).count(), 0);  // 200 bytes of debt
  rate.Charge(500, t0);                      // a republish: 700
  EXPECT_EQ(rate.Take(1, t0), 700ms);
}

TEST(ByteRateTest, TheBucketNeverHoldsMoreThanTheBurst) {
  const Clock::time_point t0{};
  ByteRate rate(1000, 200, t0);
  // An hour idle: still only 200 bytes may go at once.
  EXPECT_EQ(rate.Take(250, t0 + 1h).count(), 0);
  EXPECT_EQ(rate.Take(1, t0 + 1h), 50ms);
}

TEST(ByteRateTest, ACallerWhoseClockLagsDoesNotRefillTheBucket) {
  const Clock::time_point t0{};
  ByteRate rate(1000, 100, t0 + 1s);
  EXPECT_EQ(rate.Take(200, t0 + 1s).count(), 0);
  EXPECT_EQ(rate.Take(1, t0), 100ms) << "an earlier moment changes nothing";
}

// Senders that wait as told, with random sizes: in every window of the
// run, what went stays within burst + rate x T + one message.
TEST(ByteRateTest, EveryWindowStaysWithinTheBound) {
  constexpr uint64_t kRate = 20000, kBurst = 3000, kLargest = 1500;
  Clock::time_point now{};
  ByteRate rate(kRate, kBurst, now);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> size(1, kLargest);
  std::vector<std::pair<Clock::time_point, uint64_t>> sent;
  uint64_t total = 0;
  Clock::duration quiet{0};
  while (sent.size() < 2000) {
    const uint64_t bytes = size(rng);
    for (auto wait = rate.Take(bytes, now); wait.count() > 0; wait = rate.Take(bytes, now)) now += wait;
    sent.emplace_back(now, bytes);
    total += bytes;
    if (rng() % 50 == 0) {  // a quiet spell now and then
      now += 200ms;
      quiet += 200ms;
    }
  }
  for (size_t i = 0; i < sent.size(); ++i) {
    uint64_t bytes = 0;
    for (size_t j = i; j < sent.size(); ++j) {
      bytes += sent[j].second;
      const double window = std::chrono::duration<double>(sent[j].first - sent[i].first).count();
      ASSERT_LE(static_cast<double>(bytes), kBurst + kRate * window + kLargest) << "window " << i << ".." << j;
    }
  }
  // And no sender waits longer than the cap needs: the run took no more
  // than its bytes at the rate, plus the quiet spells.
  const double seconds = std::chrono::duration<double>(sent.back().first - sent.front().first).count();
  EXPECT_LE(seconds, static_cast<double>(total) / kRate + std::chrono::duration<double>(quiet).count() + 1e-3);
}

}  // namespace
}  // namespace walbus::bridge
