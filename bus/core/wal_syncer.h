// WalSyncer: under Durability::kBuffered, bounds what a power cut loses.
//
// A kBuffered commit returns once its batch is in the write-ahead log's
// file, not on the disk: until something fsyncs the log, a power cut may
// take it (a process crash does not). Nothing else syncs that log in
// time: RocksDB does when a memtable is flushed, which at the sizes a
// memory budget allows may be minutes away, or never. So the syncer does:
// at most `interval` after the first unsynced write since its last sync,
// it fsyncs the log, which makes every write that returned before that
// durable. A power cut then loses at most what was acknowledged in the
// last interval, plus the time of one fsync (docs/devices.md).
//
// Idle means asleep: the thread waits on a semaphore until a write marks
// the log unsynced, then until that write's due moment, then syncs; a bus
// that commits nothing makes it wake never.
//
// Threading: NoteUnsyncedWrite() is thread-safe (the committer's leader
// calls it) and never blocks or allocates. Stop() is for the owner's
// thread. The syncer's own thread is started by the constructor and
// joined by Stop() (or the destructor).
#ifndef WALBUS_BUS_CORE_WAL_SYNCER_H_
#define WALBUS_BUS_CORE_WAL_SYNCER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "bus/telemetry/log.h"
#include "bus/util/semaphore.h"
#include "storage/db.h"

namespace walbus::internal {

class WalSyncer {
 public:
  // REQUIRES: db and log outlive the syncer; interval > 0.
  WalSyncer(storage::Db* db, BusLog* log, std::chrono::milliseconds interval);
  ~WalSyncer();
  WalSyncer(const WalSyncer&) = delete;
  WalSyncer& operator=(const WalSyncer&) = delete;

  // A write that was not fsynced has returned: it is made durable within
  // the interval. Only the first one since the last sync costs a signal.
  void NoteUnsyncedWrite();

  // Syncs what is left unsynced, then stops the thread. Idempotent.
  // REQUIRES: no more writes are noted (the bus takes no more commits).
  void Stop();

  // Syncs done, and syncs that failed (each retried an interval later).
  uint64_t syncs() const { return syncs_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  void Run();
  // Clears the mark, then fsyncs the log: a write that returns after the
  // clear marks it again, so none is left out.
  void SyncNow();

  storage::Db* const db_;
  BusLog* const log_;
  const std::chrono::steady_clock::duration interval_;
  // Set by the first unsynced write after a sync; its time, read by the
  // thread only after the signal that follows the store.
  std::atomic<bool> unsynced_{false};
  std::atomic<std::chrono::steady_clock::rep> unsynced_since_{0};
  std::atomic<bool> stopping_{false};
  Semaphore wake_{0};
  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> failures_{0};
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_WAL_SYNCER_H_
