// Quarantine: input that failed verification, kept (capped) for an
// operator, never parsed again by walbus itself.
//
// Bounded by entry count and bytes: adding past either bound drops the
// oldest entries in the same batch (eviction is counted). The arrival
// numbers and sizes of the live entries are held in memory (at most
// max_entries of them) so eviction needs no reads.
//
// Threading: thread-safe; one mutex serializes additions.
#ifndef WALBUS_BUS_CORE_QUARANTINE_H_
#define WALBUS_BUS_CORE_QUARANTINE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string_view>

#include "bus/core/committer.h"
#include "bus/telemetry/log.h"
#include "bus/util/mutex.h"
#include "storage/db.h"
#include "walbus/clock.h"

namespace walbus::internal {

class Quarantine {
 public:
  Quarantine(storage::Db* db, Committer* committer, const Clock* clock, const BusLog* log, size_t max_entries,
             size_t max_bytes);

  // Reads the live entries' arrival numbers and sizes. Called once on open.
  Status Load();

  // Stores `raw` (capped) with where it came from and why it was refused.
  Status Add(std::string_view raw, std::string_view source, std::string_view reason);

  uint64_t added() const { return added_.load(std::memory_order_relaxed); }
  uint64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }
  // The two counts as Load() found them (the database's, before this open).
  uint64_t added_at_open() const { return added_at_open_; }
  uint64_t evicted_at_open() const { return evicted_at_open_; }

 private:
  struct Entry {
    uint64_t arrival;
    size_t bytes;
  };
  storage::Db* const db_;
  Committer* const committer_;
  const Clock* const clock_;
  const BusLog* const log_;
  const size_t max_entries_;
  const size_t max_bytes_;

  Mutex mu_;
  std::deque<Entry> entries_ GUARDED_BY(mu_);  // oldest first
  size_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t next_arrival_ GUARDED_BY(mu_) = 1;
  std::atomic<uint64_t> added_{0};
  std::atomic<uint64_t> evicted_{0};
  uint64_t added_at_open_ = 0;  // set by Load(), before other threads run
  uint64_t evicted_at_open_ = 0;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_QUARANTINE_H_
