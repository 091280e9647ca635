// walbus: an embedded event bus with a write-ahead log.
//
//   walbus::Options opt;
//   opt.dir = "/var/lib/app/bus";
//   opt.column_families = {"orders", "invoices"};
//   std::unique_ptr<walbus::Bus> bus;
//   walbus::Status s = walbus::Bus::Open(opt, &bus);
//   walbus::SubscriberOptions invoicing;
//   invoicing.name = "invoicing";
//   invoicing.types = {"orders.order-approved.v1"};
//   invoicing.handler = [](const walbus::Event& e, walbus::HandlerContext& ctx) {
//     if (auto st = ctx.Put("invoices", e.subject, "..."); !st.ok())
//       return walbus::Outcome::RetryAfter(std::chrono::milliseconds(50));
//     return walbus::Outcome::Done();
//   };
//   s = bus->Subscribe(std::move(invoicing));
//   s = bus->Start();
//   walbus::Transaction tx = bus->Begin();
//   s = tx.Put("orders", "order-42", bytes);
//   walbus::EventSpec approved;
//   approved.type = "orders.order-approved.v1";
//   approved.subject = "order-42";
//   auto id = tx.Publish(approved);
//   walbus::Result<walbus::Receipt> r = tx.Commit();
//
// Guarantees (docs/design.md): a commit's domain writes and events land
// atomically; every subscriber sees every committed event it subscribes to
// at least once, and its handler's effects (written through HandlerContext)
// commit exactly once, atomically with the inbox record; for one subscriber
// and one subject, events are handled in commit order, one at a time.
#ifndef WALBUS_BUS_H_
#define WALBUS_BUS_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/event.h"
#include "walbus/export.h"
#include "walbus/metrics.h"
#include "walbus/options.h"
#include "walbus/status.h"

namespace walbus {

namespace internal {
struct ScopeRep;
struct ScopeAccess;
}  // namespace internal

// Reads and buffered writes on the application's column families, and
// events to publish; the part a Transaction and a HandlerContext share.
// Nothing is written until the owner commits. The first failed call makes
// the whole unit fail at commit with that error, so a write that was refused
// can never be half-applied.
//
// Threading: not thread-safe; one thread uses a scope at a time.
class WALBUS_EXPORT WriteScope {
 public:
  WriteScope(const WriteScope&) = delete;
  WriteScope& operator=(const WriteScope&) = delete;

  // Buffers a write. InvalidArgument for an unknown column family or an
  // empty key.
  Status Put(std::string_view column_family, std::string_view key, std::string_view value);
  // Buffers a deletion; the same errors as Put.
  Status Delete(std::string_view column_family, std::string_view key);

  // Reads this scope's own buffered write first, then committed state.
  // A missing key is an OK result holding nullopt.
  Result<std::optional<std::string>> Get(std::string_view column_family, std::string_view key);

  // The committed version of a key: 0 when no commit ever asserted one.
  // Versions advance only through ExpectVersion.
  Result<uint64_t> GetVersion(std::string_view column_family, std::string_view key);

  // Optimistic precondition: the commit succeeds only while the key's
  // committed version equals `version`, and then sets it to version + 1.
  // Otherwise the commit returns Conflict and writes nothing. Every writer
  // of a key that must not lose updates asserts its version.
  Status ExpectVersion(std::string_view column_family, std::string_view key, uint64_t version);

  // Validates and buffers an event; its id is assigned now and never
  // changes. InvalidArgument (and the scope fails) on a bad type, an empty
  // subject or an oversized payload.
  Result<EventId> Publish(const EventSpec& event);

