// Committer: the single writer. Every write of a running bus (producer
// commits, handler completions, checkpoints, trims) passes through it.
//
// Group commit in the manner of LevelDB's DBImpl::Write: callers queue
// their requests; the caller at the front of the queue becomes the leader,
// takes the requests behind it (up to the group bounds), checks their
// preconditions, assigns sequence numbers in queue order, writes one batch
// (one fsync for the group when any request needs it), then wakes the
// others. Only one leader exists at a time, so sequence order is durable
// commit order, and a lone producer pays no thread hand-off.
//
// Threading: Commit() is thread-safe and blocks. The queue is bounded by
// the number of threads blocked in Commit() (each waits for its own
// requests), so it needs no overflow policy of its own.
#ifndef WALBUS_BUS_CORE_COMMITTER_H_
#define WALBUS_BUS_CORE_COMMITTER_H_

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/core/disk_budget.h"
#include "bus/core/wal_syncer.h"
#include "bus/core/write_set.h"
#include "bus/telemetry/metrics.h"
#include "bus/util/mutex.h"
#include "bus/util/semaphore.h"
#include "storage/db.h"

namespace walbus::internal {

struct CommitRequest {
  WriteSet* writes = nullptr;
  // Needs fsync before completing (kSync producer commits, follow-ups).
  bool sync = false;
  // Committed only if this request, earlier in the same Commit() call,
  // was: its writes were made on top of that one's (a handler's turn).
  // Otherwise the status is Conflict and nothing of it is written.
  const CommitRequest* after = nullptr;
  // The dispatcher's own records (horizon, checkpoints, trims): never
  // fsynced, and when this request leads, its group neither lingers for
  // synced commits nor takes one in, so the dispatcher does not wait out
  // a producer's fsync it has no need of. REQUIRES: !sync.
  bool unsynced_group = false;
  // Results, valid once Commit() returned.
  Status status;
  uint64_t first_seq = 0;

  // Private to the committer.
  std::atomic<bool> done{false};
  // The waiting thread's wake-up (see Committer::Commit). Shared, so that
  // a leader may still signal it after the request itself is gone.
  std::shared_ptr<Semaphore> waker;
};

// Receives what each successful group did, before the next group is
// written. Called by the leader; must not block on anything a committer
// waits for.
class CommitListener {
 public:
  virtual ~CommitListener() = default;
  // The group's events, in sequence order; after its timer changes, so
  // that whoever sees an event (a handler) sees the timer counts it made.
  virtual void OnCommitted(std::vector<std::shared_ptr<const Event>>& events) = 0;
  // What the group did to scheduled events (same caller, same rules).
  virtual void OnTimersChanged(const std::vector<TimerChange>& changes) = 0;
};

struct CommitLimits {
  size_t max_group_commits;
  size_t max_group_bytes;
};

class Committer {
 public:
  // REQUIRES: db (and wal_syncer, when given) outlive the committer.
  // last_seq: the newest committed seq. wal_syncer: told of every write
  // that was not fsynced (a kBuffered bus's); null when none is.
  // disk_budget: told of the outbox bytes each write adds; null when
  // nothing keeps count (a test's committer).
  Committer(storage::Db* db, CommitLimits limits, uint64_t last_seq, CommitListener* listener,
            WalSyncer* wal_syncer = nullptr, DiskBudget* disk_budget = nullptr);
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  // Writes each request atomically (requests are independent: one failing
  // its precondition does not fail the others). Returns when all are done.
  // REQUIRES: the requests are not in any other Commit() call.
  void Commit(std::span<CommitRequest* const> requests);

  // Commit() of one request. Returns its status; *first_seq (optional) gets
  // the seq of its first event.
  Status CommitOne(WriteSet* writes, bool sync, uint64_t* first_seq = nullptr);
  // CommitOne of a request in an unsynced group (CommitRequest::
  // unsynced_group): for the dispatcher's records.
  Status CommitUnsynced(WriteSet* writes);

  uint64_t last_seq() const { return last_seq_.load(std::memory_order_acquire); }
  uint64_t commits() const { return commits_.load(std::memory_order_relaxed); }
  uint64_t groups() const { return groups_.load(std::memory_order_relaxed); }
  // Writes storage refused: for lack of space (ResourceExhausted), and for
  // any other reason.
  uint64_t no_space_failures() const { return no_space_failures_.load(std::memory_order_relaxed); }
  uint64_t other_write_failures() const { return other_write_failures_.load(std::memory_order_relaxed); }
  // True while the newest write failed: storage takes no writes until it
  // recovers (after a full disk, once it has room again).
  bool writes_failing() const { return writes_failing_.load(std::memory_order_relaxed); }
  const Histogram& group_sizes() const { return group_sizes_; }
  const Histogram& write_seconds() const { return write_seconds_; }
  // Events committed so far, by type.
  std::map<std::string, uint64_t> PublishedByType() const;

