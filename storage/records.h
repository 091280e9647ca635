// Records of the failure paths: retry state, dead letters and quarantined
// input, as stored in their column families (docs/design.md).
//
// Every record starts with a format byte. Decoders take bytes read back
// from disk and check every length before reading, returning false on
// anything malformed (they are fuzzed).
#ifndef WALBUS_STORAGE_RECORDS_H_
#define WALBUS_STORAGE_RECORDS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/event.h"

namespace walbus::storage {

// retries: be32(subscriber id) + be64(seq) -> RetryRecord. Written when a
// handler attempt fails, and before a handler runs again on an event that
// may have been in flight when the process died; deleted with the event's
// completion.
struct RetryRecord {
  uint32_t attempts = 0;          // attempts made so far
  uint64_t first_failure_ms = 0;  // unix ms of the first failed attempt
  uint64_t last_failure_ms = 0;
  std::string last_error;  // capped at kMaxErrorBytes
  // unix ms when the next run is due; 0 while it runs (written before a
  // run, so that a crash in it counts) and in records written before it.
  uint64_t next_attempt_ms = 0;
};

// dead_letters: be32(subscriber id) + be64(seq) -> DeadLetterRecord.
struct DeadLetterRecord {
  uint32_t attempts = 0;
  uint64_t first_failure_ms = 0;
  uint64_t last_failure_ms = 0;
  std::string error;            // capped at kMaxErrorBytes
  std::string handler_version;  // the subscriber's, when it gave up
  std::string envelope;         // the original event, as in the outbox
};

// quarantine: be64(arrival seq) -> QuarantineRecord.
struct QuarantineRecord {
  uint64_t arrived_ms = 0;
  uint64_t original_bytes = 0;  // size before capping
  std::string source;           // where the bytes came from
  std::string reason;           // the first verification rule broken
  std::string raw;              // the bytes, capped at kMaxQuarantineRawBytes
};

// replays: be64(action id) -> ReplayRecord (dead-letter actions share the
// id space and store JSON there); ids stay below 2^56, so these keys start
// with a zero byte. 'S' + be64(replay id) + 16-byte event id -> an inbox
// value: the events a kFreshScope replay completed (its inbox scope).
inline constexpr char kReplayScopePrefix = 'S';
inline constexpr std::string_view kActionKeyPrefix{"\0", 1};
struct ReplayRecord {
  uint32_t subscriber_id = 0;
  std::string subscriber;
  uint8_t mode = 0;   // walbus::ReplayMode
  uint8_t state = 0;  // walbus::ReplayState
  std::string operator_name;
  std::string reason;
  std::string handler_version;
  // The selection.
  uint64_t from_seq = 0;  // resolved: the first seq looked at
  uint64_t to_seq = 0;    // resolved: the last seq looked at
  int64_t since_ms = 0;   // unix ms; 0: unbounded
  int64_t until_ms = 0;
  std::vector<std::string> types;
  std::string subject;
  std::vector<std::string> ids;  // 16 bytes each
  uint64_t max_events = 0;
  // Progress.
  uint64_t started_ms = 0;
  uint64_t ended_ms = 0;
  uint64_t selected = 0;
  uint64_t delivered = 0;
  uint64_t skipped = 0;
  uint64_t failed = 0;
  uint64_t next_seq = 0;  // every selected event below it completed
  std::string error;
  std::string cancelled_by;   // who cancelled it
  std::string cancel_reason;  // and why
  // A rebuild's cleared column families; written only when there are some,
  // so records without keep their old bytes.
  std::vector<std::string> cleared;
};
// Caps on what a replay record holds.
inline constexpr size_t kMaxReplayListEntries = 4096;

inline constexpr size_t kMaxErrorBytes = 1024;
inline constexpr size_t kMaxQuarantineRawBytes = size_t{64} * 1024;

std::string EncodeRetry(const RetryRecord& r);
bool DecodeRetry(std::string_view in, RetryRecord* r);
std::string EncodeDeadLetter(const DeadLetterRecord& r);
bool DecodeDeadLetter(std::string_view in, DeadLetterRecord* r);
std::string EncodeQuarantine(const QuarantineRecord& r);
bool DecodeQuarantine(std::string_view in, QuarantineRecord* r);

// checkpoints: be32(subscriber id) + 'g' -> what the subscriber was last
// subscribed with, for tools that act on a stopped database.
struct RegistrationRecord {
  bool side_effect_safe = false;
  std::string handler_version;
  std::vector<std::string> types;  // empty: every type
};
// checkpoints: be32(subscriber id) + 'u' -> where it is paused: the seq
// and type of the event no upcaster brings to a type it takes.
struct PauseRecord {
  uint64_t seq = 0;
  std::string type;
};

// meta: SchemaKey(type, version) -> one schema accepted for an event type
// (EventContracts::RegisterSchema).
inline constexpr size_t kMaxSchemaBytes = 64u << 20;
struct SchemaRecord {
  uint64_t hash = 0;  // FNV-1a 64 of binary_schema
  uint64_t first_registered_ms = 0;
  uint64_t last_registered_ms = 0;
  std::string binary_schema;  // at most kMaxSchemaBytes
};
std::string EncodeSchema(const SchemaRecord& r);
bool DecodeSchema(std::string_view in, SchemaRecord* r);

// replays: ActionKey(id) -> an operator action's record (dead-letter
// actions, removals, cancels, abandonments; replays have binary records
// there): JSON, for people and tools reading the database.
struct ActionRecord {
  std::string action;  // "redrive", "skip", "purge", "subscriber-remove", ...
  std::string operator_name;
  std::string reason;
  int64_t time_ms = 0;  // Unix milliseconds
  // What it acted on, in order: each name with its value as JSON text
  // (JsonText, JsonNumbers and JsonTexts make them).
  std::vector<std::pair<std::string, std::string>> about;