 protected:
  // Made by the bus as a Transaction or a HandlerContext, and moved or
  // destroyed only as one of those.
  // @{
  explicit WriteScope(std::unique_ptr<internal::ScopeRep> rep);
  WriteScope(WriteScope&&) noexcept;
  WriteScope& operator=(WriteScope&&) noexcept;
  ~WriteScope();
  // @}
  // The buffered writes and events (bus/core/scope.h).
  std::unique_ptr<internal::ScopeRep> rep_;
  friend struct internal::ScopeAccess;
};

// A unit of domain writes and events that commits atomically.
// Destroying a Transaction without Commit() leaves nothing behind.
//
// Threading: not thread-safe; many threads may each run their own.
class WALBUS_EXPORT Transaction : public WriteScope {
 public:
  // Movable; a moved-from Transaction may only be destroyed or assigned to.
  // @{
  Transaction(Transaction&&) noexcept;
  Transaction& operator=(Transaction&&) noexcept;
  // @}
  ~Transaction();

  // Writes everything buffered in one atomic batch, durable per
  // Options::durability when it returns OK. Conflict when an ExpectVersion
  // failed; the first error of an earlier call; Closed after Bus::Close().
  // Blocks while the write is in progress (shared with concurrent commits).
  // REQUIRES: not committed before.
  Result<Receipt> Commit();

 private:
  using WriteScope::WriteScope;
  friend struct internal::ScopeAccess;
};

// What a handler sees besides its event: the application's column families
// (reads see committed state; writes commit atomically with the inbox record
// of this event), follow-up events, and a stable key for external effects.
//
// Threading: valid only inside the handler call, on the handler's thread.
class WALBUS_EXPORT HandlerContext : public WriteScope {
 public:
  ~HandlerContext();

  // "<subscriber>/<event id>": the same on every redelivery of this event
  // to this subscriber. Pass it to external systems that deduplicate.
  const std::string& IdempotencyKey() const;
  // The name of the subscriber running the handler.
  const std::string& SubscriberName() const;
  // Which run of the handler at this event this is: 1 on the first, then
  // 2, 3, ... The count is stored with the retry record, so it goes on
  // across restarts; a run cut short by a crash counts, events waiting at
  // a clean Close are charged nothing, and a pause is not a run.
  uint32_t Attempt() const;

 private:
  using WriteScope::WriteScope;
  friend struct internal::ScopeAccess;
};

// A handler's verdict on one event.
class Outcome {
 public:
  // Which verdict: made by Done(), RetryAfter() or Reject().
  enum class Kind : uint8_t { kDone, kRetry, kReject };

  // Handled: the context's writes commit with the inbox record.
  static Outcome Done() { return Outcome(Kind::kDone, {}, {}); }
  // Transient failure: writes are dropped and the event is handled again
  // after `delay`. Only this subject waits; other subjects keep flowing.
  // A zero delay leaves the delay to the subscriber's RetryPolicy.
  static Outcome RetryAfter(std::chrono::milliseconds delay) {
    return Outcome(Kind::kRetry, delay, {});
  }
  // Permanent failure: writes are dropped, the event goes to the dead-letter
  // store with `reason`, and the subject moves on.
  static Outcome Reject(std::string reason) { return Outcome(Kind::kReject, {}, std::move(reason)); }

  // The verdict, its retry delay (kRetry) and its reason (kReject).
  // @{
  Kind kind() const { return kind_; }
  std::chrono::milliseconds delay() const { return delay_; }
  const std::string& reason() const { return reason_; }
  // @}

