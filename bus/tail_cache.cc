#include "bus/tail_cache.h"

#include <cassert>

namespace walbus::internal {

TailCache::TailCache(size_t capacity) : ring_(capacity) { assert(capacity >= 1); }

void TailCache::Append(const std::vector<std::shared_ptr<const Event>>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : events) ring_[e->seq % ring_.size()] = e;
}

size_t TailCache::Read(uint64_t from_seq, size_t limit,
                       std::vector<std::shared_ptr<const Event>>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (uint64_t seq = from_seq; n < limit; ++seq, ++n) {
    const auto& slot = ring_[seq % ring_.size()];
    if (slot == nullptr || slot->seq != seq) break;
    out->push_back(slot);
  }
  return n;
}

}  // namespace walbus::internal
