// walbus/c.h: the C API, for C programs and for bindings from other
// languages. It covers the everyday path: open a bus, subscribe a handler,
// commit writes and events, wait, read counters, close.
//
//   walbus_options opt;
//   walbus_options_init(&opt);
//   opt.dir = "/var/lib/app/bus";
//   const char* cfs[] = {"orders", "invoices"};
//   opt.column_families = cfs;
//   opt.ncolumn_families = 2;
//   walbus_t* bus = NULL;
//   char* err = NULL;
//   if (walbus_open(&opt, &bus, &err) != WALBUS_OK) { puts(err); walbus_free_error(err); }
//
// Errors: every call that can fail returns a walbus_code, WALBUS_OK (0) on
// success. When it fails and `err` is not NULL, *err is set to a message in
// memory from malloc that the caller frees with walbus_free_error(); on
// success *err is left as it was. No C++ exception leaves a walbus_ call:
// one that would is caught and reported as WALBUS_INTERNAL (or
// WALBUS_RESOURCE_EXHAUSTED when memory ran out).
//
// Bytes: keys, values and payloads are (pointer, length) pairs and may hold
// any byte; names (column families, types, subjects) are NUL-terminated.
//
// Needs C99 or later (or any C++ standard).
//
// Threading: a walbus_t may be used from many threads at once; a
// walbus_tx_t by one thread at a time; a walbus_ctx_t only inside the
// handler call it was passed to. The guarantees are those of the C++ API
// (walbus/bus.h).
#ifndef WALBUS_C_H_
#define WALBUS_C_H_

#include <stddef.h>
#include <stdint.h>

#include "walbus/export.h"