 private:
  Outcome(Kind k, std::chrono::milliseconds d, std::string r)
      : kind_(k), delay_(d), reason_(std::move(r)) {}
  Kind kind_;
  std::chrono::milliseconds delay_;
  std::string reason_;
};

// Runs on a worker thread, never concurrently for one subscriber and one
// subject. A handler that throws has failed transiently (retried per its
// RetryPolicy) unless its SubscriberOptions::classify_exception says the
// failure is permanent.
using Handler = std::function<Outcome(const Event&, HandlerContext&)>;

// Checks the payload of one event type: OK, or why not. Registered with
// Bus::RegisterVerifier; runs at Publish and on Bus::Ingest.
using PayloadVerifier = std::function<Status(std::string_view data)>;

// Brings an event from one version of its type to a later one (v1 -> v2):
// returns the new `data`. Registered with Bus::RegisterUpcaster; an error
// is a failed attempt of the subscriber's handler.
using Upcaster = std::function<Result<std::string>(const Event& from)>;

// What a subscriber does with an event of a type version it does not take
// and no upcaster can bring to one it does.
enum class UnknownVersionPolicy : uint8_t {
  // Stop handling (counted, logged; other subscribers go on) until an
  // upcaster is registered for it (default).
  kPause,
  // Dead-letter the event and go on.
  kDeadLetter,
};

// How an exception the handler threw is treated
// (SubscriberOptions::classify_exception).
enum class FailureClass : uint8_t {
  kTransient,  // retried with backoff until the budget runs out
  kPermanent,  // dead-lettered at once
};

// Retries of one event by one subscriber. The attempt count is stored in
// the database: it survives restarts, and an event that was being handled
// when the process died counts that run as an attempt, so a handler that
// crashes the process on an event is not run on it forever.
struct RetryPolicy {
  // Handler runs of one event before it is dead-lettered. REQUIRES: >= 1.
  uint32_t max_attempts = 8;
  // Delay before attempt n+1: uniform in [1 ms, min(cap, base * 2^(n-1))]
  // ("full jitter"). RetryAfter(d) from the handler overrides it.
  // @{
  std::chrono::milliseconds base{10};
  std::chrono::milliseconds cap{30000};
  // @}
  // Dead-letter once this long has passed since the first failure, even
  // with attempts left. Zero: no age limit.
  std::chrono::milliseconds max_age{0};
  // A handler whose effects hit an ExpectVersion conflict is rerun at once;
  // after this many reruns in a row the conflict counts as a failed attempt.
  uint32_t max_conflict_reruns = 64;
};

// What happens to a subject's later events once one of its events is
// dead-lettered.
enum class PoisonPolicy : uint8_t {
  // The next event of the subject proceeds (default).
  kDeadLetterAndContinue,
  // Later events of the subject are held back (stored with the dead
  // letters, in order) until the dead letter is redriven or skipped: for
  // handlers whose state must not skip a step.
  kParkKey,
};

// A subscriber: its durable name, the event types it takes, its handler,
// and what happens when the handler fails.
struct SubscriberOptions {
  // Durable identity: 1..128 bytes of [A-Za-z0-9._-]. The checkpoint and
  // inbox live under it across restarts.
  std::string name;
  // Event types delivered to the handler; empty means every type.
  std::vector<std::string> types;
  // Runs once per delivery of an event. Required.
  Handler handler;
  // Attempts and backoff before an event is dead-lettered.
  RetryPolicy retry;
  // What a dead letter does to the later events of its subject.
  PoisonPolicy on_poison = PoisonPolicy::kDeadLetterAndContinue;
  // Classifies what the handler threw; absent: every exception is
  // transient. Called on the worker thread; must not throw.
  std::function<FailureClass(const std::exception_ptr&)> classify_exception;
  // Skip (and count) an event whose subject_version is not above the newest
  // version this subscriber already applied for its subject. The newest
  // applied version commits with the handler's effects.
  bool skip_stale = false;
  // Recorded with dead letters, so an operator knows which code gave up.
  std::string handler_version = "1";
  // Events of a type whose base name matches one in `types` but whose
  // version does not are upcast when a chain of upcasters reaches a listed
  // version; otherwise this applies.
  UnknownVersionPolicy on_unknown_version = UnknownVersionPolicy::kPause;
  // The handler may run again on events it already handled without harm
  // (it rebuilds a projection, say, and sends nothing out). Only such a
  // subscriber accepts a ReplayMode::kFreshScope replay.
  bool side_effect_safe = false;
};

// Progress of one subscriber, as held by this process.
struct SubscriberStats {
  std::string name;         // SubscriberOptions::name.
  uint64_t checkpoint = 0;  // Every event at or below it is handled or skipped.
  uint64_t handled = 0;     // Events whose effects committed (durable count).
  uint64_t duplicates = 0;  // Redeliveries the inbox recognised and skipped.
  uint64_t retries = 0;     // Handler attempts that asked to retry or threw.
  // Outcomes whose commit met a concurrent update (ExpectVersion) and ran
  // again, in this process: optimistic concurrency at work, not a failure.
  uint64_t conflicts = 0;
  uint64_t dead_lettered = 0;  // Events sent to the dead-letter store.
  uint64_t stale_skipped = 0;  // Events skipped by skip_stale.
  uint64_t in_flight = 0;   // Events fetched into memory, not yet completed.
  bool paused = false;      // Waiting for an upcaster (UnknownVersionPolicy::kPause).
  std::string paused_on;    // While paused: the type no upcaster brings to one it takes.
  uint64_t pauses = 0;      // Times it paused, in this process.
};

// Counters of a bus, as held by this process (Bus::Stats).
struct BusStats {
  uint64_t last_seq = 0;  // Sequence number of the newest committed event.
  uint64_t commits = 0;   // Successful commits in this process.
  uint64_t commit_groups = 0;  // Writes to storage (commits share writes).
  // Writes storage refused in this process: for lack of disk space, and
  // for any other reason. Each fails the commits of its group.
  // @{
  uint64_t write_failures_no_space = 0;
  uint64_t write_failures_other = 0;
  // @}
  // True while the newest write failed. After a full disk, storage takes
  // writes again by itself within seconds of having room again; until
  // then every commit fails with ResourceExhausted and nothing is lost.
  bool writes_failing = false;
  uint64_t quarantined = 0;    // Inputs refused into quarantine, ever.
  uint64_t quarantine_evicted = 0;  // Oldest quarantine entries dropped for the bounds.
  std::vector<SubscriberStats> subscribers;  // One per active subscriber.
};

// Where one event stands for one subscriber.
enum class Delivery : uint8_t {
  kPending,        // not completed yet, and no run of it has failed
  kHandled,        // the handler's effects committed (or a stale skip)
  kDeadLettered,   // given up on; in the dead-letter store
  kPaused,         // waiting: the subscriber is paused on an unknown version
  kNotDelivered,   // completed without the handler: its type is not taken
  kRetrying,       // a run failed; it runs again (attempts, next_attempt)
  kParked,         // held behind a dead letter of its subject (kParkKey)
};

// Where one event stands for one subscriber (Bus::WaitHandled,
// Bus::EventStatus, Bus::Pending).
struct DeliveryState {
  std::string subscriber;  // The subscriber's name.
  EventId id;              // The event.
  uint64_t seq = 0;        // Its sequence number; 0 when not known.
  Delivery state = Delivery::kPending;  // Where it stands.
  // kRetrying and kDeadLettered: handler runs so far (a run the process
  // stopped in counts), and the last one's error.
  // @{
  uint32_t attempts = 0;
  std::string last_error;
  // @}
  // kRetrying: when the next run is due; nullopt while it runs (or when
  // the record predates this field).
  std::optional<std::chrono::system_clock::time_point> next_attempt;
  // kParked: the seq of the dead letter that holds its subject; an
  // operator's redrive or skip of it releases the subject.
  uint64_t parked_behind = 0;
};

// Where ingested input came from, and how repeats are recognised
// (Bus::IngestEvent, Bus::IngestEnvelope).
struct IngestOptions {
  // Where the input came from, for the quarantine and the log
  // ("jetstream:ORDERS/cloud", "file:import.bin").
  std::string source;
  // When not empty: take each event id at most once within this scope (a
  // name as for subscribers: letters, digits, '.', '_', '-'). Use one scope
  // per inbound channel, e.g. per JetStream consumer.
  std::string dedup_scope;
  // A sender's per-key order, kept within dedup_scope (required with it):
  // `position` is the event's place among the sender's events of
  // `order_key`, 1, 2, 3, ... without gaps. An event is taken only when
  // every position before it was; one that comes early is refused with
  // IngestDisposition::kAhead and nothing is written, so the caller can
  // hold it until the missing ones arrive. Empty order_key: no order kept.
  // @{
  std::string order_key;
  uint64_t position = 0;
  // Take an early event anyway and skip the missing positions (the caller
  // waited for them long enough). A skipped event that arrives later is
  // still taken once, as kLate.
  bool accept_gap = false;
  // @}
};

// What an ingest did with an event.
enum class IngestDisposition : uint8_t {
  kTaken,      // committed, in its sender's order
  kDuplicate,  // the scope had taken this event id before; nothing written
  kAhead,      // positions before it are missing; nothing written
  kLate,       // committed after later positions (its gap had been skipped)
};

// What an ingest did.
struct IngestResult {
  Receipt receipt;         // The committed event; empty unless taken or late.
  bool duplicate = false;  // The scope had taken this event id before.
  IngestDisposition disposition = IngestDisposition::kTaken;  // See above.
  // With an order key: the position the key waits for next, after this
  // ingest (kAhead: the first missing one).
  uint64_t next_position = 0;
  // accept_gap only: how many positions the ingest skipped.
  uint64_t skipped_positions = 0;
};

// Which dead letters of one subscriber an operator acts on.
struct DeadLetterSelection {
  std::string subscriber;      // whose dead letters (required):
  std::vector<uint64_t> seqs;  // these ones; or, when empty,
  std::string type;            // those of this type (empty: any) and
  std::string subject;         // of this subject (empty: any)
};

// Who acts and why: recorded with the action, before it takes effect.
struct OperatorAction {
  std::string operator_name;  // required
  std::string reason;         // required
  bool dry_run = false;       // report what would be done; change nothing
};

// What an operator action selected (in seq order) and its record's id.
struct ActionReport {
  uint64_t action_id = 0;  // 0 for a dry run, and when nothing was selected (nothing recorded)
  std::vector<uint64_t> seqs;  // the dead letters selected
  std::vector<std::string> released_subjects;  // unparked (PoisonPolicy::kParkKey)
};

// How a replay treats the subscriber's record of handled events.
enum class ReplayMode : uint8_t {
  // The subscriber's inbox applies: events it handled before are skipped
  // (counted), the others run. "Run again what failed or was missed."
  kSameInbox,
  // A new inbox scope, the replay's own: every selected event runs again,
  // once per replay. Refused unless the subscriber is side_effect_safe.
  kFreshScope,
};

// Which retained events a replay runs, for one subscriber. Every filter
// set must match; an empty one matches all. Only events the subscriber has
// passed (at or below its checkpoint when the replay starts) and the
// outbox still holds (see Options::retain_events and friends) are taken.
struct ReplayRequest {
  std::string subscriber;             // required; a registered subscriber
  ReplayMode mode = ReplayMode::kSameInbox;  // see ReplayMode
  uint64_t from_seq = 0;              // inclusive; 0: from the oldest kept
  uint64_t to_seq = 0;                // inclusive; 0: up to the checkpoint
  // Event time range [since, until): zero means unbounded.
  // @{
  std::chrono::system_clock::time_point since{};
  std::chrono::system_clock::time_point until{};
  // @}
  std::vector<std::string> types;     // any of these types
  std::string subject;                // exactly this subject
  std::vector<EventId> ids;           // any of these event ids
  uint64_t max_events = 0;            // stop after this many selected; 0: no cap
  OperatorAction action;              // who and why (required); dry_run
};

// Where a replay stands.
enum class ReplayState : uint8_t {
  kRunning,    // recorded, and running (or resuming at the next open)
  kDone,       // reached the end of its selection or its cap
  kCancelled,  // stopped by Bus::CancelReplay
  kRefused,    // could not run (the reason is in `error`)
};

// A replay's record (walbus.replays) and its counts so far.
struct ReplayReport {
  uint64_t replay_id = 0;   // 0 for a dry run
  std::string subscriber;   // whose replay
  ReplayMode mode = ReplayMode::kSameInbox;   // as requested
  ReplayState state = ReplayState::kRunning;  // where it stands
  std::string operator_name;  // who asked for it
  std::string reason;         // why
  std::string handler_version;  // the subscriber's when it started
  std::string selection;        // the request's filters, as text
  uint64_t started_ms = 0;      // unix ms
  uint64_t ended_ms = 0;        // unix ms; 0 while running
  uint64_t selected = 0;        // events that matched so far
  uint64_t delivered = 0;       // ran the handler, and its effects committed
  uint64_t skipped = 0;         // the inbox had them (kSameInbox) or not taken
  uint64_t failed = 0;          // dead-lettered by this replay
  uint64_t next_seq = 0;        // resumes here after a crash
  std::string error;            // kRefused: why
  // kCancelled: who cancelled it and why (Bus::CancelReplay).
  // @{
  std::string cancelled_by;
  std::string cancel_reason;
  // @}
  // Dry run: the selected events' seqs (at most 10000).
  std::vector<uint64_t> seqs;
};

// The bus. Open one per directory per process; the directory is locked
// against other processes.
//
// Threading: every method is thread-safe.
class WALBUS_EXPORT Bus {
 public:
  // Opens (or creates) the database in options.dir and recovers: the last
  // sequence number, registered subscribers and their checkpoints.
  // Busy when another process holds the directory; InvalidArgument for a
  // directory that is not a walbus database or bad options; NotSupported
  // for a newer on-disk format.
  [[nodiscard]] static Status Open(const Options& options, std::unique_ptr<Bus>* bus);