  static std::string JsonText(std::string_view text);
  static std::string JsonNumbers(const std::vector<uint64_t>& numbers);
  static std::string JsonTexts(const std::vector<std::string>& texts);
};
std::string EncodeAction(const ActionRecord& r);

std::string EncodeRegistration(const RegistrationRecord& r);
bool DecodeRegistration(std::string_view in, RegistrationRecord* r);
std::string EncodePause(const PauseRecord& r);
bool DecodePause(std::string_view in, PauseRecord* r);

std::string EncodeReplay(const ReplayRecord& r);
bool DecodeReplay(std::string_view in, ReplayRecord* r);
// The key of one event in a kFreshScope replay's inbox scope.
// REQUIRES: event_id16.size() == 16.
std::string ReplayScopeKey(uint64_t replay_id, std::string_view event_id16);

// timers: TimerKey (keys.h) -> TimerRecord: a scheduled event, encoded as
// the outbox will hold it once it fires.
struct TimerRecord {
  uint64_t scheduled_ms = 0;       // timeline ms when it was scheduled
  uint64_t scheduled_wall_ms = 0;  // the wall clock then (unix ms), for people
  std::string envelope;            // the event, as in the outbox
  // EventSpec::schedule_key, or empty. Records written before keys
  // existed end after the envelope.
  std::string schedule_key;
};
std::string EncodeTimer(const TimerRecord& r);
bool DecodeTimer(std::string_view in, TimerRecord* r);

// processes: ProcessKey (keys.h) -> ProcessRecord: one running instance of
// a process manager (bus/process/). A completed instance has none.
struct ProcessTimeoutRecord {
  std::string name;  // the timeout's name, unique in its instance
  EventId id;        // the scheduled event that delivers it
  uint64_t due_wall_ms = 0;
};
// One of the last events an instance handled.
struct ProcessHandledRecord {
  EventId id;
  uint64_t seq = 0;
  std::string type;
  uint64_t handled_wall_ms = 0;
};
inline constexpr size_t kProcessHandledKept = 8;
inline constexpr size_t kMaxProcessStateBytes = 1u << 20;
struct ProcessRecord {
  uint32_t definition_version = 0;  // the definition it started under
  uint32_t state_version = 0;       // its state's schema version; 0 without one
  std::string state_type;           // the type whose contract the state verified against; empty: none
  uint64_t started_wall_ms = 0;
  uint64_t updated_wall_ms = 0;
  uint64_t events_handled = 0;
  std::string state;  // at most kMaxProcessStateBytes
  std::vector<ProcessTimeoutRecord> timeouts;
  std::vector<ProcessHandledRecord> last_handled;  // oldest first, at most kProcessHandledKept
};
std::string EncodeProcess(const ProcessRecord& r);
bool DecodeProcess(std::string_view in, ProcessRecord* r);

// Keys: be32(subscriber id) + be64(seq) for retries and dead letters.
std::string SubscriberSeqKey(uint32_t subscriber_id, uint64_t seq);
bool ParseSubscriberSeqKey(std::string_view key, uint32_t* subscriber_id, uint64_t* seq);
// quarantine: be64(arrival number), QuarantineKey in keys.h.

}  // namespace walbus::storage

#endif  // WALBUS_STORAGE_RECORDS_H_
