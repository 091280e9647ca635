#include "bus/dispatch/recovery.h"

#include "storage/keys.h"

namespace walbus::internal {
namespace {

// Reads an 8-byte big-endian record; absent reads as `otherwise`.
Status ReadBe64(const storage::Db& db, storage::CfHandle* cf, std::string_view key, uint64_t otherwise, uint64_t* out) {
  std::string v;
  bool found = false;
  Status s = db.Get(cf, key, &v, &found);
  if (!s.ok()) return s;
  if (!found) {
    *out = otherwise;
    return Status::OK();
  }
  if (v.size() != 8) return Status::Corruption("record '" + std::string(key.substr(0, 32)) + "' has a bad size");
  *out = storage::GetBe64(v);
  return Status::OK();
}

Status ReadCounter(const storage::Db& db, uint32_t id, storage::CheckpointField field, uint64_t* out) {
  std::string v;
  bool found = false;
  Status s = db.Get(db.cf(storage::Cf::kCheckpoints), storage::CheckpointKey(id, field), &v, &found);
  if (!s.ok()) return s;
  *out = 0;
  if (found && !storage::DecodeCounter(v, out)) return Status::Corruption("subscriber counter has a bad size");
  return Status::OK();
}

Status ReadProgress(const storage::Db& db, uint32_t id, DurableCounters* d) {
  Status s = ReadBe64(db, db.cf(storage::Cf::kCheckpoints),
                      storage::CheckpointKey(id, storage::CheckpointField::kWatermark), 0, &d->checkpoint);
  if (s.ok()) s = ReadCounter(db, id, storage::CheckpointField::kHandled, &d->handled);
  if (s.ok()) s = ReadCounter(db, id, storage::CheckpointField::kDuplicates, &d->duplicates);
  if (s.ok()) {
    s = ReadBe64(db, db.cf(storage::Cf::kCheckpoints), storage::CheckpointKey(id, storage::CheckpointField::kHorizon),
                 0, &d->horizon);
  }
  if (s.ok()) {
    constexpr uint64_t kNone = ~uint64_t{0};
    uint64_t stopped_at = kNone;
    s = ReadBe64(db, db.cf(storage::Cf::kCheckpoints), storage::CheckpointKey(id, storage::CheckpointField::kStoppedAt),
                 kNone, &stopped_at);
    d->stopped_cleanly = stopped_at == d->horizon;
  }
  if (s.ok()) s = ReadCounter(db, id, storage::CheckpointField::kDeadLettered, &d->dead_lettered);
  if (s.ok()) s = ReadCounter(db, id, storage::CheckpointField::kStaleSkipped, &d->stale_skipped);
  if (s.ok()) s = ReadCounter(db, id, storage::CheckpointField::kDropped, &d->dropped);
  return s;
}

}  // namespace

Status ReadRecoveredState(const storage::Db& db, RecoveredState* state) {
  *state = RecoveredState{};
  storage::CfHandle* meta = db.cf(storage::Cf::kMeta);
  // The last seq is not written on every commit: it is the newest outbox
  // entry, or, when trimming emptied the outbox, the one below the trimmed
  // point (trimming never passes the last seq).
  if (Status s = ReadBe64(db, meta, storage::kMetaTrimmedBelow, 0, &state->trimmed_below); !s.ok()) return s;
  uint64_t outbox_last = 0;
  if (Status s = db.LastOutboxSeq(&outbox_last); !s.ok()) return s;
  state->last_seq = std::max(outbox_last, state->trimmed_below > 0 ? state->trimmed_below - 1 : 0);

  Status bad;
  Status scan = db.Scan(
      storage::Cf::kMeta, storage::kSubscriberMetaPrefix, SIZE_MAX, [&](std::string_view key, std::string_view value) {
        if (value.size() != 12) {
          bad = Status::Corruption("subscriber record '" + std::string(key.substr(0, 64)) + "' has a bad size");
          return false;
        }
        Registry::Entry e;
        e.id = storage::GetBe32(value);
        state->subscribers[std::string(key.substr(storage::kSubscriberMetaPrefix.size()))] = e;
        state->next_subscriber_id = std::max(state->next_subscriber_id, e.id + 1);
        return true;
      });
  if (!scan.ok()) return scan;
  if (!bad.ok()) return bad;
  scan = db.Scan(
      storage::Cf::kMeta, storage::kRemovedSubscriberMetaPrefix, SIZE_MAX,
      [&](std::string_view key, std::string_view value) {
        uint32_t id = 0;
        if (!storage::ParseRemovedSubscriberKey(key, &id) || value.size() != 9) {
          bad = Status::Corruption("removed-subscriber record '" + std::string(key.substr(0, 64)) + "' is malformed");
          return false;
        }
        state->removed_subscriber_ids.push_back(id);
        if (value[8] == 0) state->removed_with_inbox_left.push_back(id);
        state->next_subscriber_id = std::max(state->next_subscriber_id, id + 1);
        return true;
      });
  if (!scan.ok()) return scan;
  if (!bad.ok()) return bad;
  for (auto& [name, e] : state->subscribers) {
    if (Status s = ReadProgress(db, e.id, &e.durable); !s.ok()) return s;
    if (e.durable.checkpoint > state->last_seq) {
      return Status::Corruption("subscriber " + name + " checkpoint is above the last seq");
    }
    // Only events that existed then can have been handed to a handler.
    e.durable.horizon = std::min(e.durable.horizon, state->last_seq);
  }
  return Status::OK();
}

}  // namespace walbus::internal