  Bus() = default;
  Bus(const Bus&) = delete;
  Bus& operator=(const Bus&) = delete;
  // Calls Close() and ignores its status.
  virtual ~Bus() = default;

  // A new transaction. Cheap; no I/O.
  virtual Transaction Begin() = 0;

  // Registers a subscriber (persisted on first use). A new subscriber sees
  // the events committed after its registration; a known one resumes after
  // its checkpoint. Before Start() it waits; after Start() it runs at once.
  // InvalidArgument for a bad name or no handler; Busy when a subscriber of
  // that name is already active in this process.
  [[nodiscard]] virtual Status Subscribe(SubscriberOptions subscriber) = 0;

  // Registers a payload verifier for `type`, replacing any earlier one.
  [[nodiscard]] virtual Status RegisterVerifier(const std::string& type, PayloadVerifier verifier) = 0;

  // Registers how to bring `from_type` to the later `to_type` (same base
  // name, higher version). Subscribers paused on an event this makes
  // translatable resume.
  [[nodiscard]] virtual Status RegisterUpcaster(const std::string& from_type, const std::string& to_type,
                                                Upcaster upcaster) = 0;

  // Takes an event produced elsewhere (another device, a file) as envelope
  // bytes (schemas/envelope.fbs) and commits it to the outbox, keeping its
  // id, type, source and time. The bytes are untrusted: they are verified
  // (size caps, FlatBuffers verifier, envelope rules, the type's payload
  // verifier) and on any failure stored in the bounded quarantine with the
  // reason, and InvalidArgument is returned; nothing else is written.
  [[nodiscard]] virtual Result<Receipt> Ingest(std::string_view envelope, std::string_view source) = 0;

