#include "bus/dispatch/backlog_window.h"

#include <cassert>

#include "bus/dispatch/tail_cache.h"

namespace walbus::internal {

namespace {

size_t SlotBytes(const BacklogWindow::Slot& slot) { return slot ? TailCache::Footprint(*slot) : sizeof(slot); }

}  // namespace

BacklogWindow::BacklogWindow(size_t max_events, size_t max_bytes) : max_events_(max_events), max_bytes_(max_bytes) {
  assert(max_events >= 1);
}

void BacklogWindow::Put(uint64_t seq, Slot slot) {
  if (slots_.empty() || seq != first_ + slots_.size()) {
    slots_.clear();
    bytes_ = 0;
    first_ = seq;
  }
  bytes_ += SlotBytes(slot);
  slots_.push_back(std::move(slot));
  while (slots_.size() > 1 && (slots_.size() > max_events_ || bytes_ > max_bytes_)) DropOldest();
}

size_t BacklogWindow::Read(uint64_t from_seq, size_t limit, std::vector<Slot>* out) const {
  if (from_seq < first_ || from_seq - first_ >= slots_.size()) return 0;
  size_t n = 0;
  for (size_t i = from_seq - first_; i < slots_.size() && n < limit; ++i, ++n) out->push_back(slots_[i]);
  return n;
}

void BacklogWindow::DropBelow(uint64_t seq) {
  while (!slots_.empty() && first_ < seq) DropOldest();
}

void BacklogWindow::Forget(uint64_t seq) {
  if (seq < first_ || seq - first_ >= slots_.size()) return;
  Slot& slot = slots_[seq - first_];
  bytes_ -= SlotBytes(slot);
  slot = nullptr;
  bytes_ += SlotBytes(slot);
}

void BacklogWindow::DropOldest() {
  bytes_ -= SlotBytes(slots_.front());
  slots_.pop_front();
  ++first_;
}

}  // namespace walbus::internal
