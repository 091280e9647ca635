// Scheduler: fires scheduled events (EventSpec::deliver_at) once they fall
// due, each firing one unit for the committer that removes the timer and
// appends the event to the outbox (bus/core/timer_writes.h).
//
// It holds almost nothing in memory: where the next due timer is, and
// where the pending ones start (every timer below has fired or been
// cancelled; seeks start there, past the deletions of fired ones).
// Commits tell it of timers they add (OnTimersChanged); one seek in
// walbus.timers finds what is due. Overdue timers (after downtime) fire in
// batches of kFireBatch, a batch only while delivery keeps up (or at least
// one each kMinBatchInterval), so live events go on flowing between them.
//
// Threading: OnTimersChanged and the counters are thread-safe; FireDue and
// the rest belong to the dispatcher thread.
#ifndef WALBUS_BUS_DISPATCH_SCHEDULER_H_
#define WALBUS_BUS_DISPATCH_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/committer.h"
#include "bus/core/quarantine.h"
#include "bus/core/timeline.h"
#include "bus/telemetry/log.h"
#include "bus/telemetry/metrics.h"
#include "storage/db.h"

namespace walbus::internal {

class Scheduler {
 public:
  static constexpr size_t kFireBatch = 256;
  static constexpr std::chrono::milliseconds kMinBatchInterval{20};
  // How often the timeline is stored while timers wait.
  static constexpr std::chrono::seconds kStoreTimelineEvery{1};

  struct Counts {
    uint64_t pending = 0;
    uint64_t fired = 0;
    uint64_t cancelled = 0;
  };

  // REQUIRES: every pointer outlives the scheduler.
  Scheduler(storage::Db* db, Committer* committer, Timeline* timeline, Quarantine* quarantine, const BusLog* log,
            size_t max_payload_bytes);

  // Reads the stored counters. REQUIRES: before anything commits.
  Status Load();

  // A group committed these changes. Returns true when one is due before
  // the moment the dispatcher sleeps towards (it must look now).
  bool OnTimersChanged(const std::vector<TimerChange>& changes);

  // Fires what is due (at most a batch) and says how long the dispatcher
  // may sleep before calling again; nullopt when nothing is scheduled.
  // `delivery_keeps_up` tells whether every subscriber is within its
  // window of the outbox's end; asked only when a batch is due.
  std::optional<std::chrono::milliseconds> FireDue(const std::function<bool()>& delivery_keeps_up);
  // Stores the timeline (at Close, and every kStoreTimelineEvery while
  // timers wait). REQUIRES: no FireDue runs meanwhile.
  void StoreTimeline();

  Counts counts() const;
  // As Load() found them.
  Counts counts_at_open() const { return at_open_; }
  // The next due moment as far as the scheduler knows (a cancelled timer
  // may still hold it); nullopt when none waits. Any thread. REQUIRES:
  // storage is open (before the dispatcher's first look it seeks).
  std::optional<uint64_t> next_due_ms() const;
  // Pending timers due by now, counted up to `cap`. Any thread: reads
  // storage. REQUIRES: storage is open.
  uint64_t CountOverdue(uint64_t cap) const;
  const Histogram& lateness() const { return lateness_; }

 private:
  static constexpr uint64_t kNone = ~uint64_t{0};
  // next_due_ before FireBatch first read storage: look at once.
  static constexpr uint64_t kUnknown = 0;
  // Reads up to kFireBatch due timers from scan_from_ and fires them;
  // sets next_due_. Returns false when storage failed (try again later).
  bool FireBatch(uint64_t now_ms);
  // The unit firing one stored timer; false for a record that cannot be
  // read (quarantined, and its removal added to *unreadable).
  bool BuildFire(std::string_view key, std::string_view value, uint64_t now_ms, WriteSet* writes, WriteSet* unreadable);

  storage::Db* const db_;
  Committer* const committer_;
  Timeline* const timeline_;
  Quarantine* const quarantine_;
  const BusLog* const log_;
  const size_t max_payload_bytes_;

  Counts at_open_;
  std::atomic<uint64_t> pending_{0};
  std::atomic<uint64_t> fired_{0};
  std::atomic<uint64_t> cancelled_{0};
  // The earliest due among timers committed since FireDue last looked.
  // Every committed timer is in one of these two until it fires: FireDue
  // lowers next_due_ before it empties earliest_added_.
  std::atomic<uint64_t> earliest_added_{kNone};
  std::atomic<uint64_t> next_due_{kUnknown};  // as FireDue last knew it
  std::atomic<uint64_t> awaited_{0};          // the moment the dispatcher sleeps towards
  Histogram lateness_{Histogram::SecondsBounds()};

  // Dispatcher thread only.
  std::string scan_from_;                   // every pending timer's key is at or above it
  std::atomic<uint64_t> scan_from_due_{0};  // its due moment, for any thread
  std::chrono::steady_clock::time_point last_batch_{};
  std::chrono::steady_clock::time_point timeline_stored_{};
  uint64_t stored_rewind_ = 0;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_SCHEDULER_H_
