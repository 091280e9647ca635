// ByteRate: a token bucket over bytes, the relay's bandwidth cap
// (RelayOptions::max_bytes_per_second, burst_bytes).
//
// The bucket fills at the rate up to the burst. A message goes whenever the
// bucket is not in debt, and takes its bytes even past zero: a message
// larger than the burst still goes (alone, after the debt before it is
// paid), and over any interval of length T the bytes let through stay
// within burst + rate x T + the largest message. The time until the debt
// is paid is what a caller waits (the relay answers Outcome::Wait with it).
//
// Levels give strict priority within the one rate (the relay's priorities,
// RelayOptions::priorities): a Take that is refused claims the bytes that
// come free next for its level, and no lower level takes while that claim
// stands. A claim ends when its level takes, or lapses kClaimGrace after
// the moment its caller was told to come back (a caller that went away,
// say its connection dropped, holds nobody back for long).
//
// Threading: thread-safe; the relay's workers call Take concurrently.
#ifndef WALBUS_BRIDGE_BYTE_RATE_H_
#define WALBUS_BRIDGE_BYTE_RATE_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>

#include "bus/util/mutex.h"

namespace walbus::bridge {

class ByteRate {
 public:
  using Clock = std::chrono::steady_clock;
  // Levels 0 (lowest) to kLevels - 1.
  static constexpr unsigned kLevels = 4;
  static constexpr std::chrono::milliseconds kClaimGrace{100};

  // Full at `now`. REQUIRES: bytes_per_second > 0 and burst_bytes > 0.
  ByteRate(uint64_t bytes_per_second, uint64_t burst_bytes, Clock::time_point now);
  ByteRate(const ByteRate&) = delete;
  ByteRate& operator=(const ByteRate&) = delete;

  // Takes `bytes` at `now` for `level` and returns zero when the bucket is
  // not in debt and no higher level's claim stands; otherwise takes
  // nothing and returns how long to wait (at least 1 ns): until the debt
  // is paid, or, behind a higher level's claim, until that claim lapses.
  // `now` may lag another caller's: time never runs backwards for the
  // bucket. REQUIRES: level < kLevels.
  std::chrono::nanoseconds Take(uint64_t bytes, Clock::time_point now, unsigned level = 0);
  // Takes `bytes` at `now` whatever the bucket holds, into debt if need
  // be: for what goes out regardless of the cap, so that what follows it
  // waits for it.
  void Charge(uint64_t bytes, Clock::time_point now);

  uint64_t bytes_per_second() const { return bytes_per_second_; }
  uint64_t burst_bytes() const { return burst_bytes_; }

 private:
  void Refill(Clock::time_point now) REQUIRES(mu_);
  // When the standing claim of a level above `level` lapses; nullopt when
  // none stands at `now`.
  std::optional<Clock::time_point> HigherClaimUntil(unsigned level, Clock::time_point now) const REQUIRES(mu_);
  // How long until the debt is paid. REQUIRES: tokens_ < 0.
  std::chrono::nanoseconds DebtWait() const REQUIRES(mu_);

  const uint64_t bytes_per_second_;
  const uint64_t burst_bytes_;
  internal::Mutex mu_;
  double tokens_ GUARDED_BY(mu_);  // below zero: debt
  Clock::time_point filled_at_ GUARDED_BY(mu_);
  // Per level: until when its claim stands (a past moment: none).
  std::array<Clock::time_point, kLevels> claimed_until_ GUARDED_BY(mu_){};
};

}  // namespace walbus::bridge

#endif  // WALBUS_BRIDGE_BYTE_RATE_H_
