// The C API from C: open, subscribe, start, commit 100 events, wait until
// idle, then check that the handler ran once per event, that every effect
// it wrote is there, and the counters; then the error path; then what an
// application needs beyond that (Operations, Writing, Reading, Scheduling,
// Handlers: every function of walbus/c.h is called); then close.
//
//   c_api_test [DIR]   (default: a fresh directory under $TMPDIR or /tmp,
//                      removed at the end)
//
// Exit status 0 when every check holds.
#define _XOPEN_SOURCE 700

#include <ftw.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "walbus/c.h"
#include "walbus/version.h"

enum { kEvents = 100 };

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

// Stops the test on a failed call, printing walbus's message.
static void Must(int code, char* err, const char* what) {
  if (code == WALBUS_OK) return;
  fprintf(stderr, "%s failed (%d): %s\n", what, code, err != NULL ? err : "(no message)");
  walbus_free_error(err);
  exit(1);
}

struct Seen {
  atomic_int calls;
};

// Writes "effect:<data>" under the event's subject, with the event.
static int Handle(void* user, const walbus_event* event, walbus_ctx_t* ctx) {
  struct Seen* seen = user;
  char value[64];
  int n = snprintf(value, sizeof(value), "effect:%.*s", (int)event->data_len, event->data);
  char* err = NULL;
  if (walbus_ctx_put(ctx, "effects", event->subject, strlen(event->subject), value, (size_t)n, &err) != WALBUS_OK) {
    walbus_free_error(err);
    walbus_ctx_retry_after(ctx, 10);
    return WALBUS_RETRY;
  }
  if (strncmp(walbus_ctx_idempotency_key(ctx), "c-handler/", 10) != 0) return WALBUS_REJECT;
  if (walbus_ctx_attempt(ctx) != 1) return WALBUS_REJECT;  // the first run of each event
  atomic_fetch_add(&seen->calls, 1);
  return WALBUS_DONE;
}

// A ledger kept with versions: each order's handler checks and advances
// the ledger's version, deletes a "pending" marker and publishes a
// follow-up with every attribute; "bad" orders are rejected, and under
// WALBUS_POISON_PARK_KEY hold their subject; "slow" ones retry later.
static int Ledger(void* user, const walbus_event* event, walbus_ctx_t* ctx) {
  (void)user;
  char* err = NULL;
  if (event->data_len == 3 && memcmp(event->data, "bad", 3) == 0) {
    walbus_ctx_reject_reason(ctx, "amount is negative");
    return WALBUS_REJECT;
  }
  if (event->data_len == 4 && memcmp(event->data, "slow", 4) == 0) {
    walbus_ctx_retry_after(ctx, 3600 * 1000);
    return WALBUS_RETRY;
  }
  uint64_t version = 0;
  int code = walbus_ctx_get_version(ctx, "orders", "ledger", 6, &version, &err);
  if (code == WALBUS_OK) code = walbus_ctx_expect_version(ctx, "orders", "ledger", 6, version, &err);
  if (code == WALBUS_OK) code = walbus_ctx_delete(ctx, "orders", event->subject, strlen(event->subject), &err);
  walbus_event_spec spec;
  walbus_event_spec_init(&spec);
  spec.type = "ledger.entry-booked.v1";
  spec.subject = event->subject;
  spec.content_type = "text/plain";
  spec.data = "booked";
  spec.data_len = 6;
  char id[37] = "";
  if (code == WALBUS_OK) code = walbus_ctx_publish_spec(ctx, &spec, id, &err);
  walbus_free_error(err);
  return code == WALBUS_OK && strlen(id) == 36 ? WALBUS_DONE : WALBUS_RETRY;
}

static const walbus_delivery* StateOf(const walbus_delivery* d, size_t n, const char* subscriber) {
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(d[i].subscriber, subscriber) == 0) return &d[i];
  }
  return NULL;
}

// Publishes one event with every attribute; returns its seq, fills id.
static uint64_t PublishOrder(walbus_t* bus, const char* subject, const char* data, char* id) {
  char* err = NULL;
  walbus_tx_t* tx = walbus_begin(bus);
  walbus_event_spec spec;
  walbus_event_spec_init(&spec);
  spec.type = "ledger.order-taken.v1";
  spec.subject = subject;
  spec.subject_version = 1;
  spec.data = data;
  spec.data_len = strlen(data);
  spec.content_type = "text/plain; charset=utf-8";
  spec.source = "urn:till:7";
  spec.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  Must(walbus_tx_put(tx, "orders", subject, strlen(subject), "pending", 7, &err), err, "walbus_tx_put");
  Must(walbus_tx_publish_spec(tx, &spec, id, &err), err, "walbus_tx_publish_spec");
  uint64_t seq = 0;
  Must(walbus_tx_commit(tx, &seq, &err), err, "walbus_tx_commit");
  return seq;
}