  // Takes an event produced elsewhere, given by its attributes (a message
  // of another system, a CloudEvent), and commits it to the outbox keeping
  // its id, type, source, subject, time and trace attributes; `seq` is
  // ignored. It is verified as Publish verifies its own events (event
  // rules, size cap, the type's payload verifier) plus a non-nil id; on a
  // failure it is quarantined (Quarantine) and InvalidArgument returned.
  // With IngestOptions::dedup_scope set, each event id is taken at most
  // once per scope: a repeat commits nothing and reports duplicate. The
  // dedup record commits atomically with the event, so a crash between
  // commit and the sender's acknowledgement cannot make it twice. Dedup
  // records are kept for as long as the database: the scope's dedup is
  // absolute. With IngestOptions::order_key the sender's per-key order is
  // kept too (see IngestOptions); the key's last taken position commits
  // with the event. InvalidArgument for an order key without a scope or a
  // position.
  [[nodiscard]] virtual Result<IngestResult> IngestEvent(const Event& event, const IngestOptions& options) = 0;

  // Ingest of envelope bytes with IngestOptions (dedup as IngestEvent).
  [[nodiscard]] virtual Result<IngestResult> IngestEnvelope(std::string_view envelope,
                                                            const IngestOptions& options) = 0;

  // Stores input the application refused (a message that failed its own
  // checks: a bad signature, an unauthorized source) in the bounded
  // quarantine with `reason`, where operators find it (walbus quarantine).
  [[nodiscard]] virtual Status Quarantine(std::string_view input, std::string_view source,
                                          std::string_view reason) = 0;

