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
    // Every reader has passed it already (DropBelow ran before the commit
    // reached here): nobody will ask for it.
    if (e->seq < oldest_) continue;
    auto& slot = ring_[e->seq % ring_.size()];
    if (slot != nullptr) {
      bytes_ -= Footprint(*slot);
      oldest_ = std::max(oldest_, slot->seq + 1);
    }
    slot = e;
    bytes_ += Footprint(*e);
    if (oldest_ == 0) oldest_ = e->seq;
    newest_ = e->seq;
    while (bytes_ > max_bytes_ && oldest_ < e->seq) Evict(oldest_++);
  }
}

void TailCache::DropBelow(uint64_t seq) {
  MutexLock lock(&mu_);
  // Nothing above the newest appended seq is cached yet, and slots more
  // than a ring below `end` were overwritten: one pass over the ring at
  // most, however far `seq` jumped.
  const uint64_t end = std::min(seq, newest_ + 1);
  for (uint64_t s = std::max(oldest_, end > ring_.size() ? end - ring_.size() : 0); s < end; ++s) Evict(s);
  // Past the newest too: a commit that reaches Append after the readers
  // passed it (read from the outbox) is not kept.
  oldest_ = std::max(oldest_, seq);
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

void TailCache::Forget(uint64_t seq) {
  MutexLock lock(&mu_);
  Evict(seq);
}

uint64_t TailCache::newest() const {
  MutexLock lock(&mu_);
  return newest_;
}

}  // namespace walbus::internal