// What an application needs beyond the basics: deletes, versions and
// preconditions, every event attribute, retry and poison policies, and
// where each event stands (status, pending, waiting for one).
// Collects "key=value;" rows of a scan into a buffer.
struct Rows {
  char text[512];
  size_t len;
  int stop_after;  // stop after this many rows; 0: never
  int seen;
};

static int CollectRow(void* user, const char* key, size_t key_len, const char* value, size_t value_len) {
  struct Rows* rows = (struct Rows*)user;
  if (rows->len + key_len + value_len + 3 > sizeof(rows->text)) return 1;
  int n = snprintf(rows->text + rows->len, sizeof(rows->text) - rows->len, "%.*s=%.*s;", (int)key_len, key,
                   (int)value_len, value);
  if (n > 0) rows->len += (size_t)n;
  ++rows->seen;
  return rows->stop_after != 0 && rows->seen >= rows->stop_after;
}

static void ScanInto(walbus_tx_t* tx, const walbus_view_t* view, const walbus_scan_options* options, struct Rows* rows,
                     char** resume, size_t* resume_len) {
  char* err = NULL;
  rows->len = 0;
  rows->seen = 0;
  rows->text[0] = '\0';
  int code = tx != NULL ? walbus_tx_scan(tx, "orders", options, CollectRow, rows, resume, resume_len, &err)
                        : walbus_view_scan(view, "orders", options, CollectRow, rows, resume, resume_len, &err);
  Must(code, err, "scan");
}

// Scans with paging, own writes and range deletions, values with versions
// and a snapshot view, as the C++ API has them.
static void Reading(walbus_t* bus) {
  char* err = NULL;
  walbus_tx_t* tx = walbus_begin(bus);
  Must(walbus_tx_clear(tx, "orders", &err), err, "walbus_tx_clear");  // what the earlier checks wrote
  const char* keys[] = {"item-1", "item-2", "item-3", "item-4", "other"};
  for (int i = 0; i < 5; ++i) {
    Must(walbus_tx_put(tx, "orders", keys[i], strlen(keys[i]), "v", 1, &err), err, "walbus_tx_put");
  }
  Must(walbus_tx_commit(tx, NULL, &err), err, "walbus_tx_commit");
  walbus_view_t* before = walbus_read(bus);
  CHECK(before != NULL);

  tx = walbus_begin(bus);
  Must(walbus_tx_delete_range(tx, "orders", "item-2", 6, "item-4", 6, &err), err, "walbus_tx_delete_range");
  Must(walbus_tx_put(tx, "orders", "item-5", 6, "new", 3, &err), err, "walbus_tx_put");
  struct Rows rows = {{0}, 0, 0, 0};
  walbus_scan_options options;
  walbus_scan_options_init(&options);
  options.prefix = "item-";
  options.prefix_len = 5;
  options.limit = 2;
  char* resume = NULL;
  size_t resume_len = 0;
  ScanInto(tx, NULL, &options, &rows, &resume, &resume_len);
  CHECK(strcmp(rows.text, "item-1=v;item-4=v;") == 0);
  CHECK(resume != NULL && resume_len == 6 && memcmp(resume, "item-4", 6) == 0);
  options.resume_after = resume;
  options.resume_after_len = resume_len;
  ScanInto(tx, NULL, &options, &rows, &resume, &resume_len);
  CHECK(strcmp(rows.text, "item-5=new;") == 0);
  walbus_free((void*)options.resume_after);
  CHECK(resume == NULL);
  options.resume_after = NULL;
  options.resume_after_len = 0;
  options.reverse = 1;
  options.limit = 0;
  rows.stop_after = 1;
  ScanInto(tx, NULL, &options, &rows, NULL, NULL);
  CHECK(strcmp(rows.text, "item-5=new;") == 0);
  rows.stop_after = 0;
  CHECK(walbus_tx_delete_range(tx, "orders", "b", 1, "a", 1, &err) == WALBUS_INVALID_ARGUMENT);
  walbus_free_error(err);
  err = NULL;
  walbus_tx_abort(tx);

  tx = walbus_begin(bus);
  Must(walbus_tx_clear(tx, "orders", &err), err, "walbus_tx_clear");
  Must(walbus_tx_put(tx, "orders", "counter", 7, "1", 1, &err), err, "walbus_tx_put");
  Must(walbus_tx_expect_version(tx, "orders", "counter", 7, 0, &err), err, "walbus_tx_expect_version");
  Must(walbus_tx_commit(tx, NULL, &err), err, "walbus_tx_commit");

  // The old view still sees the five rows; a new one the counter only.
  walbus_scan_options_init(&options);
  ScanInto(NULL, before, &options, &rows, NULL, NULL);
  CHECK(strcmp(rows.text, "item-1=v;item-2=v;item-3=v;item-4=v;other=v;") == 0);
  walbus_view_t* after = walbus_read(bus);
  ScanInto(NULL, after, &options, &rows, NULL, NULL);
  CHECK(strcmp(rows.text, "counter=1;") == 0);
  char* value = NULL;
  size_t len = 0;
  uint64_t version = 0;
  Must(walbus_view_get_with_version(after, "orders", "counter", 7, &value, &len, &version, &err), err,
       "walbus_view_get_with_version");
  CHECK(value != NULL && len == 1 && value[0] == '1' && version == 1);
  walbus_free(value);
  Must(walbus_view_get(before, "orders", "counter", 7, &value, &len, &err), err, "walbus_view_get");
  CHECK(value == NULL);
  walbus_free_view(before);
  walbus_free_view(after);
}