  // Starts the dispatcher and the worker pool. Idempotent.
  [[nodiscard]] virtual Status Start() = 0;

  // Blocks until every active subscriber has completed every event
  // committed before the call (handled, skipped or rejected), or timeout.
  // Follow-ups those handlers publish are committed then, not yet handled:
  // WaitCaughtUp waits for them too. TimedOut; Closed when the bus closes.
  [[nodiscard]] virtual Status WaitIdle(std::chrono::milliseconds timeout) = 0;
  // Blocks until every active subscriber has completed everything
  // committed, follow-ups at any depth and commits made while it waits
  // included: until, at one moment, nothing committed is left to complete.
  // For a process that only drains (no receipt for WaitQuiescent). With
  // producers that never pause, that moment may not come: TimedOut.
  // Closed when the bus closes.
  [[nodiscard]] virtual Status WaitCaughtUp(std::chrono::milliseconds timeout) = 0;

  // Read-your-own-writes: blocks until each named subscriber (all active
  // ones when `subscribers` is empty) has completed every event of the
  // receipt, or `timeout`. Fills *states with one entry per event and
  // subscriber either way. TimedOut when some are still pending;
  // InvalidArgument when a name is not an active subscriber here.
  [[nodiscard]] virtual Status WaitHandled(const Receipt& receipt, const std::vector<std::string>& subscribers,
                                           std::chrono::milliseconds timeout, std::vector<DeliveryState>* states) = 0;

