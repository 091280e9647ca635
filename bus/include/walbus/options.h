// Options: fixed when a Bus is opened.
//
// Every field says its default and what it costs. Threading: a plain value,
// copied by Bus::Open; changing it afterwards has no effect.
#ifndef WALBUS_OPTIONS_H_
#define WALBUS_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "walbus/clock.h"
#include "walbus/logger.h"

namespace walbus {

// What a commit survives once Commit() returned (Options::durability).
enum class Durability : uint8_t {
  // A commit that returned survives power loss: the write-ahead log is
  // fsynced before Commit() returns. Concurrent committers share one fsync
  // (group commit), so throughput grows with the number of producers.
  kSync,
  // A commit that returned survives a crash of the process (kill -9). On
  // power loss or a kernel crash it survives once the write-ahead log was
  // fsynced after it, which happens at most Options::buffered_sync_interval
  // after it returned: a power cut loses at most the commits of the last
  // interval (plus the time of one fsync). Atomicity holds either way: a
  // commit is all there or not there at all.
  kBuffered,
};

// Options::memory_budget's default.
inline constexpr size_t kDefaultMemoryBudget = size_t{256} << 20;
// Options::memory_budget's smallest value.
inline constexpr size_t kMinMemoryBudget = size_t{8} << 20;
// Options::disk_budget's smallest value, when set.
inline constexpr uint64_t kMinDiskBudget = uint64_t{1} << 20;

// How a Bus is opened: its directory, column families, durability, and the
// bounds on its threads, memory and disk use.
struct Options {
  // Directory of the database; created when missing and create_if_missing.
  std::string dir;

  // Create the directory and an empty database when none exists.
  // Default: true.
  bool create_if_missing = true;
  // Who may read the database. Open creates a missing directory 0700
  // (owner only: the outbox, the dead letters and the quarantine hold
  // every payload), or 0750 with share_with_group, for an operator's
  // group as PostgreSQL allows; every file written there is 0600 (0640).
  // Open warns when an existing directory lets other users in.
  bool share_with_group = false;

  // Default kSync. See Durability.
  Durability durability = Durability::kSync;

  // kBuffered only: the longest a commit stays unsynced. A background
  // thread fsyncs the write-ahead log this long after the first unsynced
  // commit since its last fsync (one fsync per interval at most, none on
  // an idle bus), and Close() syncs what is left. Shorter loses less on a
  // power cut; longer wears flash less. 1 ms..24 h; default 1 s.
  std::chrono::milliseconds buffered_sync_interval{1000};

  // Application column families the bus opens or creates. Transactions,
  // views and handlers read and write these and no others: a family an
  // earlier run listed and this one leaves out stays on disk untouched
  // (`walbus stats` names it) and is refused as an unknown one until it is
  // listed again. Names must be non-empty, must not start with "walbus.",
  // must not be "default", and are listed once each.
  std::vector<std::string> column_families;

  // The CloudEvents `source` stamped on events that do not set their own,
  // e.g. "urn:device:17" or "device-17/orders": a URI-reference (RFC
  // 3986, ASCII; Open refuses anything else with InvalidArgument).
  // Default "walbus".
  std::string source = "walbus";

  // Threads that run handlers, shared by all subscribers. Default 2.
  // REQUIRES: 1 <= worker_threads <= 256.
  size_t worker_threads = 2;

  // Bytes of memory for everything that grows with load, shared out as
  // docs/devices.md ("Choosing a memory budget") shows: RocksDB's block
  // cache and memtables (half), the tail cache (a quarter), each
  // subscriber's in-flight window and the commit group bounds. The fields
  // below bound further when set lower than their share. Resident memory
  // is about the budget plus 10-20 MiB of code, stacks and allocator.
  // Default 256 MiB (docs/devices.md says what it costs and buys).
  // REQUIRES: memory_budget >= 8 MiB.
  size_t memory_budget = kDefaultMemoryBudget;

  // Events per subscriber held in memory between fetch and completion. A
  // larger backlog stays on disk and is read in order when room frees up
  // (catch-up). Bounds memory per subscriber. Default 8192.
  // REQUIRES: 16 <= max_in_flight_per_subscriber <= 1 << 22.
  size_t max_in_flight_per_subscriber = 8192;

  // Recently committed events kept in memory so that subscribers that keep
  // up never read the outbox back from disk. An event leaves it once every
  // subscriber has fetched it. When subscribers fall further behind, the
  // oldest entries are overwritten (overflow policy: overwrite oldest; the
  // events are on disk). Default 65536.
  // REQUIRES: 16 <= tail_cache_events <= 1 << 24.
  size_t tail_cache_events = 65536;
  // The same cache's bound in bytes of events (payload and attributes), so
  // that large payloads cannot make it big: past it the oldest go first.
  // Default 64 MiB. REQUIRES: >= 64 KiB.
  size_t tail_cache_bytes = 64u << 20;

  // Refuse, at Publish and Ingest, an event whose type has no registered
  // schema (EventContracts::RegisterSchema), so that every payload is checked against
  // a contract. Default false: such a type's payloads are checked only by
  // its verifier, if any (EventContracts::RegisterVerifier).
  bool require_schemas = false;

  // Largest accepted event payload (`data`); larger publishes are refused
  // with InvalidArgument. Default 1 MiB. REQUIRES: <= 64 MiB.
  size_t max_payload_bytes = 1 << 20;

