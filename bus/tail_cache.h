// TailCache: the most recently committed events, in memory, so that
// subscribers that keep up never read the outbox back from disk.
//
// A fixed ring indexed by seq. Overflow policy: overwrite the oldest entry
// (it is on disk; a subscriber that needs it reads it back). Memory is
// bounded by capacity events.
//
// Threading: thread-safe; a short mutex guards the ring.
#ifndef WALBUS_BUS_TAIL_CACHE_H_
#define WALBUS_BUS_TAIL_CACHE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "walbus/event.h"

namespace walbus::internal {

class TailCache {
 public:
  // REQUIRES: capacity >= 1.
  explicit TailCache(size_t capacity);

  // Appends committed events. REQUIRES: ascending seq, each above the last
  // appended.
  void Append(const std::vector<std::shared_ptr<const Event>>& events);

  // Appends to *out the cached events from_seq, from_seq + 1, ... while
  // they are present, at most `limit`. Returns how many were appended.
  size_t Read(uint64_t from_seq, size_t limit, std::vector<std::shared_ptr<const Event>>* out) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<const Event>> ring_;  // GUARDED_BY(mu_)
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_TAIL_CACHE_H_