#ifdef __cplusplus
extern "C" {
#endif

// An open bus (walbus::Bus).
typedef struct walbus_t walbus_t;
// A transaction (walbus::Transaction).
typedef struct walbus_tx_t walbus_tx_t;
// What a handler writes through (walbus::HandlerContext).
typedef struct walbus_ctx_t walbus_ctx_t;
// A snapshot of committed state (walbus::ReadView).
typedef struct walbus_view_t walbus_view_t;

// Result codes; the same as walbus::Status::Code, plus WALBUS_INTERNAL.
typedef enum walbus_code {
  WALBUS_OK = 0,                   // Success.
  WALBUS_INVALID_ARGUMENT = 1,     // The caller's input is wrong; nothing was written.
  WALBUS_NOT_FOUND = 2,            // A named thing is absent.
  WALBUS_CONFLICT = 3,             // A version precondition failed; nothing was written.
  WALBUS_BUSY = 4,                 // The resource is held (e.g. another process's lock).
  WALBUS_IO_ERROR = 5,             // The operating system or the disk failed.
  WALBUS_CORRUPTION = 6,           // Stored bytes fail verification.
  WALBUS_NOT_SUPPORTED = 7,        // Valid request this build or mode cannot do.
  WALBUS_CLOSED = 8,               // The bus is closed or closing.
  WALBUS_TIMED_OUT = 9,            // A wait ran out of time.
  WALBUS_RESOURCE_EXHAUSTED = 10,  // A configured bound was reached, or memory ran out.
  WALBUS_INTERNAL = 100,           // An unexpected failure inside walbus.
} walbus_code;

// What a handler returns.
typedef enum walbus_outcome {
  // Handled: the writes made through the context commit, atomically with the
  // record that this subscriber handled this event.
  WALBUS_DONE = 0,
  // Transient failure: the writes are dropped and the event is handled again
  // later (after walbus_ctx_retry_after(), else the subscriber's backoff).
  WALBUS_RETRY = 1,
  // Permanent failure: the writes are dropped and the event goes to the
  // dead-letter store (with walbus_ctx_reject_reason(), if given).
  WALBUS_REJECT = 2,
} walbus_outcome;

// How durable a commit is once it returned (walbus::Durability).
typedef enum walbus_durability {
  WALBUS_DURABILITY_SYNC = 0,      // Survives power loss (default).
  WALBUS_DURABILITY_BUFFERED = 1,  // Survives a process crash, not power loss.
} walbus_durability;

// Options for walbus_open(). Fill them with walbus_options_init() first,
// then set what differs; the strings are copied by walbus_open().
typedef struct walbus_options {
  // Directory of the database. Required.
  const char* dir;
  // Non-zero: create the directory and an empty database when none exists.
  // Default 1.
  int create_if_missing;
  // A walbus_durability. Default WALBUS_DURABILITY_SYNC.
  int durability;
  // The application's column families: ncolumn_families names.
  const char* const* column_families;
  // Number of entries in column_families.
  size_t ncolumn_families;
  // The source stamped on events; NULL for the default ("walbus").
  const char* source;
  // Threads that run handlers; 0 for the default (2).
  size_t worker_threads;
  // Bytes for what grows with load (walbus::Options::memory_budget: the
  // storage cache and memtables, the tail cache, the queues); 0 for the
  // default (256 MiB). At least 8 MiB.
  size_t memory_budget;
} walbus_options;

// A committed event as a handler sees it. Every pointer is valid only
// during the handler call; every string is NUL-terminated ("" when unset).
typedef struct walbus_event {
  uint64_t seq;                // Position in the outbox; commit order.
  const char* id;              // The event id, canonical UUID text.
  const char* type;            // E.g. "orders.order-approved.v1".
  const char* source;          // Who published it.
  const char* subject;         // The ordering key.
  uint64_t subject_version;    // Entity version; 0 when unused.
  int64_t time_unix_ms;        // Publish time, Unix milliseconds.
  const char* content_type;    // Media type of data.
  const char* data;            // The payload: data_len bytes (followed by a NUL).
  size_t data_len;             // Length of data in bytes.
  const char* correlation_id;  // Id of the business flow; "" when none.
  const char* causation_id;    // Id of the event whose handler published it; "" when none.
  const char* traceparent;     // W3C trace context; "" when none.
} walbus_event;

// A handler: returns a walbus_outcome (any other value counts as
// WALBUS_RETRY). Runs on a worker thread, never concurrently for one
// subscriber and one subject; handlers of different subjects run in
// parallel, so shared state in `user` needs locking or atomics.
typedef int (*walbus_handler_fn)(void* user, const walbus_event* event, walbus_ctx_t* ctx);

// Progress of one subscriber (walbus::SubscriberStats).
typedef struct walbus_subscriber_stats {
  const char* name;        // The subscriber's name.
  uint64_t checkpoint;     // Every event at or below it is completed.
  uint64_t handled;        // Events whose effects committed.
  uint64_t duplicates;     // Redeliveries recognised and skipped.
  uint64_t retries;        // Handler attempts that asked to retry.
  uint64_t dead_lettered;  // Events sent to the dead-letter store.
  uint64_t in_flight;      // Events fetched into memory, not completed.
} walbus_subscriber_stats;

// Counters of a bus (walbus::BusStats), from walbus_stats().
typedef struct walbus_bus_stats {
  uint64_t last_seq;                           // Sequence number of the newest committed event.
  uint64_t commits;                            // Successful commits in this process.
  size_t nsubscribers;                         // Number of entries in subscribers.
  const walbus_subscriber_stats* subscribers;  // One per active subscriber.
  // Appended: walbus_stats() allocates this struct, so it may grow at its end.
  uint64_t scheduled_pending;    // Scheduled events waiting for their time.
  uint64_t scheduled_fired;      // Scheduled events that entered the outbox, ever.
  uint64_t scheduled_cancelled;  // Scheduled events cancelled before they fired, ever.
} walbus_bus_stats;

// An event to publish (walbus::EventSpec); walbus_event_spec_init() sets
// every field to its default (NULL strings: unset).
typedef struct walbus_event_spec {
  const char* type;          // Required, e.g. "orders.order-approved.v1".
  const char* subject;       // Required: the ordering key.
  uint64_t subject_version;  // The entity version it produced; 0: unused.
  const char* data;          // data_len bytes of payload (NULL when 0).
  size_t data_len;           // Length of data in bytes.
  const char* content_type;  // Media type of data, e.g. "application/json".
  const char* source;        // Overrides walbus_options.source.
  const char* traceparent;   // W3C trace context.
} walbus_event_spec;

// What a subscriber does with an event that keeps failing
// (walbus::PoisonPolicy).
typedef enum walbus_poison_policy {
  WALBUS_POISON_DEAD_LETTER = 0,  // Dead-letter it; its subject moves on.
  WALBUS_POISON_PARK_KEY = 1,     // Dead-letter it and hold its subject.
} walbus_poison_policy;

// A subscriber (walbus::SubscriberOptions); walbus_subscriber_options_init()
// sets the defaults (every type, 8 attempts with backoff, dead-lettering).
typedef struct walbus_subscriber_options {
  const char* name;             // Required: [A-Za-z0-9._-], 1..128 bytes.
  const char* const* types;     // types[0..ntypes); ntypes 0: every type.
  size_t ntypes;                // Entries in types.
  walbus_handler_fn handler;    // Required.
  void* user;                   // Passed to handler; valid until walbus_close().
  uint32_t max_attempts;        // Handler runs before it is given up on.
  uint64_t retry_base_ms;       // First backoff (full jitter, doubling).
  uint64_t retry_cap_ms;        // Largest backoff.
  uint64_t retry_max_age_ms;    // Give up after this long; 0: no limit.
  int on_poison;                // A walbus_poison_policy: after the last attempt.
  int skip_stale;               // Non-zero: skip events older than the applied subject_version.
  const char* handler_version;  // Recorded with dead letters and replays; NULL: "".
  int side_effect_safe;         // Non-zero: fresh-scope replays may run it again.
} walbus_subscriber_options;

// Where one event stands for one subscriber (walbus::DeliveryState).
typedef enum walbus_delivery_state {
  WALBUS_DELIVERY_PENDING = 0,        // Not completed; no run of it failed.
  WALBUS_DELIVERY_HANDLED = 1,        // Its effects committed (or a stale skip).
  WALBUS_DELIVERY_DEAD_LETTERED = 2,  // Given up on: in the dead-letter store.
  WALBUS_DELIVERY_PAUSED = 3,         // The subscriber waits for an upcaster.
  WALBUS_DELIVERY_NOT_DELIVERED = 4,  // Completed without the handler: a type it does not take.
  WALBUS_DELIVERY_RETRYING = 5,       // A run failed; it runs again.
  WALBUS_DELIVERY_PARKED = 6,         // Held behind a dead letter of its subject.
} walbus_delivery_state;

// One entry of walbus_event_status() or walbus_pending().
typedef struct walbus_delivery {
  const char* subscriber;        // The subscriber's name.
  char id[37];                   // The event id, canonical UUID text.
  uint64_t seq;                  // Its sequence number; 0 when not known.
  int state;                     // A walbus_delivery_state.
  uint32_t attempts;             // Retrying, dead-lettered: handler runs so far.
  const char* last_error;        // Their last error; "" when none.
  int64_t next_attempt_unix_ms;  // Retrying: when the next run is due; 0 when not known.
  uint64_t parked_behind;        // Parked: the seq of the dead letter holding its subject.
} walbus_delivery;

// Where a scheduled event stands (walbus::ScheduledStatus::State).
typedef enum walbus_scheduled_state {
  WALBUS_SCHEDULED_UNKNOWN = 0,    // Never scheduled here (or not committed yet).
  WALBUS_SCHEDULED_PENDING = 1,    // Waiting for its time.
  WALBUS_SCHEDULED_FIRED = 2,      // Entered the outbox: an ordinary event now.
  WALBUS_SCHEDULED_CANCELLED = 3,  // Cancelled before it fired.
} walbus_scheduled_state;

// Reading state: ordered scans, values with versions, snapshot views and
// range deletions (walbus/read.h, walbus/scope.h). A transaction's and a
// handler's reads see one snapshot with their own writes over it; a view's
// see the state when it was made.

// Which rows a scan visits (walbus::ScanOptions); every bound is bytes,
// NULL or length 0 meaning none. Fill it with walbus_scan_options_init().
typedef struct walbus_scan_options {
  const char* start;         // the first key taken (inclusive)
  size_t start_len;          // its length
  const char* end;           // the first key not taken (exclusive)
  size_t end_len;            // its length
  const char* prefix;        // only keys that start with these bytes
  size_t prefix_len;         // its length
  size_t limit;              // at most this many rows; 0: no limit
  int reverse;               // non-zero: descending key order
  const char* resume_after;  // paging: the resume key a previous scan returned; go on after it
  size_t resume_after_len;   // its length
} walbus_scan_options;

// Called once per row in scan order; the bytes are valid during the call
// only. Return 0 to go on, non-zero to stop.
typedef int (*walbus_row_fn)(void* user, const char* key, size_t key_len, const char* value, size_t value_len);

// ---- The library ----

// The version of the linked library, e.g. "0.1.0" (compare with
// WALBUS_VERSION_STRING from walbus/version.h).
WALBUS_EXPORT const char* walbus_version(void);

// ---- The bus (walbus_t) ----

// Sets every field of *options to its default; dir stays NULL.
WALBUS_EXPORT void walbus_options_init(walbus_options* options);

// Opens (or creates) the database in options->dir and recovers it
// (walbus::Bus::Open). On success *bus is a handle for walbus_close().
WALBUS_EXPORT walbus_code walbus_open(const walbus_options* options, walbus_t** bus, char** err);

// Closes the bus (walbus::Bus::Close: running handlers finish, checkpoints
// are written) and frees the handle, also when closing reports an error.
// NULL is allowed. Every walbus_tx_t of this bus must be finished, and
// every walbus_view_t freed, first.
WALBUS_EXPORT walbus_code walbus_close(walbus_t* bus, char** err);

// Registers a subscriber `name` for the event types in types[0..ntypes)
// (ntypes 0: every type); `handler` runs with `user` as its first argument.
// `user` must stay valid until walbus_close() returned.
WALBUS_EXPORT walbus_code walbus_subscribe(walbus_t* bus, const char* name, const char* const* types, size_t ntypes,
                                           walbus_handler_fn handler, void* user, char** err);

// Sets the defaults of walbus::SubscriberOptions in *options.
WALBUS_EXPORT void walbus_subscriber_options_init(walbus_subscriber_options* options);

// Registers a subscriber with its retry and poison policies (the options
// are copied; `user` must stay valid until walbus_close() returned).
WALBUS_EXPORT walbus_code walbus_subscribe_with(walbus_t* bus, const walbus_subscriber_options* options, char** err);

// Starts the dispatcher and the handler threads. Idempotent.
WALBUS_EXPORT walbus_code walbus_start(walbus_t* bus, char** err);

// A new transaction; NULL only when memory ran out. Finish it with
// walbus_tx_commit() or walbus_tx_abort().
WALBUS_EXPORT walbus_tx_t* walbus_begin(walbus_t* bus);

// A snapshot of committed state; NULL only when memory ran out. Its reads
// may run on several threads at once. Free it with walbus_free_view()
// before walbus_close(), and soon: while it lives, storage keeps every
// value it can see (walbus::ReadView).
WALBUS_EXPORT walbus_view_t* walbus_read(walbus_t* bus);

// Blocks until every active subscriber has completed every event committed
// before the call, or timeout_ms passed (WALBUS_TIMED_OUT).
WALBUS_EXPORT walbus_code walbus_wait_idle(walbus_t* bus, uint64_t timeout_ms, char** err);

// Waits until every active subscriber has completed everything committed,
// follow-ups at any depth included (walbus::Bus::WaitCaughtUp).
WALBUS_EXPORT walbus_code walbus_wait_caught_up(walbus_t* bus, uint64_t timeout_ms, char** err);

// Read-your-own-writes: waits until every active subscriber has completed
// the event `id` committed at `seq` (walbus_tx_commit's first_seq, plus
// its place in the transaction), or timeout_ms: WALBUS_TIMED_OUT.
WALBUS_EXPORT walbus_code walbus_wait_event(walbus_t* bus, uint64_t seq, const char* id, uint64_t timeout_ms,
                                            char** err);

// Where event `id` stands for every registered subscriber
// (walbus::Bus::EventStatus): *deliveries gets *count entries, freed with
// walbus_free_deliveries().
WALBUS_EXPORT walbus_code walbus_event_status(walbus_t* bus, const char* id, walbus_delivery** deliveries,
                                              size_t* count, char** err);

// What `subscriber` has not completed yet, oldest first, at most `limit`
// (0: no limit) (walbus::Bus::Pending); freed with walbus_free_deliveries().
WALBUS_EXPORT walbus_code walbus_pending(walbus_t* bus, const char* subscriber, size_t limit,
                                         walbus_delivery** deliveries, size_t* count, char** err);

// The bus's counters; free *stats with walbus_free_stats().
WALBUS_EXPORT walbus_code walbus_stats(walbus_t* bus, walbus_bus_stats** stats, char** err);

// ---- Transactions (walbus_tx_t) ----

// Buffers a write of key -> value in a column family of the transaction.
WALBUS_EXPORT walbus_code walbus_tx_put(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len,
                                        const char* value, size_t value_len, char** err);

// Buffers a delete of key (a no-op when it is absent).
WALBUS_EXPORT walbus_code walbus_tx_delete(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len,
                                           char** err);

// Buffers the deletion of every key in [start, end), atomic with the rest
// of the transaction. WALBUS_INVALID_ARGUMENT unless start < end.
WALBUS_EXPORT walbus_code walbus_tx_delete_range(walbus_tx_t* tx, const char* column_family, const char* start,
                                                 size_t start_len, const char* end, size_t end_len, char** err);

// Buffers the deletion of every key of the column family.
WALBUS_EXPORT walbus_code walbus_tx_clear(walbus_tx_t* tx, const char* column_family, char** err);

// Reads a key: the transaction's own buffered write first, then committed
// state. On success *value is NULL when the key is absent, else a copy
// (followed by a NUL) that the caller frees with walbus_free(), and
// *value_len its length.
WALBUS_EXPORT walbus_code walbus_tx_get(walbus_tx_t* tx, const char* column_family, const char* key, size_t key_len,
                                        char** value, size_t* value_len, char** err);

// The committed version of key: 0 when it was never written (a delete
// keeps counting). For walbus_tx_expect_version.
WALBUS_EXPORT walbus_code walbus_tx_get_version(walbus_tx_t* tx, const char* column_family, const char* key,
                                                size_t key_len, uint64_t* version, char** err);

// A value and its committed version from the same snapshot: *value as
// walbus_tx_get() gives it, *version as walbus_tx_get_version(). Read the
// version to assert with this, not with a separate get_version: two reads
// at two moments can lose an update.
WALBUS_EXPORT walbus_code walbus_tx_get_with_version(walbus_tx_t* tx, const char* column_family, const char* key,
                                                     size_t key_len, char** value, size_t* value_len, uint64_t* version,
                                                     char** err);

// A precondition: the commit fails with WALBUS_CONFLICT, writing nothing,
// unless key's committed version is still `version` then.
WALBUS_EXPORT walbus_code walbus_tx_expect_version(walbus_tx_t* tx, const char* column_family, const char* key,
                                                   size_t key_len, uint64_t version, char** err);

// Sets every field of *options to "all rows, ascending".
WALBUS_EXPORT void walbus_scan_options_init(walbus_scan_options* options);

// Visits the rows `options` selects in a transaction. When the limit
// stopped the scan with rows left and `resume_after` is not NULL,
// *resume_after is the last row's key (free it with walbus_free(); pass it
// as options->resume_after for the next page) and *resume_after_len its
// length; otherwise *resume_after is NULL.
WALBUS_EXPORT walbus_code walbus_tx_scan(walbus_tx_t* tx, const char* column_family, const walbus_scan_options* options,
                                         walbus_row_fn row, void* user, char** resume_after, size_t* resume_after_len,
                                         char** err);

// Buffers an event of `type` about `subject` with data_len bytes of payload.
// The type and subject rules are those of walbus::EventSpec.
WALBUS_EXPORT walbus_code walbus_tx_publish(walbus_tx_t* tx, const char* type, const char* subject, const char* data,
                                            size_t data_len, char** err);

// Sets every field of *spec to its default.
WALBUS_EXPORT void walbus_event_spec_init(walbus_event_spec* spec);

// Buffers an event with every attribute walbus::EventSpec has. On success
// id (when not NULL, 37 bytes) gets the event's id as text.
WALBUS_EXPORT walbus_code walbus_tx_publish_spec(walbus_tx_t* tx, const walbus_event_spec* spec, char* id, char** err);

// Scheduled events (docs/time.md): an event that enters the outbox at a
// later moment, unseen by subscribers until then and cancellable until it
// fires; it gets its sequence number when it fires, so walbus_tx_commit's
// first_seq does not count it. Scheduling and cancelling commit with the
// transaction or the handler like every other write. The moment is an
// argument rather than a field of walbus_event_spec, whose size programs
// built against an older walbus.h rely on.

// Buffers an event that enters the outbox at deliver_at_unix_ms
// (milliseconds since the Unix epoch, UTC; a moment already past fires at
// once) (walbus::EventSpec::deliver_at). On success id (when not NULL, 37
// bytes) gets its id, for walbus_tx_cancel_scheduled().
WALBUS_EXPORT walbus_code walbus_tx_publish_at(walbus_tx_t* tx, const walbus_event_spec* spec,
                                               int64_t deliver_at_unix_ms, char* id, char** err);

// The same, delay_ms of elapsed time after this call
// (walbus::EventSpec::deliver_after): it keeps to elapsed time when the
// wall clock steps back meanwhile.
WALBUS_EXPORT walbus_code walbus_tx_publish_after(walbus_tx_t* tx, const walbus_event_spec* spec, uint64_t delay_ms,
                                                  char* id, char** err);

// Cancels the scheduled event `id` (36 characters) with the rest of the
// transaction (walbus::WriteScope::CancelScheduled), decided in commit
// order against the firing: when it fired or was cancelled first, this
// call (if the transaction's snapshot shows it already) or else
// walbus_tx_commit() fails with WALBUS_CONFLICT, saying which, and the
// transaction writes nothing.
WALBUS_EXPORT walbus_code walbus_tx_cancel_scheduled(walbus_tx_t* tx, const char* id, char** err);

// Where the scheduled event `id` stands as the transaction sees it, its own
// buffered writes included (walbus::WriteScope::GetScheduled): *state a
// walbus_scheduled_state; *at_unix_ms (when not NULL) when it falls due
// (pending) or when it fired or was cancelled, 0 when unknown.
WALBUS_EXPORT walbus_code walbus_tx_get_scheduled(walbus_tx_t* tx, const char* id, int* state, int64_t* at_unix_ms,
                                                  char** err);

// Commits the transaction atomically and frees it, whatever the result. On
// success *first_seq (when not NULL) is the sequence number of its first
// event, 0 when it published none.
WALBUS_EXPORT walbus_code walbus_tx_commit(walbus_tx_t* tx, uint64_t* first_seq, char** err);

// walbus_tx_commit, returning only once the commit is on stable storage
// even on a WALBUS_BUFFERED bus (walbus::CommitOptions::sync): for the few
// commits a power cut must not take. It shares the fsync of its group.
WALBUS_EXPORT walbus_code walbus_tx_commit_sync(walbus_tx_t* tx, uint64_t* first_seq, char** err);

// Frees the transaction without committing anything. NULL is allowed.
WALBUS_EXPORT void walbus_tx_abort(walbus_tx_t* tx);

// ---- Handlers (walbus_ctx_t) ----

// The walbus_ctx_ calls do in a handler what the walbus_tx_ ones do in a
// transaction; what they write commits with the handled record.

// Buffers a write that commits with this event's handled record: exactly
// once, even when the event is delivered twice.
WALBUS_EXPORT walbus_code walbus_ctx_put(walbus_ctx_t* ctx, const char* column_family, const char* key, size_t key_len,
                                         const char* value, size_t value_len, char** err);

// walbus_tx_delete in a handler: commits with the handled record.
WALBUS_EXPORT walbus_code walbus_ctx_delete(walbus_ctx_t* ctx, const char* column_family, const char* key,
                                            size_t key_len, char** err);

// walbus_tx_delete_range in a handler: commits with the handled record.
WALBUS_EXPORT walbus_code walbus_ctx_delete_range(walbus_ctx_t* ctx, const char* column_family, const char* start,
                                                  size_t start_len, const char* end, size_t end_len, char** err);

// walbus_tx_clear in a handler: commits with the handled record.
WALBUS_EXPORT walbus_code walbus_ctx_clear(walbus_ctx_t* ctx, const char* column_family, char** err);

// Reads a key, as walbus_tx_get() does.
WALBUS_EXPORT walbus_code walbus_ctx_get(walbus_ctx_t* ctx, const char* column_family, const char* key, size_t key_len,
                                         char** value, size_t* value_len, char** err);

// walbus_tx_get_version in a handler.
WALBUS_EXPORT walbus_code walbus_ctx_get_version(walbus_ctx_t* ctx, const char* column_family, const char* key,
                                                 size_t key_len, uint64_t* version, char** err);

// walbus_tx_get_with_version in a handler.
WALBUS_EXPORT walbus_code walbus_ctx_get_with_version(walbus_ctx_t* ctx, const char* column_family, const char* key,
                                                      size_t key_len, char** value, size_t* value_len,
                                                      uint64_t* version, char** err);

// walbus_tx_expect_version in a handler: a conflict reruns the handler.
WALBUS_EXPORT walbus_code walbus_ctx_expect_version(walbus_ctx_t* ctx, const char* column_family, const char* key,
                                                    size_t key_len, uint64_t version, char** err);

// walbus_tx_scan in a handler.
WALBUS_EXPORT walbus_code walbus_ctx_scan(walbus_ctx_t* ctx, const char* column_family,
                                          const walbus_scan_options* options, walbus_row_fn row, void* user,
                                          char** resume_after, size_t* resume_after_len, char** err);

// Buffers a follow-up event, as walbus_tx_publish() does; it commits with
// the handler's writes.
WALBUS_EXPORT walbus_code walbus_ctx_publish(walbus_ctx_t* ctx, const char* type, const char* subject, const char* data,
                                             size_t data_len, char** err);

// walbus_tx_publish_spec in a handler: a follow-up of the handled event.
WALBUS_EXPORT walbus_code walbus_ctx_publish_spec(walbus_ctx_t* ctx, const walbus_event_spec* spec, char* id,
                                                  char** err);

// walbus_tx_publish_at in a handler: commits with its effects.
WALBUS_EXPORT walbus_code walbus_ctx_publish_at(walbus_ctx_t* ctx, const walbus_event_spec* spec,
                                                int64_t deliver_at_unix_ms, char* id, char** err);

// walbus_tx_publish_after in a handler: commits with its effects.
WALBUS_EXPORT walbus_code walbus_ctx_publish_after(walbus_ctx_t* ctx, const walbus_event_spec* spec, uint64_t delay_ms,
                                                   char* id, char** err);

// walbus_tx_cancel_scheduled in a handler: a conflict at commit reruns the
// handler, which then sees the event fired (walbus_ctx_get_scheduled).
WALBUS_EXPORT walbus_code walbus_ctx_cancel_scheduled(walbus_ctx_t* ctx, const char* id, char** err);

// walbus_tx_get_scheduled in a handler: read it before cancelling, so a
// fired event is recognised instead of failing the commit.
WALBUS_EXPORT walbus_code walbus_ctx_get_scheduled(walbus_ctx_t* ctx, const char* id, int* state, int64_t* at_unix_ms,
                                                   char** err);

// "<subscriber>/<event id>": the same on every redelivery of the event to
// this subscriber, for external systems that deduplicate. Valid during the
// handler call.
WALBUS_EXPORT const char* walbus_ctx_idempotency_key(const walbus_ctx_t* ctx);

// Which run of the handler at this event this is, as
// walbus::HandlerContext::Attempt(): 1 on the first, then 2, 3, ...; the
// count goes on across restarts (a run cut short by a crash counts).
WALBUS_EXPORT uint32_t walbus_ctx_attempt(const walbus_ctx_t* ctx);

// Non-zero when the handler runs for a replay (walbus::OperatorActions::StartReplay); then
// *replay_id (when not NULL) is its id and *fresh_scope (when not NULL)
// non-zero for a fresh-scope replay.
WALBUS_EXPORT int walbus_ctx_replay(const walbus_ctx_t* ctx, uint64_t* replay_id, int* fresh_scope);

// The delay before the next attempt when the handler returns WALBUS_RETRY;
// without it (or with 0) the subscriber's backoff decides.
WALBUS_EXPORT void walbus_ctx_retry_after(walbus_ctx_t* ctx, uint64_t delay_ms);

// The reason recorded with the dead letter when the handler returns
// WALBUS_REJECT. Copied.
WALBUS_EXPORT void walbus_ctx_reject_reason(walbus_ctx_t* ctx, const char* reason);

// ---- Views (walbus_view_t) ----

// Reads a key of a view, as walbus_tx_get() does in a transaction.
WALBUS_EXPORT walbus_code walbus_view_get(const walbus_view_t* view, const char* column_family, const char* key,
                                          size_t key_len, char** value, size_t* value_len, char** err);

// A value and its version in a view, as walbus_tx_get_with_version().
WALBUS_EXPORT walbus_code walbus_view_get_with_version(const walbus_view_t* view, const char* column_family,
                                                       const char* key, size_t key_len, char** value, size_t* value_len,
                                                       uint64_t* version, char** err);

// Visits the rows of a view, as walbus_tx_scan() does.
WALBUS_EXPORT walbus_code walbus_view_scan(const walbus_view_t* view, const char* column_family,
                                           const walbus_scan_options* options, walbus_row_fn row, void* user,
                                           char** resume_after, size_t* resume_after_len, char** err);

// ---- Freeing what walbus_ calls return ----

// Frees an error message set by a walbus_ call. NULL is allowed.
WALBUS_EXPORT void walbus_free_error(char* err);

// Frees a value or a resume key returned by a walbus_ call (walbus_tx_get,
// walbus_view_scan, ...). NULL is allowed.
WALBUS_EXPORT void walbus_free(void* p);

// Frees what walbus_event_status() or walbus_pending() returned. NULL is allowed.
WALBUS_EXPORT void walbus_free_deliveries(walbus_delivery* deliveries);

// Frees what walbus_stats() returned. NULL is allowed.
WALBUS_EXPORT void walbus_free_stats(walbus_bus_stats* stats);

// Frees a view. NULL is allowed.
WALBUS_EXPORT void walbus_free_view(walbus_view_t* view);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // WALBUS_C_H_
