#include "bus/dispatch/backoff.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace walbus::internal {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DelaysStayWithinTheDoublingCeilingAndTheCap) {
  RetryPolicy p;
  p.base = milliseconds(10);
  p.cap = milliseconds(300);
  std::mt19937_64 rng(42);
  for (uint32_t attempt = 1; attempt <= 40; ++attempt) {
    const int64_t ceiling = std::min<int64_t>(300, 10LL << std::min<uint32_t>(attempt - 1, 30));
    for (int i = 0; i < 200; ++i) {
      const int64_t d = BackoffDelay(p, attempt, rng()).count();
      ASSERT_GE(d, 1) << "attempt " << attempt;
      ASSERT_LE(d, ceiling) << "attempt " << attempt;
    }
  }
}

TEST(BackoffTest, DelaysAreJitteredAcrossTheWholeRange) {
  RetryPolicy p;
  p.base = milliseconds(100);
  p.cap = milliseconds(100000);
  std::mt19937_64 rng(7);
  std::set<int64_t> seen;
  int64_t low = 0, high = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t d = BackoffDelay(p, 4, rng()).count();  // ceiling 800 ms
    seen.insert(d);
    low += d < 200;
    high += d > 600;
  }
  EXPECT_GT(seen.size(), 400u) << "full jitter spreads the delays";
  EXPECT_GT(low, 300) << "about a quarter below 200 ms";
  EXPECT_GT(high, 300) << "about a quarter above 600 ms";
}

TEST(BackoffTest, HugeAttemptCountsDoNotOverflow) {
  RetryPolicy p;
  p.base = milliseconds(1000);
  p.cap = milliseconds(60000);
  EXPECT_LE(BackoffDelay(p, 4000000000u, ~0ull).count(), 60000);
}

}  // namespace
}  // namespace walbus::internal