 private:
  // Writes the group at the queue's front, marks its requests done and
  // wakes their threads and the next leader, after releasing the lock.
  // REQUIRES: this thread's request is at the front.
  void LeadGroup() REQUIRES(mu_);
  // A synced write costs one fsync however many commits it carries. When
  // fewer are queued than the last synced write carried plus those that
  // queued behind it, the rest are on their way (woken by that write and
  // building their next transaction): waiting a fraction of an fsync for
  // them saves whole fsyncs. (PostgreSQL's commit_delay, sized by the
  // previous group instead of a setting; it shrinks as soon as fewer come.)
  void LingerForSyncedGroup() REQUIRES(mu_);
  // Returns whether it wrote and fsynced.
  bool WriteGroup(const std::vector<CommitRequest*>& group);
  // Adds accepted request `r`'s writes to the group's batch: its ops, the
  // versions its expectations advance, its events at seqs from *next on
  // (*next moves past them), and its timer changes.
  void AddToBatch(CommitRequest* r, uint64_t* next);
  // Adds a kAddCounter op to the group's sums (or, past a bound on distinct
  // keys, straight to the batch).
  void AddToCounter(const Op& op);
  // Adds the summed counter's write to the batch: its new value when the
  // current one is known (read from storage at its first touch), else the
  // delta, merged.
  struct CounterSum;
  void AddCounterWrite(CounterSum* sum);
  Status CheckExpectations(const WriteSet& writes);

  storage::Db* const db_;
  const CommitLimits limits_;
  CommitListener* const listener_;
  WalSyncer* const wal_syncer_;
  DiskBudget* const disk_budget_;
  std::atomic<uint64_t> last_seq_;
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> groups_{0};
  std::atomic<uint64_t> no_space_failures_{0};
  std::atomic<uint64_t> other_write_failures_{0};
  std::atomic<bool> writes_failing_{false};
  Histogram group_sizes_{Histogram::SizeBounds()};
  Histogram write_seconds_{Histogram::SecondsBounds()};
  mutable Mutex types_mu_;
  std::map<std::string, uint64_t> published_by_type_ GUARDED_BY(types_mu_);

  Mutex mu_;
  std::deque<CommitRequest*> queue_ GUARDED_BY(mu_);
  // LingerForSyncedGroup's measure of the last synced write, and the
  // leader waiting for its group to fill.
  size_t synced_group_target_ GUARDED_BY(mu_) = 1;
  std::chrono::microseconds last_synced_write_ GUARDED_BY(mu_){0};
  std::shared_ptr<Semaphore> lingering_leader_ GUARDED_BY(mu_);

  // Leader-only state: touched by one leader at a time.
  storage::Batch batch_;
  std::unordered_map<std::string, uint64_t> group_versions_;
  std::vector<std::shared_ptr<const Event>> group_events_;
  std::vector<TimerChange> group_timers_;
  uint64_t group_outbox_bytes_ = 0;  // keys and envelopes of group_events_
  // The group's counter additions, summed per key: one write per counter
  // per group instead of one per commit (handler completions add to the
  // same few counters). Counter keys are only ever added to, never put or
  // deleted by anything else, so moving their writes to the end of the
  // batch changes nothing.
  struct CounterSum {
    storage::CfHandle* cf;
    std::string key;
    uint64_t delta;
    // When the group puts the new value: it, and its entry in
    // counter_values_ (a map's nodes stay put; entries go only while a
    // group is put together, or all at once after a failed write).
    uint64_t value = 0;
    uint64_t* known = nullptr;
  };
  std::vector<CounterSum> group_counters_;
  // Each counter's value after the last write that touched it. A group
  // puts the new value instead of merging its delta: on every merge,
  // RocksDB walks the key's stacked operands in the memtable (to fold them
  // past max_successive_merges), which cost a scheduled publish (one
  // counter per commit) a fifth of its throughput. Dropped after a failed
  // write: what storage holds is then read again.
  std::map<storage::CfHandle*, std::map<std::string, uint64_t, std::less<>>> counter_values_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_COMMITTER_H_
