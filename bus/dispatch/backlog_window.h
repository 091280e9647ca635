// BacklogWindow: events read back from the outbox for a subscriber behind
// the tail cache, kept for the other subscribers catching up over the same
// seqs, so that each stored event is read and decoded once however many
// subscribers fetch it.
//
// Contiguous seqs from first(). A null slot is a seq with nothing to
// deliver: trimmed, or unreadable and quarantined already. Bounded by
// max_events and by max_bytes (TailCache::Footprint): past either, the
// oldest slots go (the newest one always stays). A subscriber that finds
// its seq gone reads the outbox again.
//
// Threading: not thread-safe; the dispatcher thread owns it.
#ifndef WALBUS_BUS_DISPATCH_BACKLOG_WINDOW_H_
#define WALBUS_BUS_DISPATCH_BACKLOG_WINDOW_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "walbus/event.h"

namespace walbus::internal {

class BacklogWindow {
 public:
  using Slot = std::shared_ptr<const Event>;

  // REQUIRES: max_events >= 1.
  BacklogWindow(size_t max_events, size_t max_bytes);

  // Holds `slot` for `seq`. A seq that does not follow the last one held
  // starts the window over: subscribers far apart do not share reads.
  void Put(uint64_t seq, Slot slot);
  // Appends to *out the slots held for from_seq, from_seq + 1, ..., at
  // most `limit`. Returns how many (0 when from_seq is not held).
  size_t Read(uint64_t from_seq, size_t limit, std::vector<Slot>* out) const;
  // Drops the slots below `seq`: no subscriber will fetch them again.
  void DropBelow(uint64_t seq);
  // Empties the slot of `seq`, if held: its event was deleted
  // (Options::drop_oldest_types), nothing to deliver.
  void Forget(uint64_t seq);

  size_t size() const { return slots_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  void DropOldest();

  const size_t max_events_;
  const size_t max_bytes_;
  std::deque<Slot> slots_;
  uint64_t first_ = 0;  // the seq of slots_.front()
  size_t bytes_ = 0;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_BACKLOG_WINDOW_H_
