// Events: what a producer publishes (EventSpec), what a handler receives
// (Event), and what a commit returns (Receipt).
//
// Threading: plain values; see Status.
#ifndef WALBUS_EVENT_H_
#define WALBUS_EVENT_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/export.h"

namespace walbus {

// A UUIDv7: 48 bits of Unix milliseconds, then randomness. Time-ordered,
// generated once when the event is published and stable across every
// redelivery, replay and relay of that event.
struct WALBUS_EXPORT EventId {
  // The 16 bytes, big-endian as in the text form; all zero is the nil id.
  std::array<uint8_t, 16> bytes{};

  // A fresh UUIDv7. Thread-safe. Never allocates.
  static EventId Generate();
  // Parses the canonical 36-character form; nullopt when malformed.
  static std::optional<EventId> Parse(std::string_view text);
  // The canonical form, e.g. "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".
  std::string ToString() const;
  // True for the all-zero id, which no event has.
  bool IsNil() const;
  // Milliseconds since the Unix epoch encoded in the id.
  uint64_t UnixMillis() const;

  // Compare the bytes: ids order by their time first.
  // @{
  friend bool operator==(const EventId&, const EventId&) = default;
  friend auto operator<=>(const EventId&, const EventId&) = default;
  // @}
};

// What a producer (or a handler) publishes.
//
// Rules checked at Publish, each refused with InvalidArgument before
// anything is written:
//   type: lowercase dotted words of [a-z0-9-], at least two words, ending in
//         ".v<N>", N >= 1, at most 200 bytes, e.g. "orders.order-approved.v1".
//         Name events as facts, in the past tense.
//   subject: 1..512 bytes of UTF-8 without control characters (U+0000..
//         U+001F, U+007F..U+009F) or noncharacters: a CloudEvents string,
//         so it travels through any binding unaltered. The ordering key:
//         events of one subject are handled in commit order by each
//         subscriber.
//   source (EventSpec::source, else Options::source): a URI-reference
//         (RFC 3986), 1..256 bytes of ASCII, e.g. "urn:device:7" or
//         "https://fleet.example/devices/7"; percent-encode anything else.
//   content_type, traceparent: CloudEvents strings, as the subject.
//   data: at most Options::max_payload_bytes.
//   deliver_at, deliver_after: at most one of them (docs/time.md).
struct EventSpec {
  // The event type, e.g. "orders.order-approved.v1" (rules above).
  std::string type;
  // The ordering key, e.g. "order-42" (rules above).
  std::string subject;
  // The entity version this event produced; 0 when unused.
  uint64_t subject_version = 0;
  // The payload: any bytes, at most Options::max_payload_bytes.
  std::string data;
  // Media type of data, e.g. "application/x-flatbuffers". Optional.
  std::string content_type;
  // Overrides Options::source when non-empty.
  std::string source;
  // Groups events of one business flow. A handler's follow-ups inherit the
  // handled event's correlation id (or its id when it has none).
  std::optional<EventId> correlation_id;
  // W3C trace context, "00-<trace>-<span>-<flags>". Optional.
  std::string traceparent;
  // Schedules the event: it is stored with the unit of work and enters
  // the outbox (getting its seq, reaching subscribers and relays) once
  // the wall clock reaches this time; at once when it is past. Until then
  // it can be cancelled (WriteScope::CancelScheduled). docs/time.md.
  std::optional<std::chrono::system_clock::time_point> deliver_at;
  // The same, this much elapsed time after Publish: it keeps to elapsed
  // time even when the wall clock steps back meanwhile. Not negative.
  std::optional<std::chrono::milliseconds> deliver_after;
  // A scheduled event only: 1..kMaxKeyBytes bytes of the application's
  // choosing ("order-42/escalate") that name the event while it is
  // pending. Scheduling under a key cancels the event pending under it in
  // the same commit, so at most one is pending per key, and
  // WriteScope::CancelScheduledByKey and ScheduledByKey find it without
  // its id. Empty: none.
  std::string schedule_key;
};

// Where a scheduled event stands (WriteScope::GetScheduled).
struct ScheduledStatus {
  // What became of it.
  enum class State : uint8_t {
    kUnknown,    // never scheduled here (or not yet committed)
    kPending,    // waiting for its time
    kFired,      // entered the outbox: an ordinary event now
    kCancelled,  // cancelled before it fired
  };
  // What became of it.
  State state = State::kUnknown;
  // kPending: when it falls due; kFired, kCancelled: when that happened.
  // Wall-clock time, as the bus reckons it now (docs/time.md).
  std::chrono::system_clock::time_point at{};
};

// A committed event as a handler sees it.
struct Event {
  uint64_t seq = 0;                            // Position in the outbox; commit order.
  EventId id;                                  // Assigned at Publish; the same on every redelivery.
  std::string type;                            // As published (or as upcast for this subscriber).
  std::string source;                          // EventSpec::source, else Options::source.
  std::string subject;                         // The ordering key.
  uint64_t subject_version = 0;                // As published; 0 when unused.
  std::chrono::system_clock::time_point time;  // Wall time of Publish.
  std::string content_type;                    // As published.
  // As published; for a handler's follow-up, inherited from the handled
  // event (its correlation id, else its id).
  std::optional<EventId> correlation_id;
  // For a handler's follow-up: the id of the event being handled.
  std::optional<EventId> causation_id;
  std::string traceparent;  // As published, else inherited like correlation_id.
  std::string data;         // The payload.
  // The version of its type's schema (EventContracts::RegisterSchema) the payload was
  // checked against when it was published or ingested here; 0 when the
  // type had no schema then (or the event predates this record). Set by
  // the bus: ignored in an event given to Bus::IngestEvent.
  uint32_t schema_version = 0;
};

// What Commit() returns: the events of the transaction, in publish order,
// with consecutive sequence numbers starting at first_seq.
struct Receipt {
  // Sequence number of the first event; 0 when the commit had no events.
  uint64_t first_seq = 0;
  // The ids of the events, in publish order.
  std::vector<EventId> event_ids;
  // Sequence number of the last event; 0 when the commit had no events.
  uint64_t last_seq() const { return event_ids.empty() ? 0 : first_seq + event_ids.size() - 1; }
};

}  // namespace walbus

#endif  // WALBUS_EVENT_H_
