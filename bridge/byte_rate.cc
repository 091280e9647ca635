#include "bridge/byte_rate.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace walbus::bridge {

ByteRate::ByteRate(uint64_t bytes_per_second, uint64_t burst_bytes, Clock::time_point now)
    : bytes_per_second_(bytes_per_second),
      burst_bytes_(burst_bytes),
      tokens_(static_cast<double>(burst_bytes)),
      filled_at_(now) {
  assert(bytes_per_second > 0 && burst_bytes > 0);
}

void ByteRate::Refill(Clock::time_point now) {
  if (now <= filled_at_) return;
  const double elapsed = std::chrono::duration<double>(now - filled_at_).count();
  tokens_ = std::min(static_cast<double>(burst_bytes_), tokens_ + elapsed * static_cast<double>(bytes_per_second_));
  filled_at_ = now;
}

std::optional<ByteRate::Clock::time_point> ByteRate::HigherClaimUntil(unsigned level, Clock::time_point now) const {
  std::optional<Clock::time_point> until;
  for (unsigned higher = level + 1; higher < kLevels; ++higher) {
    if (claimed_until_[higher] > now) until = std::max(until.value_or(now), claimed_until_[higher]);
  }
  return until;
}

std::chrono::nanoseconds ByteRate::DebtWait() const {
  assert(tokens_ < 0);
  const double wait_ns = std::ceil(-tokens_ / static_cast<double>(bytes_per_second_) * 1e9);
  return std::chrono::nanoseconds(std::max<int64_t>(1, static_cast<int64_t>(wait_ns)));
}

std::chrono::nanoseconds ByteRate::Take(uint64_t bytes, Clock::time_point now, unsigned level) {
  assert(level < kLevels);
  internal::MutexLock lock(&mu_);
  Refill(now);
  if (const auto claim = HigherClaimUntil(level, now)) {
    const std::chrono::nanoseconds until_claim_lapses =
        std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds(1), *claim - std::max(now, filled_at_));
    return tokens_ < 0 ? std::min(DebtWait(), until_claim_lapses) : until_claim_lapses;
  }
  if (tokens_ >= 0) {
    tokens_ -= static_cast<double>(bytes);
    claimed_until_[level] = Clock::time_point{};
    return std::chrono::nanoseconds(0);
  }
  const std::chrono::nanoseconds wait = DebtWait();
  if (level > 0) claimed_until_[level] = std::max(now, filled_at_) + wait + kClaimGrace;
  return wait;
}

void ByteRate::Charge(uint64_t bytes, Clock::time_point now) {
  internal::MutexLock lock(&mu_);
  Refill(now);
  tokens_ -= static_cast<double>(bytes);
}

}  // namespace walbus::bridge
