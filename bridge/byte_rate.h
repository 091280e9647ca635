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
// Threading: thread-safe; the relay's workers call Take concurrently.
#ifndef WALBUS_BRIDGE_BYTE_RATE_H_
#define WALBUS_BRIDGE_BYTE_RATE_H_

#include <chrono>
#include <cstdint>

#include "bus/util/mutex.h"

namespace walbus::bridge {

class ByteRate {
 public:
  using Clock = std::chrono::steady_clock;

  // Full at `now`. REQUIRES: bytes_per_second > 0 and burst_bytes > 0.
  ByteRate(uint64_t bytes_per_second, uint64_t burst_bytes, Clock::time_point now);
  ByteRate(const ByteRate&) = delete;
  ByteRate& operator=(const ByteRate&) = delete;

  // Takes `bytes` at `now` and returns zero when the bucket is not in
  // debt; otherwise takes nothing and returns how long until it is out of
  // debt (at least 1 ns). `now` may lag another caller's: time never
  // runs backwards for the bucket.
  std::chrono::nanoseconds Take(uint64_t bytes, Clock::time_point now);
  // Takes `bytes` at `now` whatever the bucket holds, into debt if need
  // be: for what goes out regardless of the cap, so that what follows it
  // waits for it.
  void Charge(uint64_t bytes, Clock::time_point now);

  uint64_t bytes_per_second() const { return bytes_per_second_; }
  uint64_t burst_bytes() const { return burst_bytes_; }

 private:
  void Refill(Clock::time_point now) REQUIRES(mu_);

  const uint64_t bytes_per_second_;
  const uint64_t burst_bytes_;
  internal::Mutex mu_;
  double tokens_ GUARDED_BY(mu_);  // below zero: debt
  Clock::time_point filled_at_ GUARDED_BY(mu_);
};

}  // namespace walbus::bridge

#endif  // WALBUS_BRIDGE_BYTE_RATE_H_