static void Operations(walbus_t* bus) {
  char* err = NULL;
  walbus_subscriber_options sub;
  walbus_subscriber_options_init(&sub);
  CHECK(sub.max_attempts >= 1 && sub.retry_cap_ms > 0 && sub.on_poison == WALBUS_POISON_DEAD_LETTER);
  const char* types[] = {"ledger.order-taken.v1"};
  sub.name = "ledger";
  sub.types = types;
  sub.ntypes = 1;
  sub.handler = Ledger;
  sub.max_attempts = 3;
  sub.on_poison = WALBUS_POISON_PARK_KEY;
  sub.handler_version = "ledger-1";
  Must(walbus_subscribe_with(bus, &sub, &err), err, "walbus_subscribe_with");
  sub.on_poison = 7; /* not a walbus_poison_policy */
  sub.name = "other";
  CHECK(walbus_subscribe_with(bus, &sub, &err) == WALBUS_INVALID_ARGUMENT);
  walbus_free_error(err);
  err = NULL;

  char good[37], slow[37], bad[37], held[37];
  const uint64_t good_seq = PublishOrder(bus, "till-1", "ok", good);
  PublishOrder(bus, "till-2", "slow", slow);
  const uint64_t bad_seq = PublishOrder(bus, "till-3", "bad", bad);
  PublishOrder(bus, "till-3", "ok", held);
  Must(walbus_wait_event(bus, good_seq, good, 10000, &err), err, "walbus_wait_event");
  CHECK(walbus_wait_caught_up(bus, 50, &err) == WALBUS_TIMED_OUT);  // the slow one waits an hour
  walbus_free_error(err);
  err = NULL;

  // The handler's effects: the marker deleted, the version advanced.
  walbus_tx_t* read = walbus_begin(bus);
  char* value = (char*)"x";
  Must(walbus_tx_get(read, "orders", "till-1", 6, &value, NULL, &err), err, "walbus_tx_get");
  CHECK(value == NULL);
  uint64_t version = 0;
  Must(walbus_tx_get_version(read, "orders", "ledger", 6, &version, &err), err, "walbus_tx_get_version");
  CHECK(version == 1);
  walbus_tx_abort(read);
  // A stale precondition writes nothing.
  walbus_tx_t* stale = walbus_begin(bus);
  Must(walbus_tx_expect_version(stale, "orders", "ledger", 6, 0, &err), err, "walbus_tx_expect_version");
  Must(walbus_tx_put(stale, "orders", "ledger-note", 11, "x", 1, &err), err, "walbus_tx_put");
  CHECK(walbus_tx_commit(stale, NULL, &err) == WALBUS_CONFLICT);
  walbus_free_error(err);
  err = NULL;

  // Where each stands, once the slow one has failed once and the bad one
  // holds its subject.
  walbus_delivery* d = NULL;
  size_t n = 0;
  for (int i = 0; i < 1000; ++i) {
    Must(walbus_pending(bus, "ledger", 0, &d, &n, &err), err, "walbus_pending");
    const int settled = n == 2 && d[0].state == WALBUS_DELIVERY_RETRYING && d[1].state == WALBUS_DELIVERY_PARKED;
    walbus_free_deliveries(d);
    if (settled) break;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  Must(walbus_event_status(bus, slow, &d, &n, &err), err, "walbus_event_status");
  const walbus_delivery* s = StateOf(d, n, "ledger");
  CHECK(s != NULL && s->state == WALBUS_DELIVERY_RETRYING && s->attempts == 1 && s->next_attempt_unix_ms > 0);
  walbus_free_deliveries(d);
  Must(walbus_event_status(bus, bad, &d, &n, &err), err, "walbus_event_status");
  s = StateOf(d, n, "ledger");
  CHECK(s != NULL && s->state == WALBUS_DELIVERY_DEAD_LETTERED && s->seq == bad_seq &&
        strstr(s->last_error, "amount is negative") != NULL);
  walbus_free_deliveries(d);
  Must(walbus_pending(bus, "ledger", 0, &d, &n, &err), err, "walbus_pending");
  CHECK(n == 2);
  if (n == 2) {
    CHECK(strcmp(d[0].id, slow) == 0 && d[0].state == WALBUS_DELIVERY_RETRYING);
    CHECK(strcmp(d[1].id, held) == 0 && d[1].state == WALBUS_DELIVERY_PARKED && d[1].parked_behind == bad_seq);
  }
  walbus_free_deliveries(d);
  CHECK(walbus_pending(bus, "nobody", 0, &d, &n, &err) == WALBUS_INVALID_ARGUMENT);
  walbus_free_error(err);
  err = NULL;
  CHECK(walbus_wait_event(bus, 1, "not-an-id", 10, &err) == WALBUS_INVALID_ARGUMENT);
  walbus_free_error(err);
}

// Scheduled events: "reminders.due.v1" events count by their data when
// they fire; a "reminders.cancel.v1" event's handler cancels the scheduled
// event its data names, reading where it stands first.
struct Reminders {
  atomic_int now;
  atomic_int soon;
  atomic_int later;
  atomic_int cancelled_pending;  // the handler saw it pending, then cancelled it
};

static int Remind(void* user, const walbus_event* event, walbus_ctx_t* ctx) {
  struct Reminders* r = user;
  if (strcmp(event->type, "reminders.cancel.v1") == 0) {
    char id[37];
    snprintf(id, sizeof(id), "%.*s", (int)event->data_len, event->data);
    int state = -1;
    char* err = NULL;
    int code = walbus_ctx_get_scheduled(ctx, id, &state, NULL, &err);
    if (code == WALBUS_OK && state == WALBUS_SCHEDULED_PENDING) code = walbus_ctx_cancel_scheduled(ctx, id, &err);
    walbus_free_error(err);
    if (code != WALBUS_OK) return WALBUS_RETRY;
    if (state == WALBUS_SCHEDULED_PENDING) atomic_fetch_add(&r->cancelled_pending, 1);
    return WALBUS_DONE;
  }
  if (event->data_len == 3 && memcmp(event->data, "now", 3) == 0) atomic_fetch_add(&r->now, 1);
  if (event->data_len == 4 && memcmp(event->data, "soon", 4) == 0) atomic_fetch_add(&r->soon, 1);
  if (event->data_len == 5 && memcmp(event->data, "later", 5) == 0) atomic_fetch_add(&r->later, 1);
  return WALBUS_DONE;
}

static int64_t NowUnixMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int ScheduledState(walbus_t* bus, const char* id, int64_t* at) {
  char* err = NULL;
  int state = -1;
  walbus_tx_t* tx = walbus_begin(bus);
  Must(walbus_tx_get_scheduled(tx, id, &state, at, &err), err, "walbus_tx_get_scheduled");
  walbus_tx_abort(tx);
  return state;
}

static void ExpectInvalid(int code, char** err) {
  CHECK(code == WALBUS_INVALID_ARGUMENT && *err != NULL && strstr(*err, "InvalidArgument") != NULL);
  walbus_free_error(*err);
  *err = NULL;
}

static void WaitUntilAtLeast(atomic_int* counter, int n) {
  for (int i = 0; i < 1000 && atomic_load(counter) < n; ++i) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
}

static void WaitUntilPositive(atomic_int* counter) { WaitUntilAtLeast(counter, 1); }

static void Scheduling(walbus_t* bus) {
  static struct Reminders r;
  atomic_init(&r.now, 0);
  atomic_init(&r.soon, 0);
  atomic_init(&r.later, 0);
  atomic_init(&r.cancelled_pending, 0);
  char* err = NULL;
  const char* types[] = {"reminders.due.v1", "reminders.cancel.v1"};
  Must(walbus_subscribe(bus, "reminders", types, 2, Remind, &r, &err), err, "walbus_subscribe");

  walbus_event_spec spec;
  walbus_event_spec_init(&spec);
  spec.type = "reminders.due.v1";
  spec.subject = "desk-1";
  char now_id[37] = "", later_id[37] = "", soon_id[37] = "";
  walbus_tx_t* tx = walbus_begin(bus);
  spec.data = "now";
  spec.data_len = 3;
  Must(walbus_tx_publish_at(tx, &spec, 1000, now_id, &err), err, "walbus_tx_publish_at");  // long past
  spec.data = "later";
  spec.data_len = 5;
  Must(walbus_tx_publish_after(tx, &spec, 3600 * 1000, later_id, &err), err, "walbus_tx_publish_after");
  CHECK(ScheduledState(bus, later_id, NULL) == WALBUS_SCHEDULED_UNKNOWN);  // not committed yet
  uint64_t seq = 7;
  Must(walbus_tx_commit(tx, &seq, &err), err, "walbus_tx_commit");
  CHECK(seq == 0);  // neither entered the outbox at commit
  int64_t due = 0;
  CHECK(ScheduledState(bus, later_id, &due) == WALBUS_SCHEDULED_PENDING);
  CHECK(due > NowUnixMs() + 3500 * 1000 && due <= NowUnixMs() + 3600 * 1000 + 1000);
  WaitUntilPositive(&r.now);
  CHECK(atomic_load(&r.now) == 1);
  CHECK(ScheduledState(bus, now_id, NULL) == WALBUS_SCHEDULED_FIRED);

  // Elapsed time: 30 ms from now.
  tx = walbus_begin(bus);
  spec.data = "soon";
  spec.data_len = 4;
  Must(walbus_tx_publish_after(tx, &spec, 30, soon_id, &err), err, "walbus_tx_publish_after");
  Must(walbus_tx_commit(tx, NULL, &err), err, "walbus_tx_commit");
  WaitUntilPositive(&r.soon);
  CHECK(atomic_load(&r.soon) == 1);

  // A handler cancels the hour-long one. Its counter moves before its
  // commit lands (and a slow subscriber elsewhere keeps the bus from being
  // caught up): wait for the cancellation itself.
  tx = walbus_begin(bus);
  Must(walbus_tx_publish(tx, "reminders.cancel.v1", "desk-1", later_id, 36, &err), err, "walbus_tx_publish");
  Must(walbus_tx_commit(tx, NULL, &err), err, "walbus_tx_commit");
  for (int i = 0; i < 1000 && ScheduledState(bus, later_id, NULL) != WALBUS_SCHEDULED_CANCELLED; ++i) {
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  CHECK(atomic_load(&r.cancelled_pending) == 1);
  CHECK(ScheduledState(bus, later_id, &due) == WALBUS_SCHEDULED_CANCELLED);
  CHECK(due > 0 && due <= NowUnixMs());

  // Cancelling what fired: the commit says so and writes nothing.
  tx = walbus_begin(bus);
  Must(walbus_tx_put(tx, "orders", "note", 4, "x", 1, &err), err, "walbus_tx_put");
  CHECK(walbus_tx_cancel_scheduled(tx, now_id, &err) == WALBUS_CONFLICT);
  CHECK(err != NULL && strstr(err, "fired already") != NULL);
  walbus_free_error(err);
  err = NULL;
  CHECK(walbus_tx_commit(tx, NULL, &err) == WALBUS_CONFLICT);
  walbus_free_error(err);
  err = NULL;
  walbus_tx_t* read = walbus_begin(bus);
  char* value = (char*)"x";
  Must(walbus_tx_get(read, "orders", "note", 4, &value, NULL, &err), err, "walbus_tx_get");
  CHECK(value == NULL);
  walbus_tx_abort(read);

  walbus_bus_stats* stats = NULL;
  Must(walbus_stats(bus, &stats, &err), err, "walbus_stats");
  CHECK(stats->scheduled_pending == 0 && stats->scheduled_fired == 2 && stats->scheduled_cancelled == 1);
  walbus_free_stats(stats);
  CHECK(atomic_load(&r.later) == 0);

  // Bad input is refused before anything is buffered.
  tx = walbus_begin(bus);
  ExpectInvalid(walbus_tx_publish_at(tx, &spec, INT64_MAX, NULL, &err), &err);
  ExpectInvalid(walbus_tx_publish_after(tx, &spec, UINT64_MAX, NULL, &err), &err);
  ExpectInvalid(walbus_tx_publish_at(tx, NULL, 0, NULL, &err), &err);
  ExpectInvalid(walbus_tx_cancel_scheduled(tx, "not-an-id", &err), &err);
  ExpectInvalid(walbus_tx_cancel_scheduled(tx, NULL, &err), &err);
  ExpectInvalid(walbus_tx_get_scheduled(tx, now_id, NULL, NULL, &err), &err);
  ExpectInvalid(walbus_ctx_cancel_scheduled(NULL, now_id, &err), &err);
  Must(walbus_tx_commit(tx, &seq, &err), err, "walbus_tx_commit");
  CHECK(seq == 0);
}

// Writes beyond put: a delete asserted with its version keeps the version
// counting, a value and its version come from one snapshot, and a commit can ask for an fsync of
// its own on this kBuffered bus.
static void Writing(walbus_t* bus) {
  char* err = NULL;
  walbus_tx_t* tx = walbus_begin(bus);
  Must(walbus_tx_put(tx, "orders", "kept", 4, "v1", 2, &err), err, "walbus_tx_put");
  Must(walbus_tx_expect_version(tx, "orders", "kept", 4, 0, &err), err, "walbus_tx_expect_version");
  uint64_t seq = 7;
  Must(walbus_tx_commit_sync(tx, &seq, &err), err, "walbus_tx_commit_sync");
  CHECK(seq == 0);  // no event
  tx = walbus_begin(bus);
  char* value = NULL;
  size_t len = 0;
  uint64_t version = 0;
  Must(walbus_tx_get_with_version(tx, "orders", "kept", 4, &value, &len, &version, &err), err,
       "walbus_tx_get_with_version");
  CHECK(value != NULL && len == 2 && memcmp(value, "v1", 2) == 0 && version == 1);
  walbus_free(value);
  Must(walbus_tx_delete(tx, "orders", "kept", 4, &err), err, "walbus_tx_delete");
  Must(walbus_tx_expect_version(tx, "orders", "kept", 4, 1, &err), err, "walbus_tx_expect_version");
  Must(walbus_tx_get(tx, "orders", "kept", 4, &value, &len, &err), err, "walbus_tx_get");
  CHECK(value == NULL);  // its own delete
  Must(walbus_tx_commit(tx, NULL, &err), err, "walbus_tx_commit");
  tx = walbus_begin(bus);
  value = (char*)"x";
  Must(walbus_tx_get_with_version(tx, "orders", "kept", 4, &value, &len, &version, &err), err,
       "walbus_tx_get_with_version");
  CHECK(value == NULL && version == 2);
  walbus_tx_abort(tx);
  CHECK(walbus_tx_commit_sync(NULL, NULL, &err) == WALBUS_INVALID_ARGUMENT);
  walbus_free_error(err);
}

// A handler's reads, writes and follow-ups: a "fill" event writes three
// rows, reads its own writes back (get, scan), deletes a range of them and
// publishes three follow-ups (at once, at a past moment, 30 ms later); a
// "sweep" event, once fill's commit landed, reads a row with its version
// and clears the column family. Each result is kept for main to check.
struct Work {
  atomic_int filled;      // fill's reads saw what they should
  atomic_int swept;       // sweep's read saw fill's commit
  atomic_int replayed;    // a run that said it was a replay's
  atomic_int follow_ups;  // follow-ups handled
};

static int ReadsAndWrites(struct Work* w, walbus_ctx_t* ctx, const char* data, size_t data_len) {
  char* err = NULL;
  int code = WALBUS_OK;
  if (data_len == 4 && memcmp(data, "fill", 4) == 0) {
    code = walbus_ctx_put(ctx, "effects", "w-a", 3, "1", 1, &err);
    if (code == WALBUS_OK) code = walbus_ctx_expect_version(ctx, "effects", "w-a", 3, 0, &err);
    if (code == WALBUS_OK) code = walbus_ctx_put(ctx, "effects", "w-b", 3, "2", 1, &err);
    if (code == WALBUS_OK) code = walbus_ctx_put(ctx, "effects", "w-c", 3, "3", 1, &err);
    char* value = NULL;
    size_t len = 0;
    if (code == WALBUS_OK) code = walbus_ctx_get(ctx, "effects", "w-b", 3, &value, &len, &err);
    const int own_write = value != NULL && len == 1 && value[0] == '2';
    walbus_free(value);
    if (code == WALBUS_OK) code = walbus_ctx_delete_range(ctx, "effects", "w-b", 3, "w-c", 3, &err);
    struct Rows rows = {{0}, 0, 0, 0};
    walbus_scan_options options;
    walbus_scan_options_init(&options);
    options.prefix = "w-";
    options.prefix_len = 2;
    if (code == WALBUS_OK) code = walbus_ctx_scan(ctx, "effects", &options, CollectRow, &rows, NULL, NULL, &err);
    walbus_event_spec spec;
    walbus_event_spec_init(&spec);
    spec.type = "work.follow-up.v1";
    spec.subject = "w";
    if (code == WALBUS_OK) code = walbus_ctx_publish(ctx, "work.follow-up.v1", "w", "now", 3, &err);
    if (code == WALBUS_OK) code = walbus_ctx_publish_at(ctx, &spec, 1000, NULL, &err);
    if (code == WALBUS_OK) code = walbus_ctx_publish_after(ctx, &spec, 30, NULL, &err);
    if (code == WALBUS_OK && own_write && strcmp(rows.text, "w-a=1;w-c=3;") == 0) atomic_store(&w->filled, 1);
  } else {
    char* value = NULL;
    size_t len = 0;
    uint64_t version = 0;
    code = walbus_ctx_get_with_version(ctx, "effects", "w-a", 3, &value, &len, &version, &err);
    if (code == WALBUS_OK && value != NULL && len == 1 && value[0] == '1' && version == 1) atomic_store(&w->swept, 1);
    walbus_free(value);
    if (code == WALBUS_OK) code = walbus_ctx_clear(ctx, "effects", &err);
  }
  walbus_free_error(err);
  return code;
}

static int Worker(void* user, const walbus_event* event, walbus_ctx_t* ctx) {
  struct Work* w = user;
  uint64_t replay_id = 7;
  int fresh_scope = 7;
  if (walbus_ctx_replay(ctx, &replay_id, &fresh_scope) != 0 || replay_id != 7 || fresh_scope != 7) {
    atomic_store(&w->replayed, 1);
  }
  if (strcmp(event->type, "work.follow-up.v1") == 0) {
    atomic_fetch_add(&w->follow_ups, 1);
    return WALBUS_DONE;
  }
  return ReadsAndWrites(w, ctx, event->data, event->data_len) == WALBUS_OK ? WALBUS_DONE : WALBUS_RETRY;
}

static void Handlers(walbus_t* bus) {
  static struct Work w;
  atomic_init(&w.filled, 0);
  atomic_init(&w.swept, 0);
  atomic_init(&w.replayed, 0);
  atomic_init(&w.follow_ups, 0);
  char* err = NULL;
  const char* types[] = {"work.item.v1", "work.follow-up.v1"};
  Must(walbus_subscribe(bus, "c-worker", types, 2, Worker, &w, &err), err, "walbus_subscribe");
  walbus_tx_t* tx = walbus_begin(bus);
  Must(walbus_tx_publish(tx, "work.item.v1", "w", "fill", 4, &err), err, "walbus_tx_publish");
  Must(walbus_tx_commit(tx, NULL, &err), err, "walbus_tx_commit");
  WaitUntilPositive(&w.filled);
  CHECK(atomic_load(&w.filled) == 1);
  // The same subject: sweep runs after fill's commit landed.
  tx = walbus_begin(bus);
  Must(walbus_tx_publish(tx, "work.item.v1", "w", "sweep", 5, &err), err, "walbus_tx_publish");
  Must(walbus_tx_commit(tx, NULL, &err), err, "walbus_tx_commit");
  WaitUntilPositive(&w.swept);
  CHECK(atomic_load(&w.swept) == 1);
  WaitUntilAtLeast(&w.follow_ups, 3);
  CHECK(atomic_load(&w.follow_ups) == 3);
  CHECK(atomic_load(&w.replayed) == 0);
  // Sweep's clear committed with its handled record: nothing is left.
  int present = 1;
  for (int i = 0; i < 1000 && present; ++i) {
    walbus_tx_t* read = walbus_begin(bus);
    char* value = NULL;
    Must(walbus_tx_get(read, "effects", "w-a", 3, &value, NULL, &err), err, "walbus_tx_get");
    present = value != NULL;
    walbus_free(value);
    walbus_tx_abort(read);
    if (present) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  CHECK(!present);
  CHECK(walbus_ctx_replay(NULL, NULL, NULL) == 0);
  CHECK(walbus_ctx_attempt(NULL) == 0);
}

static int RemoveEntry(const char* path, const struct stat* sb, int flag, struct FTW* ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

int main(int argc, char** argv) {
  char made[4096] = "";
  const char* dir = argc > 1 ? argv[1] : NULL;
  if (dir == NULL) {
    const char* tmp = getenv("TMPDIR");
    snprintf(made, sizeof(made), "%s/walbus-c-api-XXXXXX", tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(made) == NULL) {
      perror("mkdtemp");
      return 1;
    }
    dir = made;
  }
  CHECK(strcmp(walbus_version(), WALBUS_VERSION_STRING) == 0);

  walbus_options opt;
  walbus_options_init(&opt);
  const char* cfs[] = {"effects", "orders"};
  opt.dir = dir;
  opt.column_families = cfs;
  opt.ncolumn_families = 2;
  opt.durability = WALBUS_DURABILITY_BUFFERED;
  walbus_t* bus = NULL;
  char* err = NULL;
  // A budget below the smallest is refused, and nothing is opened.
  opt.memory_budget = 1u << 20;
  CHECK(walbus_open(&opt, &bus, &err) == WALBUS_INVALID_ARGUMENT && bus == NULL);
  CHECK(err != NULL && strstr(err, "memory_budget") != NULL);
  walbus_free_error(err);
  err = NULL;
  // The rest runs within a small device's budget.
  opt.memory_budget = 16u << 20;
  Must(walbus_open(&opt, &bus, &err), err, "walbus_open");

  struct Seen seen;
  atomic_init(&seen.calls, 0);
  const char* types[] = {"orders.order-placed.v1"};
  Must(walbus_subscribe(bus, "c-handler", types, 1, Handle, &seen, &err), err, "walbus_subscribe");
  Must(walbus_start(bus, &err), err, "walbus_start");

  uint64_t first_seq = 0;
  for (int i = 0; i < kEvents; ++i) {
    char subject[32];
    char data[32];
    snprintf(subject, sizeof(subject), "order-%d", i);
    int n = snprintf(data, sizeof(data), "%d", i * 10);
    walbus_tx_t* tx = walbus_begin(bus);
    CHECK(tx != NULL);
    Must(walbus_tx_put(tx, "orders", subject, strlen(subject), data, (size_t)n, &err), err, "walbus_tx_put");
    Must(walbus_tx_publish(tx, "orders.order-placed.v1", subject, data, (size_t)n, &err), err, "walbus_tx_publish");
    uint64_t seq = 0;
    Must(walbus_tx_commit(tx, &seq, &err), err, "walbus_tx_commit");
    if (i == 0) first_seq = seq;
    CHECK(seq == first_seq + (uint64_t)i);
  }
  Must(walbus_wait_idle(bus, 60000, &err), err, "walbus_wait_idle");

  CHECK(atomic_load(&seen.calls) == kEvents);

  // Every effect is there, with the value the handler wrote.
  walbus_tx_t* read = walbus_begin(bus);
  for (int i = 0; i < kEvents; ++i) {
    char subject[32];
    char want[64];
    snprintf(subject, sizeof(subject), "order-%d", i);
    snprintf(want, sizeof(want), "effect:%d", i * 10);
    char* value = NULL;
    size_t len = 0;
    Must(walbus_tx_get(read, "effects", subject, strlen(subject), &value, &len, &err), err, "walbus_tx_get");
    CHECK(value != NULL && len == strlen(want) && memcmp(value, want, len) == 0);
    walbus_free(value);
  }
  char* absent = (char*)"untouched";
  Must(walbus_tx_get(read, "effects", "no-such-key", 11, &absent, NULL, &err), err, "walbus_tx_get");
  CHECK(absent == NULL);
  walbus_tx_abort(read);

  walbus_bus_stats* stats = NULL;
  Must(walbus_stats(bus, &stats, &err), err, "walbus_stats");
  CHECK(stats->last_seq == first_seq + kEvents - 1);
  CHECK(stats->nsubscribers == 1);
  if (stats->nsubscribers == 1) {
    CHECK(strcmp(stats->subscribers[0].name, "c-handler") == 0);
    CHECK(stats->subscribers[0].handled == kEvents);
  }
  walbus_free_stats(stats);

  // Errors come back as a code and a message the caller frees.
  walbus_tx_t* bad = walbus_begin(bus);
  CHECK(walbus_tx_put(bad, "no-such-cf", "k", 1, "v", 1, &err) == WALBUS_INVALID_ARGUMENT);
  CHECK(err != NULL && strstr(err, "InvalidArgument") != NULL);
  walbus_free_error(err);
  err = NULL;
  CHECK(walbus_tx_commit(bad, NULL, &err) == WALBUS_INVALID_ARGUMENT);
  walbus_free_error(err);
  err = NULL;
  CHECK(walbus_tx_publish(NULL, "a.b.v1", "s", NULL, 0, &err) == WALBUS_INVALID_ARGUMENT);
  walbus_free_error(err);
  err = NULL;

  Operations(bus);
  Writing(bus);
  Reading(bus);
  Scheduling(bus);
  Handlers(bus);
  Must(walbus_close(bus, &err), err, "walbus_close");
  if (made[0] != '\0') nftw(made, RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  if (failures > 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf(
      "c_api_test: %d events handled once each, effects and counters as expected; versions, deletes, "
      "policies, delivery states, scans, views, scheduled events and handlers' calls as in C++\n",
      kEvents);
  return 0;
}
