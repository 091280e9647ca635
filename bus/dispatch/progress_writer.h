// ProgressWriter: what the dispatcher makes durable of delivery, apart
// from the handlers' own commits:
//   - checkpoints: each subscriber's watermark, its duplicates counted
//     since, its replay's record (on a timer, and at Stop);
//   - dispatch horizons, written ahead of handing seqs to workers
//     (crash-loop protection, Subscriber::MayHaveBeenRunning);
//   - pause records and clean-stop records;
//   - trimming the outbox below every subscriber's checkpoint, under the
//     retention policy, with a compaction asked for after large drains.
// It decides when a timed write is due and says so (NextDueMoment), so the
// dispatcher sleeps towards it instead of looking at a fixed rate.
//
// Threading: the dispatcher thread's alone; it takes the registry's mu to
// trim and to publish checkpoints.
#ifndef WALBUS_BUS_DISPATCH_PROGRESS_WRITER_H_
#define WALBUS_BUS_DISPATCH_PROGRESS_WRITER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "bus/core/committer.h"
#include "bus/core/disk_budget.h"
#include "bus/dispatch/retention.h"
#include "bus/dispatch/subscriber.h"
#include "bus/dispatch/work.h"
#include "bus/telemetry/log.h"
#include "storage/db.h"
#include "walbus/clock.h"

namespace walbus::internal {

struct ProgressWriterConfig {
  std::chrono::milliseconds checkpoint_interval;
  std::chrono::milliseconds trim_interval;
  uint64_t trim_every_events;
  RetentionPolicy retention;
  InboxWindow* inbox_window;  // null without Options::inbox_window
  DiskBudget* disk_budget;    // told of each trim
  size_t max_in_flight_per_subscriber;
  size_t max_payload_bytes;
  uint64_t trimmed_below;  // the outbox holds nothing below this seq
  const Clock* clock;
  const BusLog* log;
};

class ProgressWriter {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using Subscribers = std::vector<std::shared_ptr<Subscriber>>;

  // REQUIRES: every pointer outlives the writer.
  ProgressWriter(storage::Db* db, Committer* committer, Registry* registry, ProgressWriterConfig config);
  ProgressWriter(const ProgressWriter&) = delete;
  ProgressWriter& operator=(const ProgressWriter&) = delete;

  // The timed writes count from now.
  void Start();

  // Keeps where `sub` is paused (`at`), or that it is not (nullopt), in
  // memory and in its PauseRecord.
  void RecordPause(Subscriber* sub, std::optional<std::reference_wrapper<const Event>> at);
  // The clean-stop record of each subscriber: written at Stop (REQUIRES:
  // no handler runs), deleted when a subscriber is added, before anything
  // of it runs.
  void RecordCleanStop(const Subscribers& subs);
  void ForgetCleanStop(const Subscriber& sub);
  // Persists a horizon above every seq of `ready` about to be handed to
  // workers; false when that write failed (nothing is handed out then).
  bool AdvanceHorizons(const std::vector<WorkItem>& ready);
  // Writes the checkpoints that moved, when due (or `force`).
  void Checkpoint(const Subscribers& subs, bool force);
  // Trims what retention lets go below every subscriber's checkpoint and
  // every running replay: by count at once, by age or size when due (or
  // `force`).
  void Trim(const Subscribers& subs, bool force);
  // After a trim: gives back the disk space of the trims made durable
  // since the last call.
  void ReclaimTrimmedSpace();
  // When a timed checkpoint or trim wants to run, on config.clock; nullopt
  // when only progress can give it work.
  std::optional<SteadyTime> NextDueMoment(const Subscribers& subs) const;
  // The outbox holds nothing below this seq.
  uint64_t trimmed_below() const { return trimmed_below_; }

 private:
  // Whether a checkpoint would write anything.
  static bool CheckpointDirty(const Subscribers& subs);
  // Sets next_age_out_ (and trim_waits_for_age_ when known) from the time
  // of the oldest event retention by age keeps.
  void NoteWhenTheOldestKeptAgesOut(uint64_t oldest_kept, SteadyTime now);

  storage::Db* const db_;
  Committer* const committer_;
  Registry* const registry_;
  const ProgressWriterConfig config_;

  SteadyTime next_checkpoint_;
  SteadyTime next_trim_;
  // A timed trim at next_trim_ would trim something (see Trim).
  bool trim_pending_ = false;
  // Only the ageing of the oldest event kept by age can give the pending
  // trim something, and not before next_age_out_: it waits for that
  // instead of judging the age again every trim_interval. (A wall clock
  // stepped forward meanwhile makes that trim late, by at most the step.)
  bool trim_waits_for_age_ = false;
  SteadyTime next_age_out_;
  // Where subscribers stood at the last timed trim (retention by size
  // changes only when they move).
  uint64_t safe_at_timed_trim_ = 0;
  uint64_t trimmed_below_;
  // Trimmed outbox entries between compaction requests, and where the last
  // request ended.
  static constexpr uint64_t kCompactAfterTrimmedEvents = 1u << 20;
  uint64_t trimmed_bytes_since_compaction_ = 0;  // as the disk budget counts them
  uint64_t compaction_suggested_below_;
  // Where the outbox's table files were last deleted up to.
  uint64_t files_dropped_below_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_PROGRESS_WRITER_H_
