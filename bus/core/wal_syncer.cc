#include "bus/core/wal_syncer.h"

#include <cassert>

namespace walbus::internal {

WalSyncer::WalSyncer(storage::Db* db, BusLog* log, std::chrono::milliseconds interval)
    : db_(db), log_(log), interval_(interval), thread_([this] { Run(); }) {
  assert(db_ != nullptr && log_ != nullptr);
  assert(interval.count() > 0);
}

WalSyncer::~WalSyncer() { Stop(); }

void WalSyncer::NoteUnsyncedWrite() {
  if (unsynced_.load(std::memory_order_relaxed) || unsynced_.exchange(true, std::memory_order_acq_rel)) return;
  unsynced_since_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  wake_.Signal();
}

void WalSyncer::Stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true, std::memory_order_release);
  wake_.Signal();
  thread_.join();
  if (unsynced_.load(std::memory_order_acquire)) SyncNow();
}

void WalSyncer::Run() {
  for (;;) {
    wake_.Wait();  // a first unsynced write, or Stop()
    if (stopping_.load(std::memory_order_acquire)) return;
    const std::chrono::steady_clock::time_point since{
        std::chrono::steady_clock::duration(unsynced_since_.load(std::memory_order_relaxed))};
    // Only Stop() signals meanwhile: the mark is set until SyncNow.
    if (wake_.WaitUntil(since + interval_)) return;
    SyncNow();
  }
}

void WalSyncer::SyncNow() {
  unsynced_.store(false, std::memory_order_release);
  const Status s = db_->SyncLog();
  if (s.ok()) {
    syncs_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  failures_.fetch_add(1, std::memory_order_relaxed);
  // Retried an interval from now, whether or not another write comes.
  log_->logger().error("walbus: syncing the write-ahead log failed (retried in {} ms): {}",
                       std::chrono::duration_cast<std::chrono::milliseconds>(interval_).count(), s.ToString());
  NoteUnsyncedWrite();
}

}  // namespace walbus::internal
