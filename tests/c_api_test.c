// The C API from C: open, subscribe, start, commit 100 events, wait until
// idle, then check that the handler ran once per event, that every effect
// it wrote is there, and the counters; then the error path; then close.
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
#include <unistd.h>

#include "walbus/c.h"
#include "walbus/version.h"

enum { kEvents = 100 };

static int failures = 0;

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                    \
    }                                                                \
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
  atomic_fetch_add(&seen->calls, 1);
  return WALBUS_DONE;
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

  Must(walbus_close(bus, &err), err, "walbus_close");
  if (made[0] != '\0') nftw(made, RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  if (failures > 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("c_api_test: %d events handled once each, effects and counters as expected\n", kEvents);
  return 0;
}
