// Backoff: how long a failed event waits before its next attempt.
#ifndef WALBUS_BUS_DISPATCH_BACKOFF_H_
#define WALBUS_BUS_DISPATCH_BACKOFF_H_

#include <chrono>
#include <cstdint>

#include "walbus/bus.h"

namespace walbus::internal {

// Full jitter: uniform in [1 ms, min(cap, base * 2^(attempt-1))], drawn from
// `random` (any 64 random bits). The 1 ms floor keeps a failing subject
// from spinning a core. REQUIRES: attempt >= 1.
std::chrono::milliseconds BackoffDelay(const RetryPolicy& policy, uint32_t attempt, uint64_t random);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_BACKOFF_H_
