// walbus/stats.h: what a bus reports of itself (Bus::Stats) and where an
// event stands for a subscriber (Bus::WaitHandled, EventStatus, Pending).
#ifndef WALBUS_STATS_H_
#define WALBUS_STATS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "walbus/event.h"

namespace walbus {

// Progress of one subscriber, as held by this process.
struct SubscriberStats {
  std::string name;         // SubscriberOptions::name.
  uint64_t checkpoint = 0;  // Every event at or below it is handled or skipped.
  uint64_t handled = 0;     // Events whose effects committed (durable count).
  uint64_t duplicates = 0;  // Redeliveries the inbox recognised and skipped.
  uint64_t retries = 0;     // Handler attempts that asked to retry or threw.
  uint64_t waits = 0;       // Handler runs that answered Outcome::Wait (not failures).
  // Outcomes whose commit met a concurrent update (ExpectVersion) and ran
  // again, in this process: optimistic concurrency at work, not a failure.
  uint64_t conflicts = 0;
  uint64_t dead_lettered = 0;  // Events sent to the dead-letter store.
  uint64_t stale_skipped = 0;  // Events skipped by skip_stale.
  // Events of Options::drop_oldest_types deleted for the disk budget
  // before it took them (durable count): it never sees them.
  uint64_t dropped = 0;
  uint64_t in_flight = 0;  // Events fetched into memory, not yet completed.
  bool paused = false;     // Waiting for an upcaster (UnknownVersionPolicy::kPause).
  std::string paused_on;   // While paused: the type no upcaster brings to one it takes.
  uint64_t pauses = 0;     // Times it paused, in this process.
};

// Counters of a bus, as held by this process (Bus::Stats).
struct BusStats {
  uint64_t last_seq = 0;       // Sequence number of the newest committed event.
  uint64_t commits = 0;        // Successful commits in this process.
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
  uint64_t quarantined = 0;          // Inputs refused into quarantine, ever.
  uint64_t quarantine_evicted = 0;   // Oldest quarantine entries dropped for the bounds.
  uint64_t scheduled_pending = 0;    // Scheduled events waiting for their time (docs/time.md).
  uint64_t scheduled_fired = 0;      // Scheduled events that entered the outbox, ever.
  uint64_t scheduled_cancelled = 0;  // Scheduled events cancelled before they fired, ever.
  // Events of Options::drop_oldest_types deleted for the disk budget,
  // ever (by type: walbus_disk_budget_dropped_total and `walbus stats`).
  uint64_t dropped = 0;
  std::vector<SubscriberStats> subscribers;  // One per active subscriber.
};

// Where one event stands for one subscriber.
enum class Delivery : uint8_t {
  kPending,       // not completed yet, and no run of it has failed
  kHandled,       // the handler's effects committed (or a stale skip)
  kDeadLettered,  // given up on; in the dead-letter store
  kPaused,        // waiting: the subscriber is paused on an unknown version
  kNotDelivered,  // completed without the handler: its type is not taken
  kRetrying,      // a run failed; it runs again (attempts, next_attempt)
  kParked,        // held behind a dead letter of its subject (kParkKey)
};

// Where one event stands for one subscriber (Bus::WaitHandled,
// Bus::EventStatus, Bus::Pending).
struct DeliveryState {
  std::string subscriber;               // The subscriber's name.
  EventId id;                           // The event.
  uint64_t seq = 0;                     // Its sequence number; 0 when not known.
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

}  // namespace walbus

#endif  // WALBUS_STATS_H_
