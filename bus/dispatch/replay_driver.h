// ReplayDriver: runs recorded replays (OperatorActions::StartReplay) through their
// subscribers on the dispatcher thread: selects the replay's events from
// the outbox a bounded window at a time, puts them in line out of order
// (OutOfLineEvents), counts their outcomes into the record, and records
// the end. The record and its selection rules are in replay.h.
//
// Threading: the dispatcher thread's alone.
#ifndef WALBUS_BUS_DISPATCH_REPLAY_DRIVER_H_
#define WALBUS_BUS_DISPATCH_REPLAY_DRIVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bus/core/committer.h"
#include "bus/dispatch/subscriber.h"
#include "bus/dispatch/work.h"
#include "bus/telemetry/log.h"
#include "storage/db.h"
#include "storage/records.h"
#include "walbus/clock.h"

namespace walbus::internal {

class ReplayDriver {
 public:
  using Subscribers = std::vector<std::shared_ptr<Subscriber>>;

  // REQUIRES: every pointer outlives the driver.
  ReplayDriver(storage::Db* db, Committer* committer, const Clock* clock, const BusLog* log, size_t max_payload_bytes);
  ReplayDriver(const ReplayDriver&) = delete;
  ReplayDriver& operator=(const ReplayDriver&) = delete;

  // Begins replay `replay_id` on the subscriber its record names, if it is
  // among `subs` (otherwise it resumes when that subscriber is added).
  // REQUIRES: record.state is kRunning.
  void Begin(const Subscribers& subs, uint64_t replay_id, storage::ReplayRecord record);
  // Cancels replay `replay_id`: nothing more is selected, what is queued
  // and not running is dropped; what runs finishes.
  void Cancel(const Subscribers& subs, uint64_t replay_id, std::string cancelled_by, std::string reason);
  // Counts a completed replayed event into its replay's record; false when
  // `event` is not one (a live event).
  static bool CountOutcome(Subscriber* sub, const Event& event, Message::Kind kind);

  struct Pumped {
    // Subjects that got replayed events waiting behind them: each goes to
    // the front of its queue once its front event is not running.
    std::vector<std::string> subjects;
    bool storage_failed = false;  // try again soon
  };
  // Selects the subscriber's replay's next events (within the window) and
  // ends the replay once all ran.
  Pumped Pump(Subscriber* sub);

 private:
  // Drops what the subscriber's replay queued and did not start.
  // REQUIRES: sub->replay.
  static void DropQueued(Subscriber* sub);
  // Records the end of the subscriber's replay, and forgets it once stored.
  void End(Subscriber* sub);

  storage::Db* const db_;
  Committer* const committer_;
  const Clock* const clock_;
  const BusLog* const log_;
  const size_t max_payload_bytes_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_REPLAY_DRIVER_H_