  // Read-your-own-writes for a whole cascade: blocks until every active
  // subscriber has completed the receipt's events and every event that
  // shares their flow (the same correlation id: the follow-ups handlers
  // published because of them, and theirs, at any depth), or `timeout`.
  // It relies on a follow-up committing with its parent's completion:
  // once the events up to seq N are complete, every follow-up of them is
  // committed. Cost: it reads the outbox committed after the receipt, once
  // per level of the cascade. An application event published with the
  // same explicit correlation id counts as part of the flow.
  // TimedOut when the cascade is not complete in time.
  [[nodiscard]] virtual Status WaitQuiescent(const Receipt& receipt, std::chrono::milliseconds timeout) = 0;

  // Where an event stands for every registered subscriber: kHandled and
  // kDeadLettered from the inbox, kRetrying from the retry record, else
  // kPending (or kPaused). By id alone an event not yet handled cannot be
  // told from one the subscriber never takes, nor found parked: Pending()
  // and WaitHandled, which know the seq, say those.
  [[nodiscard]] virtual Status EventStatus(const EventId& id, std::vector<DeliveryState>* states) = 0;

  // What `subscriber` has not completed yet, oldest first, at most `limit`
  // events (0: no limit): for an application that shows its user what is
  // still pending. Each is kPending, kRetrying (attempts, next attempt,
  // last error), kParked or kPaused; events it does not take are left out
  // when it is active in this process. Reads the outbox above the
  // subscriber's checkpoint. InvalidArgument for an unknown subscriber.
  [[nodiscard]] virtual Result<std::vector<DeliveryState>> Pending(const std::string& subscriber, size_t limit) = 0;

