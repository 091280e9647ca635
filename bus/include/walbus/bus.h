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
//
// The API by concern: walbus/scope.h (Transaction, HandlerContext),
// walbus/read.h (scans, ReadView),
// walbus/subscriber.h (SubscriberOptions, Outcome), walbus/stats.h,
// walbus/ingest.h, walbus/operations.h (Bus::Operator(): dead letters,
// replay), walbus/contracts.h (Bus::Contracts(): event schemas),
// walbus/options.h, walbus/event.h, walbus/status.h, walbus/metrics.h,
// walbus/logger.h. This header includes them all. Process managers, built
// on subscribers, are in walbus/process.h.
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

#include "walbus/contracts.h"
#include "walbus/event.h"
#include "walbus/export.h"
#include "walbus/ingest.h"
#include "walbus/logger.h"
#include "walbus/metrics.h"
#include "walbus/operations.h"
#include "walbus/options.h"
#include "walbus/read.h"
#include "walbus/scope.h"
#include "walbus/stats.h"
#include "walbus/status.h"
#include "walbus/subscriber.h"

namespace walbus {

// The bus. Open one per directory per process; the directory is locked
// against other processes.
//
// Threading: every method is thread-safe.
//
// From a handler (on the thread that runs it), every call may be made but
// those that wait for handlers: Close(), WaitIdle(), WaitCaughtUp(),
// WaitHandled() and WaitQuiescent() would wait for the handler itself, and
// return InvalidArgument at once instead. A handler writes through its
// HandlerContext, not through a Transaction of its own: the two would not
// commit as one.
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

  // A new transaction. Cheap; no I/O. Destroy it before this Bus.
  virtual Transaction Begin() = 0;

  // A snapshot of the application's committed state, to read from outside
  // a unit of work (walbus/read.h: its cost, lifetime and threading).
  // Cheap; no I/O. After Close() the view's reads return Closed.
  virtual ReadView Read() = 0;

  // Registers a subscriber (persisted on first use). A new subscriber
  // starts where its SubscriberOptions::start says (by default with the
  // events committed after its registration); a known one resumes after
  // its checkpoint. Before Start() it waits; after Start() it runs at once.
  // InvalidArgument for a bad name, no handler, or a start position the
  // outbox no longer (or does not yet) holds; Busy when a subscriber of
  // that name is already active in this process.
  [[nodiscard]] virtual Status Subscribe(SubscriberOptions subscriber) = 0;

  // Takes an event produced elsewhere, given by its attributes (a message
  // of another system, a CloudEvent), and commits it to the outbox keeping
  // its id, type, source, subject, time and trace attributes; `seq` is
  // ignored. It is verified as Publish verifies its own events (event
  // rules, size cap, the type's payload verifier) plus a non-nil id; on a
  // failure it is quarantined (Quarantine) and InvalidArgument returned.
  // With IngestOptions::dedup_scope set, each event id is taken at most
  // once per scope: a repeat commits nothing and reports kDuplicate. The
  // dedup record commits atomically with the event, so a crash between
  // commit and the sender's acknowledgement cannot make it twice. Dedup
  // records are kept for as long as the database: the scope's dedup is
  // absolute. With IngestOptions::order_key the sender's per-key order is
  // kept too (see IngestOptions); the key's last taken position commits
  // with the event. InvalidArgument for an order key without a scope or a
  // position.
  [[nodiscard]] virtual Result<IngestResult> IngestEvent(const Event& event, const IngestOptions& options) = 0;

  // Takes an event produced elsewhere (another device, a file) as envelope
  // bytes (schemas/envelope.fbs), keeping its id, type, source and time;
  // otherwise as IngestEvent (dedup, order key, quarantine). The bytes are
  // untrusted: they are verified (size caps, FlatBuffers verifier,
  // envelope rules, the type's payload verifier and schema) and on any
  // failure stored in the bounded quarantine with the reason, and
  // InvalidArgument is returned; nothing else is written.
  [[nodiscard]] virtual Result<IngestResult> IngestEnvelope(std::string_view envelope,
                                                            const IngestOptions& options) = 0;

  // Stores input the application refused (a message that failed its own
  // checks: a bad signature, an unauthorized source) in the bounded
  // quarantine with `reason`, where operators find it (walbus quarantine).
  [[nodiscard]] virtual Status Quarantine(std::string_view input, std::string_view source, std::string_view reason) = 0;

  // The contracts of event types: schemas, payload verifiers, upcasters
  // (walbus/contracts.h). Valid as long as this Bus.
  virtual EventContracts& Contracts() = 0;

  // What an operator does: dead letters, replays, removing a subscriber,
  // cancelling a scheduled event, abandoning a process instance
  // (walbus/operations.h). Valid as long as this Bus.
  virtual OperatorActions& Operator() = 0;

  // Starts the dispatcher and the worker pool. Calling it again (from a
  // handler too) does nothing and returns OK; Closed after Close().
  [[nodiscard]] virtual Status Start() = 0;

  // Blocks until every active subscriber has completed every event
  // committed before the call (handled, skipped or rejected), or timeout.
  // Follow-ups those handlers publish are committed then, not yet handled:
  // WaitCaughtUp waits for them too. TimedOut; Closed when the bus closes;
  // InvalidArgument from a handler (as for every wait below).
  [[nodiscard]] virtual Status WaitIdle(std::chrono::milliseconds timeout) = 0;
  // Blocks until every active subscriber has completed everything
  // committed, follow-ups at any depth and commits made while it waits
  // included: until, at one moment, nothing committed is left to complete.
  // For a process that only drains (no receipt for WaitQuiescent). With
  // producers that never pause, that moment may not come: TimedOut.
  // Closed when the bus closes. Under a clock that does not pass by itself
  // (ManualClock), once started: until nothing more can run before that
  // clock moves: what waits for a later moment of it (a retry's backoff, a
  // scheduled event, Outcome::Wait) is left waiting, and what is due now
  // (scheduled events fired, their handlers, follow-ups) has run.
  [[nodiscard]] virtual Status WaitCaughtUp(std::chrono::milliseconds timeout) = 0;

  // Read-your-own-writes: blocks until each named subscriber (all active
  // ones when `subscribers` is empty) has completed every event of the
  // receipt, or `timeout`. Fills *states with one entry per event and
  // subscriber either way. TimedOut when some are still pending;
  // InvalidArgument when a name is not an active subscriber here. (Unlike
  // the calls that return a Result, the states mean something on TimedOut
  // too, so they come beside the Status.)
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
  [[nodiscard]] virtual Result<std::vector<DeliveryState>> EventStatus(const EventId& id) = 0;

  // What `subscriber` has not completed yet, oldest first, at most `limit`
  // events (0: no limit): for an application that shows its user what is
  // still pending. Each is kPending, kRetrying (attempts, next attempt,
  // last error), kParked or kPaused; events it does not take are left out
  // when it is active in this process. Reads the outbox above the
  // subscriber's checkpoint. InvalidArgument for an unknown subscriber.
  [[nodiscard]] virtual Result<std::vector<DeliveryState>> Pending(std::string_view subscriber, uint64_t limit) = 0;

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
  // for a null or destroyed source, or one added already; Closed after
  // Close().
  [[nodiscard]] virtual Status AddMetricsSource(std::weak_ptr<const MetricsSource> source) = 0;

  // Writes one line to the bus's log (Options::logger, or standard error)
  // when `level` is at least the logger's level: for code that runs beside
  // the bus and logs where it does, as the JetStream bridge does. Works
  // after Close() too. Thread-safe.
  virtual void Log(LogLevel level, std::string_view line) = 0;

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
