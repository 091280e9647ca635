#include "bus/dispatch/progress_writer.h"

#include <algorithm>
#include <cassert>

#include "bus/core/disk_budget.h"
#include "bus/core/fault_point.h"
#include "bus/dispatch/replay.h"
#include "bus/util/log_limiter.h"
#include "storage/keys.h"
#include "storage/records.h"

namespace walbus::internal {

ProgressWriter::ProgressWriter(storage::Db* db, Committer* committer, Registry* registry, ProgressWriterConfig config)
    : db_(db),
      committer_(committer),
      registry_(registry),
      config_(config),
      trimmed_below_(config.trimmed_below),
      compaction_suggested_below_(config.trimmed_below),
      files_dropped_below_(config.trimmed_below) {
  assert(db_ != nullptr && committer_ != nullptr && registry_ != nullptr);
  assert(config_.clock != nullptr && config_.log != nullptr && config_.disk_budget != nullptr);
}

void ProgressWriter::Start() {
  next_checkpoint_ = config_.clock->Now() + config_.checkpoint_interval;
  next_trim_ = config_.clock->Now() + config_.trim_interval;
}

std::optional<ProgressWriter::SteadyTime> ProgressWriter::NextDueMoment(const Subscribers& subs) const {
  std::optional<SteadyTime> due;
  if (CheckpointDirty(subs)) due = next_checkpoint_;
  if (trim_pending_) {
    const SteadyTime trim = trim_waits_for_age_ ? std::max(next_trim_, next_age_out_) : next_trim_;
    due = due ? std::min(*due, trim) : trim;
  }
  return due;
}

bool ProgressWriter::CheckpointDirty(const Subscribers& subs) {
  return std::any_of(subs.begin(), subs.end(), [](const auto& sub) {
    return (sub->replay != nullptr && sub->replay->dirty) || sub->progress.watermark() > sub->durable_checkpoint ||
           sub->duplicates_to_persist > 0;
  });
}

void ProgressWriter::RecordPause(Subscriber* sub, std::optional<std::reference_wrapper<const Event>> at) {
  // For Stats() and for tools on a stopped database: what it waits for.
  {
    MutexLock lock(&sub->paused_mu);
    sub->paused_on_type = at ? at->get().type : std::string();
  }
  WriteSet scope;
  const std::string key = storage::CheckpointKey(sub->id, storage::CheckpointField::kPausedOn);
  if (at) {
    scope.Put(db_->cf(storage::Cf::kCheckpoints), key,
              storage::EncodePause(storage::PauseRecord{at->get().seq, at->get().type}));
  } else {
    scope.Delete(db_->cf(storage::Cf::kCheckpoints), key);
  }
  if (Status s = committer_->CommitUnsynced(&scope); !s.ok()) {
    config_.log->logger().warn("walbus: recording {}'s pause failed (the tool may not show it): {}", sub->name,
                               s.ToString());
  }
}

void ProgressWriter::RecordCleanStop(const Subscribers& subs) {
  // Every handler has returned and its outcome is recorded: nothing runs.
  WriteSet scope;
  for (auto& sub : subs) {
    std::string v;
    storage::PutBe64(&v, sub->durable_horizon);
    scope.Put(db_->cf(storage::Cf::kCheckpoints), storage::CheckpointKey(sub->id, storage::CheckpointField::kStoppedAt),
              std::move(v));
  }
  if (scope.ops.empty()) return;
  if (Status s = committer_->CommitOne(&scope, /*sync=*/true); !s.ok()) {
    config_.log->logger().warn(
        "walbus: recording the clean stop failed (the next open charges the events that "
        "were waiting a run): {}",
        s.ToString());
  }
}

void ProgressWriter::ForgetCleanStop(const Subscriber& sub) {
  // Before anything of it runs: a crash from here on is not a clean stop.
  // Without a matching record (after a crash) there is nothing to forget:
  // the horizon only rises, so a stale one never matches again.
  if (!sub.recovered_clean) return;
  WriteSet scope;
  scope.Delete(db_->cf(storage::Cf::kCheckpoints),
               storage::CheckpointKey(sub.id, storage::CheckpointField::kStoppedAt));
  if (Status s = committer_->CommitOne(&scope, /*sync=*/true); !s.ok()) {
    // Kept, a crash in this process would look clean: it then charges no
    // attempt to the event that was running. Logged; it goes on.
    config_.log->logger().error("walbus: forgetting {}'s clean stop failed: {}", sub.name, s.ToString());
  }
}

bool ProgressWriter::AdvanceHorizons(const std::vector<WorkItem>& ready) {
  // Write-ahead for crash-loop protection: before a seq reaches a handler,
  // the horizon on disk covers it, so after a crash every event that might
  // have been running is known (Subscriber::MayHaveBeenRunning). One small
  // write per max_in_flight events.
  WriteSet scope;
  std::vector<std::pair<Subscriber*, uint64_t>> raised;
  for (const WorkItem& item : ready) {
    Subscriber* sub = item.sub;
    const uint64_t last = item.followers.empty() ? item.event->seq : item.followers.back()->seq;
    if (last <= sub->durable_horizon) continue;
    bool seen = false;
    for (auto& [s, h] : raised) seen |= s == sub;
    if (seen) continue;
    const uint64_t horizon = sub->progress.next() + config_.max_in_flight_per_subscriber;
    std::string v;
    storage::PutBe64(&v, horizon);
    scope.Put(db_->cf(storage::Cf::kCheckpoints), storage::CheckpointKey(sub->id, storage::CheckpointField::kHorizon),
              std::move(v));
    raised.emplace_back(sub, horizon);
  }
  if (raised.empty()) return true;
  if (Status s = committer_->CommitUnsynced(&scope); !s.ok()) {
    config_.log->logger().warn("walbus: writing the dispatch horizon failed (retried): {}", s.ToString());
    return false;
  }
  for (auto& [sub, horizon] : raised) sub->durable_horizon = horizon;
  return true;
}

void ProgressWriter::Checkpoint(const Subscribers& subs, bool force) {
  const auto now = config_.clock->Now();
  if (!force && now < next_checkpoint_) return;
  next_checkpoint_ = now + config_.checkpoint_interval;
  WriteSet scope;
  for (auto& sub : subs) {
    if (sub->replay != nullptr) AddReplayRecord(db_, &scope, sub->replay.get());
    if (sub->progress.watermark() > sub->durable_checkpoint) {
      std::string v;
      storage::PutBe64(&v, sub->progress.watermark());
      scope.Put(db_->cf(storage::Cf::kCheckpoints),
                storage::CheckpointKey(sub->id, storage::CheckpointField::kWatermark), std::move(v));
    }
    if (sub->duplicates_to_persist > 0) {
      scope.AddCounter(db_->cf(storage::Cf::kCheckpoints),
                       storage::CheckpointKey(sub->id, storage::CheckpointField::kDuplicates),
                       sub->duplicates_to_persist);
    }
  }
  if (scope.ops.empty()) return;
  WALBUS_FAULT_POINT("checkpoint.before_write");
  if (Status s = committer_->CommitUnsynced(&scope); !s.ok()) {
    for (auto& sub : subs) {
      if (sub->replay != nullptr) sub->replay->dirty = true;  // written next time
    }
    // A full disk fails this every few milliseconds until it has room.
    static LogLimiter limiter(1);
    uint64_t held = 0;
    if (limiter.Allow(&held)) {
      config_.log->logger().warn("walbus: checkpoint write failed (retried later): {} ({} similar lines held back)",
                                 s.ToString(), held);
    }
    return;
  }
  MutexLock lock(&registry_->mu);
  for (auto& sub : subs) {
    sub->durable_checkpoint = sub->progress.watermark();
    sub->duplicates_to_persist = 0;
    registry_->by_name.at(sub->name).durable.checkpoint = sub->durable_checkpoint;
    if (config_.inbox_window != nullptr) config_.inbox_window->SetCheckpoint(sub->id, sub->durable_checkpoint);
  }
}

void ProgressWriter::NoteWhenTheOldestKeptAgesOut(uint64_t oldest_kept, SteadyTime now) {
  const std::optional<std::chrono::system_clock::time_point> at =
      AgesOutAt(*db_, config_.retention, oldest_kept, config_.max_payload_bytes);
  // Unknown (an unreadable entry, a storage error): judge again on the timer.
  trim_waits_for_age_ = at.has_value();
  next_age_out_ = SteadyTime{};
  if (!at) return;
  const auto wait = *at - config_.clock->WallNow();
  next_age_out_ = now + std::max<SteadyTime::duration>(std::chrono::duration_cast<SteadyTime::duration>(wait),
                                                       SteadyTime::duration::zero());
}

void ProgressWriter::Trim(const Subscribers& subs, bool force) {
  ReclaimTrimmedSpace();  // the last trim's, once a sync made it durable
  const auto now = config_.clock->Now();
  MutexLock lock(&registry_->mu);
  uint64_t safe = registry_->MinCheckpoint(committer_->last_seq()) + 1;
  // A running replay reads the outbox at its position.
  for (const auto& sub : subs) {
    if (sub->replay != nullptr) safe = std::min(safe, sub->replay->NextSeq());
  }
  // Whether the timed trim would trim anything: by count, arithmetic says;
  // by size, only handled events (subscribers moving) change it; by age,
  // time itself does. The dispatcher wakes for it only then.
  const bool ages = config_.retention.age.count() > 0;
  trim_pending_ = false;
  trim_waits_for_age_ = false;
  if (safe <= trimmed_below_) return;
  const bool due_by_time = force || now >= next_trim_;
  // Retention by count is arithmetic; by age or size it reads storage, so
  // it is judged on the timer only.
  if (!due_by_time && config_.retention.reads_storage()) {
    trim_pending_ = ages || safe != safe_at_timed_trim_;
    // Where subscribers stood, the last judgement holds, and with it the
    // moment its oldest kept event ages out.
    trim_waits_for_age_ = ages && safe == safe_at_timed_trim_;
    return;
  }
  const RetentionPolicy count_only{config_.retention.events, {}, 0};
  uint64_t keep_from = RetentionFloor(*db_, due_by_time ? config_.retention : count_only, trimmed_below_, safe,
                                      config_.clock->WallNow(), config_.max_payload_bytes);
  if (!due_by_time && keep_from - trimmed_below_ < config_.trim_every_events) {
    trim_pending_ = keep_from > trimmed_below_;
    return;
  }
  next_trim_ = now + config_.trim_interval;
  if (due_by_time) safe_at_timed_trim_ = safe;
  trim_pending_ = ages && safe > std::max(keep_from, trimmed_below_);
  if (trim_pending_) NoteWhenTheOldestKeptAgesOut(std::max(keep_from, trimmed_below_), now);
  if (keep_from <= trimmed_below_) return;
  // Only the trim point: storage hides what is below it and drops it
  // once the trim is durable (storage::Db::NoteOutboxTrimmed).
  WriteSet scope;
  std::string v;
  storage::PutBe64(&v, keep_from);
  scope.Put(db_->cf(storage::Cf::kMeta), std::string(storage::kMetaTrimmedBelow), v);
  if (Status s = committer_->CommitUnsynced(&scope); !s.ok()) {
    config_.log->logger().warn("walbus: outbox trim failed (retried later): {}", s.ToString());
    trim_pending_ = true;
    trim_waits_for_age_ = false;  // the retry is due at next_trim_
    return;
  }
  WALBUS_FAULT_POINT("trim.after_write");
  trimmed_below_ = keep_from;
  db_->NoteOutboxTrimmed(keep_from);
  trimmed_bytes_since_compaction_ += config_.disk_budget->NoteOutboxTrimmed(keep_from);
  ReclaimTrimmedSpace();
}

void ProgressWriter::ReclaimTrimmedSpace() {
  // What a sync made durable since the last look: the earlier trims'.
  const uint64_t durable = db_->outbox_durable_floor();
  if (durable <= files_dropped_below_) return;
  // Table files wholly below it go at once, without a compaction.
  if (Status s = db_->DropOutboxFilesBelowFloor(); !s.ok()) {
    config_.log->logger().warn("walbus: trimmed outbox files not deleted: {}", s.ToString());
  }
  files_dropped_below_ = durable;
  // The rest (level-0 tables, the table the trim point falls in) give
  // their space back in a compaction; after a large drain, ask for one
  // (in the background). Under a disk budget, once a 16th of it was
  // trimmed: the files count against the budget until then.
  const uint64_t budget = config_.disk_budget->budget();
  if (durable - compaction_suggested_below_ >= kCompactAfterTrimmedEvents ||
      (budget != 0 && trimmed_bytes_since_compaction_ >= budget / 16)) {
    if (Status s = db_->SuggestOutboxCompaction(compaction_suggested_below_, durable); !s.ok()) {
      config_.log->logger().warn("walbus: outbox compaction not scheduled: {}", s.ToString());
    }
    compaction_suggested_below_ = durable;
    trimmed_bytes_since_compaction_ = 0;
  }
}

}  // namespace walbus::internal
