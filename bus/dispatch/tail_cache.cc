#include "bus/dispatch/tail_cache.h"

#include <algorithm>
#include <cassert>

namespace walbus::internal {

TailCache::TailCache(size_t capacity, size_t max_bytes) : max_bytes_(max_bytes), ring_(capacity) {
  assert(capacity >= 1);
}

size_t TailCache::Footprint(const Event& e) {
  return sizeof(Event) + e.type.size() + e.source.size() + e.subject.size() + e.content_type.size() +
         e.traceparent.size() + e.data.size();
}

void TailCache::Evict(uint64_t seq) {
  auto& slot = ring_[seq % ring_.size()];
  if (slot == nullptr || slot->seq != seq) return;
  bytes_ -= Footprint(*slot);
  slot.reset();
}

void TailCache::Append(const std::vector<std::shared_ptr<const Event>>& events) {
  MutexLock lock(&mu_);
  for (const auto& e : events) {
    auto& slot = ring_[e->seq % ring_.size()];
    if (slot != nullptr) {
      bytes_ -= Footprint(*slot);
      oldest_ = std::max(oldest_, slot->seq + 1);
    }
    slot = e;
    bytes_ += Footprint(*e);
    if (oldest_ == 0) oldest_ = e->seq;
    while (bytes_ > max_bytes_ && oldest_ < e->seq) Evict(oldest_++);
  }
}

size_t TailCache::Read(uint64_t from_seq, size_t limit, std::vector<std::shared_ptr<const Event>>* out) const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (uint64_t seq = from_seq; n < limit; ++seq, ++n) {
    const auto& slot = ring_[seq % ring_.size()];
    if (slot == nullptr || slot->seq != seq) break;
    out->push_back(slot);
  }
  return n;
}

size_t TailCache::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace walbus::internal
