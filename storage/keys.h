// Key and value encodings of the walbus column families (docs/design.md,
// "On-disk layout"). Keys are fixed-width big-endian so that lexical order
// is numeric order.
//
// Decoders take bytes read back from disk, which may be corrupt: they check
// sizes and return false instead of reading out of bounds.
#ifndef WALBUS_STORAGE_KEYS_H_
#define WALBUS_STORAGE_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "walbus/event.h"

namespace walbus::storage {

void PutBe32(std::string* out, uint32_t v);
void PutBe64(std::string* out, uint64_t v);
// REQUIRES: in.size() >= 4 / 8.
uint32_t GetBe32(std::string_view in);
uint64_t GetBe64(std::string_view in);

// outbox: be64(seq).
std::string OutboxKey(uint64_t seq);
bool ParseOutboxKey(std::string_view key, uint64_t* seq);

// inbox: the event id and the subscriber id, in an order each database
// keeps for its life (its format version says which).
// - kEventFirst (format 2): 16-byte event id + be32(subscriber id). Event
//   ids are time-ordered, so every subscriber's new records land at the
//   end of one key range, above the whole history: flushed tables hardly
//   overlap and move down without rewrites.
// - kSubscriberFirst (format 1): be32(subscriber id) + 16-byte event id.
//   Each subscriber's records ascend in a range of their own, and every
//   flush writes into all of them.
enum class InboxLayout : uint8_t { kSubscriberFirst, kEventFirst };
// REQUIRES: event_id16.size() == 16.
std::string InboxKey(InboxLayout layout, uint32_t subscriber_id, std::string_view event_id16);
// False for a key of another size.
bool ParseInboxKey(InboxLayout layout, std::string_view key, uint32_t* subscriber_id);
// The same record's key in layout `to` (format upgrades, and tests that
// write an older format). False for a key of another size.
bool RelayInboxKey(InboxLayout from, std::string_view key, InboxLayout to, std::string* out);

// An event id's 16 bytes, as keys hold them.
inline std::string_view IdBytes(const EventId& id) {
  return std::string_view(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size());
}
// Inbox value: be64(seq) + be64(handled at, unix ms) + be32(handler runs
// it took: 1 for a first-time success, 0 for a stale skip). Records
// written before the runs were counted are 16 bytes.
std::string InboxValue(uint64_t seq, uint64_t handled_unix_ms, uint32_t runs);

// versions: be32(column family id) + user key -> be64(version).
std::string VersionKey(uint32_t cf_id, std::string_view key);
// versions also hold the ingest records, in key spaces of their own: a
// be32 tag no column family id reaches (ids count up from 1), then the
// dedup scope, '\0' and the rest.
// - dedup: tag 0xFFFFFFFF, rest = the 16-byte event id; version 1 once
//   the scope took the event.
// - order: tag 0xFFFFFFFE, rest = the sender's order key; version = the
//   last position taken for that key.
std::string IngestDedupKey(std::string_view scope, const EventId& id);
std::string IngestOrderKey(std::string_view scope, std::string_view order_key);

// versions also hold the state of each scheduled event, under tag
// 0xFFFFFFFD: be32 tag + 16-byte event id -> be64 TimerStateValue. The
// state only moves forward (pending, then fired or cancelled), each move
// an ExpectVersion on the value before, so the committer decides a cancel
// racing a firing in commit order.
std::string TimerStateKey(const EventId& id);
enum class TimerState : uint8_t { kPending = 1, kFired = 2, kCancelled = 3 };
// (ms << 2) | state: kPending holds the due moment, kFired and kCancelled
// the moment they happened (timeline ms, bus/core/timeline.h).
uint64_t TimerStateValue(TimerState state, uint64_t ms);
// False for a value no state encodes (a corrupt record).
bool ParseTimerStateValue(uint64_t value, TimerState* state, uint64_t* ms);

// versions also hold the keys scheduled events may be given
// (EventSpec::schedule_key), each under two records:
// - tag 0xFFFFFFFC + key -> be64 version: every schedule and cancel under
//   the key asserts it and moves it on, so the committer orders them; it
//   stays, like a timer's state record.
// - tag 0xFFFFFFFB + key -> the 16-byte id of the event pending under the
//   key; the firing, a cancel under the key or a later schedule replaces
//   or deletes it. An id whose event is no longer pending (it was
//   cancelled by id) is stale: read as none.
std::string ScheduleKeyVersionKey(std::string_view schedule_key);
std::string ScheduleKeyIdKey(std::string_view schedule_key);

// timers: be64(due, timeline ms) + 16-byte event id -> TimerRecord
// (records.h): the scheduled events not yet fired, in the order they fall
// due, so "what is due next" is one seek.
std::string TimerKey(uint64_t due_ms, const EventId& id);
bool ParseTimerKey(std::string_view key, uint64_t* due_ms, EventId* id);

// processes: the process's name + '\0' + the instance key ->
// ProcessRecord (records.h). Names hold no '\0', so one process's
// instances are one prefix, in key order.
std::string ProcessKey(std::string_view process, std::string_view instance_key);
// The prefix every instance key of `process` starts with.
std::string ProcessKeyPrefix(std::string_view process);

// replays: be64(action id) -> the record of one operator action: a
// ReplayRecord, or a dead-letter action's JSON. Ids count up from 1 in the
// order the actions were taken; kActionKeyPrefix (records.h) starts them.
std::string ActionKey(uint64_t action_id);
bool ParseActionKey(std::string_view key, uint64_t* action_id);

// quarantine: be64(arrival number, counting up from 1) -> QuarantineRecord.
std::string QuarantineKey(uint64_t arrival);
bool ParseQuarantineKey(std::string_view key, uint64_t* arrival);

// checkpoints: be32(subscriber id) + one field byte (+ a subject for the
// per-subject fields).
enum class CheckpointField : uint8_t {
  kWatermark = 'w',     // be64: every seq <= it is completed.
  kHorizon = 'z',       // be64: no seq above it was handed to a handler yet.
  kHandled = 'h',       // uint64 counter, merged (little-endian add).
  kDuplicates = 'd',    // uint64 counter, merged.
  kDeadLettered = 'r',  // uint64 counter, merged.
  kStaleSkipped = 's',  // uint64 counter, merged.
  // uint64 counter, merged: events of Options::drop_oldest_types deleted
  // for the disk budget before this subscriber took them.
  kDropped = 'x',
  kAppliedVersion = 'v',  // + subject -> be64: newest subject_version applied.
  kParked = 'p',          // + subject -> be64: seq of the dead letter holding it.
  // be64: the horizon when the subscriber last stopped cleanly (nothing
  // running); deleted before it runs again. Equal to kHorizon at open:
  // no event was running when the process stopped.
  kStoppedAt = 't',
  kRegistration = 'g',  // RegistrationRecord (storage/records.h)
  kPausedOn = 'u',      // PauseRecord: present while paused
  // A process's subscriber (bus/process/): its instances started and
  // completed, events that found no instance, stale timeouts. uint64
  // counters, merged, each committed with the step it counts.
  kProcessStarted = 'A',
  kProcessCompleted = 'C',
  kProcessUnmatched = 'U',
  kProcessStaleTimeouts = 'T',
  kProcessAbandoned = 'B',  // instances an operator abandoned
  // Under subscriber id 0 (no subscriber has it): quarantine counters.
  kQuarantined = 'q',        // uint64 counter, merged.
  kQuarantineEvicted = 'e',  // uint64 counter, merged.
  // Under subscriber id 0 too: scheduled events waiting (merged with +1
  // and, as 2^64 - 1, -1), fired and cancelled.
  kScheduledPending = 'P',    // uint64 counter, merged.
  kScheduledFired = 'F',      // uint64 counter, merged.
  kScheduledCancelled = 'X',  // uint64 counter, merged.
  // Under subscriber id 0 too, + an event type: that type's events deleted
  // for the disk budget (Options::drop_oldest_types). uint64 counter, merged.
  kDroppedOfType = 'D',
};
std::string CheckpointKey(uint32_t subscriber_id, CheckpointField field, std::string_view subject = {});

// meta: fixed names.
inline constexpr std::string_view kMetaFormatVersion = "format_version";  // be32
// Present (empty) while a format 1 inbox is moved out of its old key order
// (storage/format_upgrade.cc).
inline constexpr std::string_view kMetaInboxLeavingFormat1 = "inbox_leaving_format1";
// be64: the outbox holds nothing below it (DeleteRange up to it ran).
inline constexpr std::string_view kMetaTrimmedBelow = "trimmed_below";
// be64(timeline ms) + be64(rewind ms): the timeline's last moment and the
// wall clock's backward steps so far (bus/core/timeline.h).
inline constexpr std::string_view kMetaTimeline = "timeline";
// "sub/<name>" -> be32(id) + be64(registered at seq). Ids are never reused:
// the next one is one above the highest registered.
std::string SubscriberMetaKey(std::string_view name);
inline constexpr std::string_view kSubscriberMetaPrefix = "sub/";
// "removed_sub/" + be32(id) -> be64(the removal's action id) + one byte,
// 1 once its inbox records are deleted: a subscriber an operator removed
// (OperatorActions::RemoveSubscriber). Its id stays taken, so the next one counts on
// from above it; an open finishes a deletion a crash cut short.
std::string RemovedSubscriberKey(uint32_t id);
inline constexpr std::string_view kRemovedSubscriberMetaPrefix = "removed_sub/";
bool ParseRemovedSubscriberKey(std::string_view key, uint32_t* id);
// "schema/<type>\0" + be32(version) -> SchemaRecord (records.h): the
// schemas accepted for an event type, version 1 the first (types hold no
// zero byte, so one type's keys never run into another's).
std::string SchemaKey(std::string_view type, uint32_t version);
// The prefix of every schema key of `type`; of every type when empty.
std::string SchemaKeyPrefix(std::string_view type);
inline constexpr std::string_view kSchemaMetaPrefix = "schema/";

// Counters stored through the merge operator: 8 bytes little-endian.
std::string EncodeCounter(uint64_t v);
bool DecodeCounter(std::string_view in, uint64_t* v);

}  // namespace walbus::storage

#endif  // WALBUS_STORAGE_KEYS_H_
