#include "bus/dispatch/backoff.h"

#include <algorithm>
#include <cassert>

namespace walbus::internal {

std::chrono::milliseconds BackoffDelay(const RetryPolicy& policy, uint32_t attempt, uint64_t random) {
  assert(attempt >= 1);
  const int64_t base = std::max<int64_t>(1, policy.base.count());
  const int64_t cap = std::max<int64_t>(base, policy.cap.count());
  const uint32_t doublings = std::min<uint32_t>(attempt - 1, 30);
  const int64_t ceiling = std::min<int64_t>(cap, base << doublings);
  return std::chrono::milliseconds(1 + static_cast<int64_t>(random % static_cast<uint64_t>(ceiling)));
}

}  // namespace walbus::internal
