// Inspect: read-only reports on a walbus database, from a stopped
// database or one a running process holds (through a RocksDB secondary
// instance, which never takes the lock and never writes): the progress
// report behind `walbus stats` and the operator's views of the dead-letter
// and quarantine stores.
//
// Everything read here is treated as untrusted: records and envelopes are
// verified, and a malformed one is reported as such instead of failing the
// whole listing.
#ifndef WALBUS_TOOLS_WALBUS_INSPECT_H_
#define WALBUS_TOOLS_WALBUS_INSPECT_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/disk_budget.h"
#include "storage/records.h"
#include "tools/walbus/payload_json.h"
#include "walbus/event.h"
#include "walbus/metrics.h"
#include "walbus/status.h"

namespace walbus::internal {

struct SubscriberReport {
  std::string name;
  uint32_t id = 0;
  uint64_t checkpoint = 0;
  uint64_t lag_events = 0;  // last_seq - checkpoint
  uint64_t handled = 0;
  uint64_t duplicates = 0;
  uint64_t dead_lettered = 0;
  uint64_t stale_skipped = 0;
  uint64_t dropped = 0;               // of Options::drop_oldest_types, before it took them
  std::optional<int64_t> lag_age_ms;  // age of its oldest uncompleted event
};

struct DatabaseReport {
  std::string dir;
  uint64_t last_seq = 0;
  uint64_t trimmed_below = 0;
  // Events not yet passed by every subscriber.
  uint64_t outbox_backlog = 0;
  // Age of the oldest of those, in milliseconds; nullopt when none.
  std::optional<int64_t> oldest_backlog_age_ms;
  std::vector<SubscriberReport> subscribers;
  // The application column families the database holds: those a bus
  // lists in Options::column_families, and those an earlier run listed
  // (kept on disk untouched, read and written by no bus that leaves them
  // out).
  std::vector<std::string> column_families;
  // What Options::disk_budget bounds, by kind, as storage measures it.
  DiskUse disk_use;
  // Events of Options::drop_oldest_types dropped for the budget, by type.
  std::map<std::string, uint64_t> dropped_by_type;
};

// NotFound for a missing directory; InvalidArgument for one that is not a
// walbus database; other errors as storage reports them.
Status InspectDatabase(const std::string& dir, DatabaseReport* report);

// Events of Options::drop_oldest_types the disk budget dropped, by type.
Status ReadDroppedCounts(const std::string& dir, std::map<std::string, uint64_t>* by_type);

// The report as one JSON object, or as aligned human-readable lines.
std::string ReportJson(const DatabaseReport& report);
std::string ReportText(const DatabaseReport& report);
// The report as Prometheus text: the progress metrics a running bus
// exposes too (same names), as recorded in the database.
std::vector<MetricFamily> ReportMetrics(const DatabaseReport& report);
// One sample of a family as one JSON object: name, type, labels, and the
// value, or for a histogram its buckets ({"le", "count"}), sum and count.
std::string MetricSampleJson(const MetricFamily& family, const MetricSample& sample);

// One entry of the dead-letter store.
struct DeadLetterEntry {
  // The subscriber's name; "#<id>" when no registered subscriber has the
  // id, "?" when the key itself is malformed.
  std::string subscriber;
  uint64_t seq = 0;
  // False when the stored value is not a dead-letter record; `record` is
  // then empty and event_error says so.
  bool record_ok = false;
  storage::DeadLetterRecord record;
  // The original event, decoded from record.envelope and verified.
  Event event;
  PayloadReading payload;  // the event's payload as its type's schema reads it
  bool event_ok = false;
  std::string event_error;  // why the record or its event is unreadable
};

// Dead letters in (subscriber id, seq) order, at most `limit`: every
// subscriber's when `subscriber` is empty, else the named one's
// (InvalidArgument "no subscriber named X" when it is not registered).
Status ListDeadLetters(const std::string& dir, const std::string& subscriber, std::vector<DeadLetterEntry>* out,
                       size_t limit);
// The dead letter of `subscriber` at `seq`; *found is false when there is
// none. An unknown subscriber is InvalidArgument, as above.
Status FindDeadLetter(const std::string& dir, const std::string& subscriber, uint64_t seq, DeadLetterEntry* out,
                      bool* found);

// One entry of the quarantine store.
struct QuarantineEntry {
  uint64_t arrival = 0;
  // When the stored value is malformed (record_ok false), record.raw holds
  // that value (capped) and record.original_bytes its size.
  storage::QuarantineRecord record;
  bool record_ok = false;
  // When record.raw is an envelope: its payload as its type's schema reads
  // it (input is often refused for something else than its payload).
  PayloadReading payload;
};

// Quarantined input in arrival order, at most `limit`.
Status ListQuarantine(const std::string& dir, std::vector<QuarantineEntry>* out, size_t limit);
// The quarantined input of `arrival`; *found is false when there is none.
Status FindQuarantine(const std::string& dir, uint64_t arrival, QuarantineEntry* out, bool* found);

// Renderers. Text output escapes control characters, backslashes and
// invalid UTF-8 (a subject or an error can hold anything), so one value
// never spans lines. JSON renderers return one object without a trailing
// newline (one line of JSON Lines).
//
// A payload is shown as text when the event's content type is
// application/json and the bytes are valid UTF-8 without control
// characters; otherwise as hex of its first kPayloadHexBytes bytes, with
// the total size.
inline constexpr size_t kPayloadHexBytes = 256;
// A header and one aligned row per entry: subscriber, seq, type, subject,
// attempts, error.
std::string DeadLetterTable(const std::vector<DeadLetterEntry>& entries);
// Every field of one entry, one per line.
std::string DeadLetterText(const DeadLetterEntry& entry);
std::string DeadLetterJson(const DeadLetterEntry& entry);
// A header and one aligned row per entry: arrival, time, source, size,
// reason.
std::string QuarantineTable(const std::vector<QuarantineEntry>& entries);
std::string QuarantineText(const QuarantineEntry& entry);
std::string QuarantineJson(const QuarantineEntry& entry);

// ---- process instances (inspect_process.cc) ----

// One running instance of a process (walbus/process.h), as stored.
struct ProcessEntry {
  std::string key;
  bool ok = false;  // false: `error` says why the record cannot be read
  std::string error;
  storage::ProcessRecord record;
  PayloadReading state;  // the state as its type's schema reads it, if it does
};
// The running instances of process `name` in key order, at most `limit`.
Status ListProcesses(const std::string& dir, const std::string& name, std::vector<ProcessEntry>* out, size_t limit);
// The instance of `name` under `key`; *found is false when none runs.
Status FindProcess(const std::string& dir, const std::string& name, const std::string& key, ProcessEntry* out,
                   bool* found);
// A header and one row per instance: key, started, updated, events, next
// timeout; every field of one; one JSON object.
std::string ProcessTable(const std::vector<ProcessEntry>& entries);
std::string ProcessText(const ProcessEntry& entry);
std::string ProcessJson(const ProcessEntry& entry);

// ---- scheduled events (inspect_scheduled.cc) ----

// One scheduled event: its state record, and while pending its timer.
struct ScheduledEntry {
  EventId id;
  // "pending", "fired", "cancelled"; "unknown" when never scheduled here,
  // "unreadable" for a malformed record.
  std::string state;
  // Wall-clock unix ms, by the rewind stored with the database's timeline
  // (docs/time.md): pending, when it falls due; fired and cancelled, when
  // that happened.
  int64_t at_ms = 0;
  // Pending only: when it was scheduled, and the event (event_ok false
  // with `error` when its record cannot be read).
  int64_t scheduled_ms = 0;
  bool event_ok = false;
  Event event;
  PayloadReading payload;
  std::string error;
};
// Pending scheduled events in the order they fall due, at most `limit`.
Status ListScheduled(const std::string& dir, std::vector<ScheduledEntry>* out, size_t limit);
// Where the event `id` stands; *found is false when it was never scheduled.
Status FindScheduled(const std::string& dir, const EventId& id, ScheduledEntry* out, bool* found);
// A header and one row per entry: due, id, type, subject; every field of
// one; one JSON object.
std::string ScheduledTable(const std::vector<ScheduledEntry>& entries);
std::string ScheduledText(const ScheduledEntry& entry);
std::string ScheduledJson(const ScheduledEntry& entry);

// ---- events: the outbox, one event's story, the inbox, export ----

// Which outbox entries a listing shows. Empty strings and unset times
// match everything; seqs are inclusive.
struct OutboxFilter {
  std::string type;
  std::string subject;
  uint64_t from_seq = 0;
  uint64_t to_seq = UINT64_MAX;
  std::optional<std::chrono::system_clock::time_point> since;  // event time >= since
  std::optional<std::chrono::system_clock::time_point> until;  // event time < until
};

// One outbox entry: its event, or why it cannot be read.
struct OutboxEntry {
  uint64_t seq = 0;
  bool event_ok = false;
  Event event;
  PayloadReading payload;  // the event's payload as its type's schema reads it
  std::string error;       // when !event_ok
};

// Outbox entries that match, in seq order, at most `limit`. Entries that
// cannot be decoded are listed (with their error) when no filter but the
// seq range is set.
Status ListOutbox(const std::string& dir, const OutboxFilter& filter, std::vector<OutboxEntry>* out, size_t limit);
// A header and one row per entry: seq, time, type, subject, size.
std::string OutboxTable(const std::vector<OutboxEntry>& entries);
// Every field of one entry, one per line.
std::string OutboxText(const OutboxEntry& entry);
std::string OutboxJson(const OutboxEntry& entry);

// The event as one line of the CloudEvents JSON event format (spec 1.0):
// specversion, id, source, type, subject, time (RFC 3339, microseconds),
// datacontenttype when set, the extensions traceparent, subjectversion,
// correlationid, causationid, walbusseq when set; `data` as JSON when the
// content type is application/json and the bytes are one JSON value, as a
// string when they are other UTF-8 text, else `data_base64`. A payload
// its type's schema read sets `dataschema` (the schema it passed), and
// with `data_as_json` is written as that JSON (datacontenttype
// application/json) instead of its bytes.
std::string CloudEventJson(const Event& event, const PayloadReading& payload, bool data_as_json);

// Where one event stands for one subscriber.
struct DeliveryReport {
  std::string subscriber;
  // "handled", "dead-lettered", "retrying" (attempts and last_error say
  // more), "pending", or "passed" (below the checkpoint without an inbox
  // record: not a type it takes).
  std::string state;
  std::optional<int64_t> handled_at_ms;
  uint32_t attempts = 0;  // handler runs, the one it completed in included
  std::string last_error;
  std::optional<int64_t> next_attempt_ms;  // retrying: when the next run is due
};

// An event's story: the event (when still in the outbox, or from a dead
// letter), where it stands for each subscriber, and the events it caused
// that are still in the outbox.
struct EventStory {
  EventId id;
  bool event_known = false;  // false: trimmed from the outbox, no dead letter
  uint64_t seq = 0;          // 0 when unknown
  Event event;
  PayloadReading payload;  // the event's payload as its type's schema reads it
  std::vector<DeliveryReport> deliveries;
  std::vector<OutboxEntry> follow_ups;
};
// *found is false when neither the outbox, an inbox nor a dead letter
// knows the id.
Status FindEventStory(const std::string& dir, const EventId& id, EventStory* out, bool* found);
std::string EventStoryText(const EventStory& story);
std::string EventStoryJson(const EventStory& story);

// Whether `subscriber` has an inbox record of `id`: handled (or dead-
// lettered: both complete the event) at *seq, *handled_at_ms.
Status CheckInbox(const std::string& dir, const std::string& subscriber, const EventId& id, bool* handled,
                  uint64_t* seq, int64_t* handled_at_ms);

// Per subscriber: the stats report plus the retries and parked subjects
// waiting now.
struct SubscriberDetail {
  SubscriberReport report;
  uint64_t retrying = 0;      // events with a retry record (failed, to run again)
  uint64_t parked = 0;        // subjects held behind a dead letter (kParkKey)
  uint64_t dead_letters = 0;  // entries in the dead-letter store now
  // How it was last subscribed (nullopt: before registrations were kept).
  std::optional<storage::RegistrationRecord> registration;
  std::optional<storage::PauseRecord> paused_on;  // while paused
  // Types it takes that have no schema in a database where others have
  // one: under require_schemas no event of them can be published.
  std::vector<std::string> types_without_schema;
};
Status ListSubscribers(const std::string& dir, std::vector<SubscriberDetail>* out);
std::string SubscribersTable(const std::vector<SubscriberDetail>& subscribers);
std::string SubscriberJson(const SubscriberDetail& subscriber);

}  // namespace walbus::internal

#endif  // WALBUS_TOOLS_WALBUS_INSPECT_H_
