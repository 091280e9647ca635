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

// A higher level that was refused gets the next bytes: a lower level
// waits while its claim stands, and takes again once the claim is used.
TEST(ByteRateTest, ARefusedHigherLevelGoesBeforeEveryLowerOne) {
  const Clock::time_point t0{};
  ByteRate rate(1000, 100, t0);
  EXPECT_EQ(rate.Take(300, t0, 0).count(), 0);  // 200 bytes of debt
  EXPECT_EQ(rate.Take(10, t0, 2), 200ms) << "in debt: the high level waits and claims";
  EXPECT_GT(rate.Take(10, t0 + 200ms, 0).count(), 0) << "out of debt, but the claim stands";
  EXPECT_GT(rate.Take(10, t0 + 200ms, 1).count(), 0) << "every level below the claim waits";
  EXPECT_EQ(rate.Take(10, t0 + 200ms, 2).count(), 0) << "the claimant takes first";
  EXPECT_EQ(rate.Take(10, t0 + 200ms, 0), 10ms) << "the claim is used: only the debt holds the lower level";
  EXPECT_EQ(rate.Take(10, t0 + 210ms, 0).count(), 0);
  EXPECT_EQ(rate.Take(10, t0 + 220ms, 3).count(), 0) << "no claim holds a higher level back";
}

// A claimant that never comes back (its connection dropped) holds the
// lower levels back only until its claim lapses.
TEST(ByteRateTest, AnUnusedClaimLapses) {
  const Clock::time_point t0{};
  ByteRate rate(1000, 100, t0);
  EXPECT_EQ(rate.Take(300, t0, 0).count(), 0);
  EXPECT_EQ(rate.Take(10, t0, 1), 200ms);
  const Clock::time_point lapse = t0 + 200ms + ByteRate::kClaimGrace;
  EXPECT_EQ(rate.Take(10, t0 + 250ms, 0), lapse - (t0 + 250ms)) << "told to come back when the claim lapses";
  EXPECT_EQ(rate.Take(10, lapse, 0).count(), 0);
}

// Two levels sending as fast as the cap lets them: while the high level
// has something to send, the low level sends nothing, and the cap still
// holds for both together.
TEST(ByteRateTest, UnderContentionTheHighLevelTakesTheWholeRate) {
  constexpr uint64_t kRate = 10000, kBurst = 1000, kMessage = 500;
  Clock::time_point now{};
  ByteRate rate(kRate, kBurst, now);
  Clock::time_point low_due = now, high_due = now;
  uint64_t high_sent = 0, low_sent_while_high_waits = 0, total = 0;
  constexpr uint64_t kHighMessages = 100;
  while (high_sent < kHighMessages) {
    now = std::min(low_due, high_due);
    if (now == high_due) {
      const auto wait = rate.Take(kMessage, now, 1);
      if (wait.count() == 0) ++high_sent, total += kMessage;
      high_due = now + wait;
    } else {
      const auto wait = rate.Take(kMessage, now, 0);
      if (wait.count() == 0) ++low_sent_while_high_waits, total += kMessage;
      low_due = now + wait;
    }
  }
  EXPECT_LE(low_sent_while_high_waits, 2u) << "at most what went before the first claim";
  const double seconds = std::chrono::duration<double>(now.time_since_epoch()).count();
  EXPECT_LE(static_cast<double>(total), kBurst + kRate * seconds + kMessage);
}

}  // namespace
}  // namespace walbus::bridge
