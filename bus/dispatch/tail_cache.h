// TailCache: the most recently committed events, in memory, so that
// subscribers that keep up never read the outbox back from disk.
//
// A fixed ring indexed by seq. Overflow policy: overwrite the oldest entry
// (it is on disk; a subscriber that needs it reads it back). Memory is
// bounded by capacity events and by max_bytes of event data: past either,
// the oldest entries go (the newest one always stays).
//
// Threading: thread-safe; a short mutex guards the ring.
#ifndef WALBUS_BUS_DISPATCH_TAIL_CACHE_H_
#define WALBUS_BUS_DISPATCH_TAIL_CACHE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "bus/util/mutex.h"
#include "walbus/event.h"

namespace walbus::internal {

class TailCache {
 public:
  // REQUIRES: capacity >= 1.
  TailCache(size_t capacity, size_t max_bytes);

  // What one event counts against max_bytes: its variable-size fields and
  // a fixed share for the rest.
  static size_t Footprint(const Event& e);

  // Appends committed events, but none below a seq DropBelow passed.
  // REQUIRES: ascending seq, each above the last appended.
  void Append(const std::vector<std::shared_ptr<const Event>>& events);

  // Appends to *out the cached events from_seq, from_seq + 1, ... while
  // they are present, at most `limit`. Returns how many were appended.
  size_t Read(uint64_t from_seq, size_t limit, std::vector<std::shared_ptr<const Event>>* out) const;

  // Drops every cached event below `seq`: no reader will ask for them
  // from here (a reader that does reads them from the outbox). Frees their
  // memory now rather than when the bounds push them out.
  void DropBelow(uint64_t seq);
  // Drops the cached event at `seq`, if there (Options::drop_oldest_types
  // deleted it): a reader then finds the seq missing and reads the outbox.
  void Forget(uint64_t seq);
  // The last appended seq (0: none yet).
  uint64_t newest() const;
  // What the cached events count against max_bytes now.
  size_t bytes() const;

 private:
  mutable Mutex mu_;
  // Drops the cached event with this seq, if it is still there.
  void Evict(uint64_t seq) REQUIRES(mu_);

  const size_t max_bytes_;
  std::vector<std::shared_ptr<const Event>> ring_ GUARDED_BY(mu_);
  size_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t oldest_ GUARDED_BY(mu_) = 0;  // no cached seq below it.
  uint64_t newest_ GUARDED_BY(mu_) = 0;  // the last appended seq (0: none yet)
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_TAIL_CACHE_H_
