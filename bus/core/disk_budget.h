// DiskBudget: Options::disk_budget. What walbus's own records take on
// disk, by kind, and whether an application's commit still fits.
//
//   outbox        counted: the bytes of every event committed (key and
//                 envelope) from the trim point on, kept by block of
//                 seqs, so a trim frees them at once, before any
//                 compaction: a block it passed whole exactly, the block
//                 it ends in by the share of its seqs passed. What the
//                 outbox held when the bus opened is storage's estimate
//                 of that key range, freed the same way over its seqs.
//                 Events retained for replay (Options::retain_for) are
//                 below no trim: they count.
//   dead letters, quarantine, scheduled events
//                 measured: their whole column families as storage holds
//                 them (files and memtables; a deleted entry counts until
//                 a compaction drops it).
//   log           measured: the write-ahead log's files, which hold every
//                 column family's writes until each has flushed them.
//                 Under a budget the log is bounded (MaxLogBytes).
// The application's column families, the inbox, checkpoints and the
// other small records do not count.
//
// The stores are measured again once the bytes admitted since the last
// measure reach a 64th of the budget, and before refusing anything (when
// the last measure is 50 ms old or more), so
// use may pass the budget by that much, plus what the bus's own work
// (handlers' follow-up events, fired scheduled events, dead letters) adds:
// that work is never refused, or an event could not complete.
//
// Threading: thread-safe. One mutex, held for a map update per commit
// group and trim, and for a few storage property reads when measuring.
#ifndef WALBUS_BUS_CORE_DISK_BUDGET_H_
#define WALBUS_BUS_CORE_DISK_BUDGET_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "bus/telemetry/metrics.h"
#include "bus/util/mutex.h"
#include "storage/db.h"
#include "walbus/status.h"

namespace walbus::internal {

struct DiskUse {
  uint64_t outbox = 0;
  uint64_t dead_letters = 0;
  uint64_t quarantine = 0;
  uint64_t scheduled = 0;
  uint64_t log = 0;
  uint64_t total() const { return outbox + dead_letters + quarantine + scheduled + log; }
};

// Storage's bound on the write-ahead log (storage::OpenOptions::
// max_log_bytes) under a disk budget of `budget` bytes (0: none): a 16th
// of it, at least kMinLogBound, at most storage's default. Past it, the
// column families holding the oldest log file flush, so it can go.
uint64_t MaxLogBytes(uint64_t budget);
inline constexpr uint64_t kMinLogBound = uint64_t{4} << 20;

// Measures `db` now, the outbox as storage estimates its key range from
// `trimmed_below` on (a few storage property reads): for a database no
// bus of this process holds (the tool), and for the outbox at open.
DiskUse MeasureDiskUse(const storage::Db& db, uint64_t trimmed_below);
// walbus_disk_use_bytes{kind}: a running bus's metrics and the tool's.
void WriteDiskUseMetrics(MetricsWriter& w, const DiskUse& use);

class DiskBudget {
 public:
  // budget: bytes, 0 for none (Admit then admits everything; the use is
  // still kept for the metrics). The outbox holds the events of seqs
  // [trimmed_below, last_seq]. REQUIRES: db outlives this.
  DiskBudget(storage::Db* db, uint64_t budget, uint64_t trimmed_below, uint64_t last_seq);
  DiskBudget(const DiskBudget&) = delete;
  DiskBudget& operator=(const DiskBudget&) = delete;

  uint64_t budget() const { return budget_; }
  // The committer, after each write of events: `bytes` of outbox entries
  // of seqs [first_seq, last_seq]. REQUIRES: first_seq <= last_seq, above
  // every seq noted before.
  void NoteCommitted(uint64_t first_seq, uint64_t last_seq, uint64_t bytes);
  // The dispatcher's trims: the outbox holds nothing below `seq` now.
  // Returns the bytes of outbox entries the trim freed, as counted.
  uint64_t NoteOutboxTrimmed(uint64_t seq);
  // Options::drop_oldest_types: the event at `seq`, of `bytes` of outbox
  // entry, was deleted. Returns the bytes freed, as counted (0 when its
  // seq was trimmed already). REQUIRES: `seq` was noted committed.
  uint64_t NoteDropped(uint64_t seq, uint64_t bytes);
  DiskUse Measure();
  // OK when `bytes` more fit in the budget, and counts them; otherwise
  // ResourceExhausted naming the budget and what fills it, and counts the
  // refusal unless `count_refusal` is false (the caller tries again after
  // making room), and sets *short_by (optional) to the bytes missing.
  // Always OK without a budget.
  [[nodiscard]] Status Admit(uint64_t bytes, bool count_refusal = true, uint64_t* short_by = nullptr);
  // A refusal Admit did not count.
  void CountRefusal() { refusals_.fetch_add(1, std::memory_order_relaxed); }
  // Commits refused, in this process.
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }
  // Seconds until `use` reaches the budget at the rate use grew over the
  // last kRateWindow or more (each call at least that long after the
  // window's start begins the next): 0 once reached, +infinity without a
  // budget, while use is not growing, and until a window has passed.
  double SecondsToFull(const DiskUse& use, std::chrono::steady_clock::time_point now);
  static constexpr std::chrono::seconds kRateWindow{10};

 private:
  // Seqs per block of the outbox's ledger (one map entry each).
  static constexpr uint64_t kSeqsPerBlockShift = 12;
  // The bytes of outbox seqs [first, last] of one block (the one at open
  // may span many).
  struct Block {
    uint64_t first;
    uint64_t last;
    uint64_t bytes;
  };

  DiskUse MeasureLocked() REQUIRES(mu_);

  storage::Db* const db_;
  const uint64_t budget_;
  const uint64_t remeasure_every_;  // admitted bytes between measures
  std::atomic<uint64_t> refusals_{0};
  Mutex mu_;
  // By block number (seq >> kSeqsPerBlockShift) of its last seq: each
  // commit group's bytes go to that block. Their seq ranges are disjoint
  // and ascend with the key.
  std::map<uint64_t, Block> outbox_blocks_ GUARDED_BY(mu_);
  uint64_t outbox_bytes_ GUARDED_BY(mu_) = 0;                                         // their sum
  DiskUse measured_ GUARDED_BY(mu_);                                                  // the stores' last measure
  uint64_t admitted_since_ GUARDED_BY(mu_) = 0;                                       // bytes admitted after it
  std::optional<std::chrono::steady_clock::time_point> measured_at_ GUARDED_BY(mu_);  // of the stores
  static constexpr std::chrono::milliseconds kFreshMeasure{50};
  // SecondsToFull's window: where it began, and the rate of the last one.
  std::optional<std::pair<std::chrono::steady_clock::time_point, uint64_t>> window_start_ GUARDED_BY(mu_);
  double bytes_per_second_ GUARDED_BY(mu_) = 0;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_DISK_BUDGET_H_
