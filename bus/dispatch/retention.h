// Retention: how much of the handled outbox is kept for replay
// (Options::retain_*), and which inbox records compactions may drop
// (Options::inbox_window).
#ifndef WALBUS_BUS_DISPATCH_RETENTION_H_
#define WALBUS_BUS_DISPATCH_RETENTION_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "bus/util/mutex.h"
#include "storage/db.h"
#include "walbus/clock.h"
#include "walbus/options.h"
#include "walbus/status.h"

namespace walbus::internal {

// Options::retain_events, retain_for and retain_bytes.
struct RetentionPolicy {
  uint64_t events = 0;
  std::chrono::milliseconds age{0};
  uint64_t bytes = 0;

  static RetentionPolicy From(const Options& options) {
    return RetentionPolicy{options.retain_events, options.retain_for, options.retain_bytes};
  }
  bool keeps_nothing() const { return events == 0 && age.count() == 0 && bytes == 0; }
  // Whether the floor depends on more than counting (reads storage).
  bool reads_storage() const { return age.count() > 0 || bytes > 0; }
};

// The lowest seq the outbox must keep: every handled event lies below
// `safe` (the lowest checkpoint + 1); of those, the ones every limit of the
// policy still covers are kept. The outbox holds nothing below
// `trimmed_below`. Age is judged by event time (an event ingested with an
// old time counts as old); size by the mean size of 16 entries spread over
// the range. Storage errors keep everything (trim later).
// REQUIRES: trimmed_below <= safe.
uint64_t RetentionFloor(const storage::Db& db, const RetentionPolicy& policy, uint64_t trimmed_below, uint64_t safe,
                        std::chrono::system_clock::time_point now, size_t max_payload_bytes);

// When the event at `oldest_kept`, the oldest a policy by age keeps, will
// be old enough to go (its event time + the age); nullopt when the outbox
// holds no readable event there or storage fails. A timed trim need not
// judge the age again before then. REQUIRES: policy.age > 0.
std::optional<std::chrono::system_clock::time_point> AgesOutAt(const storage::Db& db, const RetentionPolicy& policy,
                                                               uint64_t oldest_kept, size_t max_payload_bytes);

// Tells compactions which inbox records are no longer needed: those at or
// below their subscriber's durable checkpoint (never delivered again but by
// an operator) and handled longer than the window ago, and every record of
// a removed subscriber. Records of a subscriber it has not been told about
// are kept.
//
// Threading: thread-safe; MayDrop runs on storage's compaction threads.
class InboxWindow final : public storage::InboxRetention {
 public:
  // REQUIRES: window > 0; clock outlives this.
  InboxWindow(std::chrono::milliseconds window, const Clock* clock);
  // The durable checkpoint of a subscriber moved (or was recovered).
  void SetCheckpoint(uint32_t subscriber_id, uint64_t checkpoint);
  // The subscriber was removed (OperatorActions::RemoveSubscriber): its records go.
  void Forget(uint32_t subscriber_id);
  bool MayDrop(uint32_t subscriber_id, uint64_t seq, uint64_t handled_unix_ms) const override;
  std::chrono::milliseconds window() const override { return window_; }

 private:
  const std::chrono::milliseconds window_;
  const Clock* const clock_;
  mutable Mutex mu_;
  // The checkpoint of a removed subscriber.
  static constexpr uint64_t kRemoved = UINT64_MAX;
  std::unordered_map<uint32_t, uint64_t> checkpoints_ GUARDED_BY(mu_);
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_RETENTION_H_