  // Sends the selected dead letters back to their (active) subscriber, in
  // their original per-subject order and before any later event of their
  // subject; a parked subject is released once its held events are back
  // in line. Each redriven event runs under the subscriber's retry policy
  // again. The action is recorded first (walbus.replays); a selection of
  // nothing is no action: OK, action_id 0, no record.
  [[nodiscard]] virtual Status RedriveDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action,
                                                  ActionReport* report) = 0;
  // Releases the parked subjects of the selection without running their
  // dead letters again; the dead letters stay for inspection.
  [[nodiscard]] virtual Status SkipDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action,
                                               ActionReport* report) = 0;
  // Deletes the selected dead letters; the action record keeps their seqs
  // and event ids.
  [[nodiscard]] virtual Status PurgeDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action,
                                                ActionReport* report) = 0;

  // Runs retained events through one active subscriber again, as an
  // operator action recorded in walbus.replays before it starts. Returns
  // once it is recorded (the report's replay_id); it runs in the
  // background, subject by subject in seq order, never beside a live event
  // of the same subject for that subscriber (a subject's replayed events
  // run while it is idle, before its next live event). Exactly once per
  // replay: a replay cut short by a crash resumes at the next open once
  // its subscriber is active, and events it completed are not run again.
  // A replayed event that exhausts the retry policy is dead-lettered
  // (counted failed) without parking its subject. One replay at a time
  // per subscriber: Busy otherwise. With action.dry_run, fills the report
  // with what would run and changes nothing. A registered subscriber that
  // is not active in this process (an operator's tool on a stopped
  // database) gets the replay recorded; it starts when the subscriber is
  // next subscribed (and a kFreshScope one of a subscriber that has become
  // not side_effect_safe by then ends as kRefused).
  // InvalidArgument for a bad request or an unknown subscriber;
  // NotSupported for kFreshScope on a subscriber not side_effect_safe, as
  // active here or, when not, as it was last subscribed (a database from
  // before registrations were stored: recorded, decided at Subscribe).
  [[nodiscard]] virtual Status Replay(const ReplayRequest& request, ReplayReport* report) = 0;
  // Stops a running replay, recording who and why (action.dry_run is
  // ignored); what it completed stays. InvalidArgument without an
  // operator name and a reason; NotFound for an unknown id; OK (and no
  // change) when it has ended already.
  [[nodiscard]] virtual Status CancelReplay(uint64_t replay_id, const OperatorAction& action) = 0;
  // The record of one replay, its counts up to date. NotFound when none.
  [[nodiscard]] virtual Status GetReplay(uint64_t replay_id, ReplayReport* report) = 0;

  // The counters of this bus; after Close(), the last ones.
  virtual BusStats Stats() = 0;

  // Every metric of this bus (names walbus_*, units spelled out): publishes
  // by type, commit group sizes and write durations, the outbox backlog
  // and the age of its oldest event, per subscriber progress, lag (events
  // and seconds), outcomes and handler durations, replays, the quarantine
  // and storage figures; then the families of every added MetricsSource.
  // Counters count this process (from zero at each Open); the database's
  // lifetime totals are the *_persisted gauges (walbus/metrics.h).
  // Reads a few records; call it from a scraper, not a hot path.
  virtual std::vector<MetricFamily> Metrics() = 0;
  // Metrics() in the Prometheus text exposition format (PrometheusText):
  // what Options::metrics_http serves.
  virtual std::string MetricsText() = 0;
  // Adds `source`'s families to Metrics() for as long as the source lives:
  // the bus holds it only while it collects, and forgets it once it is
  // destroyed (so the source may outlive the bus, or not). The JetStream
  // bridge adds its relays and inbound consumers itself. InvalidArgument
  // for a null or destroyed source, or one added already.
  [[nodiscard]] virtual Status AddMetricsSource(std::weak_ptr<const MetricsSource> source) = 0;

  // Stops accepting commits, waits for commits and other calls in progress,
  // lets running handlers finish (their effects commit), writes
  // checkpoints, stops the threads and closes storage, releasing the
  // directory lock. Events not yet handled stay in the outbox for the next
  // Open. A call racing with Close() (on this Bus or on a Transaction)
  // either finishes first or returns Closed; waits (WaitHandled,
  // WaitQuiescent, WaitIdle) end with Closed. Afterwards the calls that
  // need storage or the bus's threads return Closed; Stats() and
  // MetricsText() report the last figures held in memory. Idempotent.
  // InvalidArgument when called from a handler, a verifier or an upcaster.
  [[nodiscard]] virtual Status Close() = 0;
};

}  // namespace walbus

#endif  // WALBUS_BUS_H_
