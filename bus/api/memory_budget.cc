#include "bus/api/memory_budget.h"

#include <algorithm>
#include <cassert>

namespace walbus::internal {
namespace {

// What one event is taken to cost where a share in bytes becomes a bound
// in events: in the tail cache (TailCache::Footprint counts the bytes, so
// this sizes only its ring) and in flight, where catch-up holds events
// read back from disk.
constexpr size_t kTailBytesPerEvent = 256;
constexpr size_t kBudgetBytesPerInFlightEvent = 4096;

}  // namespace

size_t StorageShare(size_t memory_budget) {
  assert(memory_budget >= kMinMemoryBudget);
  return memory_budget / 2;
}

Options WithinMemoryBudget(const Options& options) {
  assert(options.memory_budget >= kMinMemoryBudget);
  const size_t budget = options.memory_budget;
  Options o = options;
  o.tail_cache_bytes = std::min(o.tail_cache_bytes, budget / 4);
  o.tail_cache_events = std::min(o.tail_cache_events, std::max<size_t>(16, o.tail_cache_bytes / kTailBytesPerEvent));
  o.max_in_flight_per_subscriber =
      std::min(o.max_in_flight_per_subscriber, std::max<size_t>(16, budget / kBudgetBytesPerInFlightEvent));
  o.max_group_bytes = std::min(o.max_group_bytes, budget / 32);
  return o;
}

}  // namespace walbus::internal