  // Group commit bounds: one write carries at most this many transactions
  // and about this many bytes. Default 1024 and 8 MiB.
  // @{
  size_t max_group_commits = 1024;
  size_t max_group_bytes = 8 << 20;
  // @}

  // The outbox below every subscriber's checkpoint is trimmed (one write
  // of the trim point; storage drops what is below it) once it has grown
  // by this many events, or after trim_interval. Coarse on purpose: each
  // trim is a write. But handled events still in a memtable when it is flushed are written
  // to a table file, only to be deleted there later, so the interval is
  // short (docs/devices.md measures it). Retention by age (retain_for) is judged
  // at these trims too, and while nothing newer is handled, the bus sleeps
  // until its oldest kept event is old enough to go.
  // Default 10000 events, 250 ms.
  // @{
  uint64_t trim_every_events = 10000;
  std::chrono::milliseconds trim_interval{250};
  // @}

  // Retention: handled events (below every subscriber's checkpoint) kept
  // in the outbox for OperatorActions::StartReplay. A kept event stays while it is within
  // every limit set: the newest retain_events of them, younger than
  // retain_for (by event time), and the newest ones that fit in
  // retain_bytes (judged by the mean size of a sample of them). Zero sets no limit
  // of that kind; all three zero (the default) keeps nothing: an event is
  // removed as soon as every subscriber passed it. Removal is by range
  // deletion at trim time, never point by point.
  // @{
  uint64_t retain_events = 0;
  std::chrono::milliseconds retain_for{0};
  uint64_t retain_bytes = 0;
  // @}

  // Inbox records (which events a subscriber handled) at or below its
  // checkpoint and older than this are dropped by storage compactions.
  // An event is only ever delivered again above the checkpoint (after a
  // crash) or by an operator (a kSameInbox replay or `walbus inbox check`
  // look further back), so the window must exceed the longest time an
  // event can take to come back: keep it well above the longest outage
  // and any replay you may run. Zero (the default): records are kept
  // forever, one small key per event and subscriber.
  std::chrono::milliseconds inbox_window{0};

  // Listen on the Unix-domain socket `<dir>/admin.sock` (mode 0600) for
  // operator commands from the `walbus` tool while this process holds the
  // database: dead-letter redrive, skip and purge, and replays. Requests
  // are checked as untrusted input. Default off.
  bool admin_socket = false;

  // Bounds of the quarantine (refused input kept for inspection): when a
  // new entry would pass either, the oldest entries are dropped (counted
  // in BusStats::quarantine_evicted). Default 10000 entries, 64 MiB.
  // @{
  size_t quarantine_max_entries = 10000;
  size_t quarantine_max_bytes = 64 << 20;
  // @}

  // Bytes of disk walbus's own records may take: the outbox from its trim
  // point on (events waiting for a subscriber, and those retain_for
  // keeps; counted, so a trim frees its share at once), the dead
  // letters, the quarantine and scheduled events (as storage holds them):
  // docs/devices.md, "A disk budget". Not the
  // application's column families. A commit or ingest that adds events
  // or schedules one while the budget is reached fails with
  // ResourceExhausted and writes nothing; the application decides (wait,
  // drop, tell the user). What the bus does itself (handlers' follow-up
  // events, scheduled events firing, dead letters) is never refused, so
  // use may pass the budget by that and by a 64th of it. Zero (the
  // default): no budget. REQUIRES: 0, or at least 1 MiB.
  uint64_t disk_budget = 0;

  // Event types that give way when disk_budget is reached (drop oldest,
  // for telemetry): an entry names a type ("sensor.reading.v2") or every
  // version of one ("sensor.reading"). A commit the budget would refuse
  // first deletes the oldest events of these types that no subscriber
  // holds in memory (none has fetched it and not finished it, so no
  // handler has started it), a 64th of the budget at a time, and fails
  // only when that does not make room. Events of the other types (reject,
  // the default) are never dropped; their commits make room this way too.
  // Every dropped event is counted by type (BusStats::dropped) and for
  // each subscriber that had not taken it (SubscriberStats::dropped),
  // logged, and shown by the metrics and `walbus stats`; subscribers pass
  // over the gap. Empty (the default): every type rejects. REQUIRES:
  // disk_budget set when not empty; each entry a valid type name.
  std::vector<std::string> drop_oldest_types;

  // Where the bus logs (walbus/logger.h); null means standard error from
  // level info (NewStandardErrorLogger()), never the application's
  // standard output. walbus/adapters/spdlog.h adapts an spdlog logger.
  std::shared_ptr<Logger> logger;

  // Log subjects (which may be personal data) as a stable hash. Default off.
  bool hash_subjects_in_logs = false;

  // Serve GET /metrics (Prometheus text, as Bus::MetricsText) over HTTP on
  // this address, for scrapers: "127.0.0.1:9464", or ":9464" for loopback.
  // One thread of the bus answers, one request at a time. Empty (the
  // default): no endpoint. Open fails when the address is malformed or
  // taken. Anything but loopback exposes the metrics to the network.
  std::string metrics_http;

  // Where time comes from; null means Clock::System(). Tests inject a
  // clock they move by hand to run backoff and ages in milliseconds.
  std::shared_ptr<const Clock> clock;

  // How often subscriber checkpoints are written when they moved.
  // A larger value writes less and redelivers more after a crash (the inbox
  // skips the redelivered events). Default 20 ms.
  std::chrono::milliseconds checkpoint_interval{20};
};

}  // namespace walbus

#endif  // WALBUS_OPTIONS_H_
