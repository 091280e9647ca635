// The writes that move a scheduled event through its states, each one
// unit for the committer: scheduled (record, state pending, counted),
// fired (record gone, state fired, the event in the outbox) or cancelled
// (record gone, state cancelled). Every move expects the state before it,
// so the committer orders a cancel and a firing of one event and exactly
// one of them happens. docs/time.md.
#ifndef WALBUS_BUS_CORE_TIMER_WRITES_H_
#define WALBUS_BUS_CORE_TIMER_WRITES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "bus/core/write_set.h"
#include "storage/db.h"
#include "walbus/event.h"

namespace walbus::internal {

// "scheduled event <id>", as conflicts name it.
std::string DescribeTimer(const EventId& id);

// The Conflict of a scheduled event (`description`: DescribeTimer) whose
// state was `found` (a storage::TimerStateValue, or 0) where the unit
// expected it pending: what became of it.
Status TimerStateConflict(const std::string& description, uint64_t found);

// Schedules `event` (encoded as `envelope`) to fall due at `due_ms`.
// now_ms, wall_ms: the timeline and the wall clock now. `schedule_key`
// (or empty) goes with the record, for the firing to release it; making
// the key name the event is the caller's (bus/core/scope_timers.cc).
void AddSchedule(WriteSet* writes, storage::Db* db, const Event& event, std::string envelope, uint64_t due_ms,
                 uint64_t now_ms, uint64_t wall_ms, std::string schedule_key);
// Moves the pending event into the outbox and releases the key it was
// scheduled under (`schedule_key`, or empty). REQUIRES: event->seq == 0.
void AddFire(WriteSet* writes, storage::Db* db, std::shared_ptr<Event> event, std::string envelope, uint64_t due_ms,
             uint64_t now_ms, const std::string& schedule_key);
// Cancels the pending event whose state value is `pending` (a
// TimerStateValue of kPending).
void AddCancel(WriteSet* writes, storage::Db* db, const EventId& id, uint64_t pending, uint64_t now_ms);
// Drops a schedule `writes` made itself; false when it made none of `id`.
bool DropOwnSchedule(WriteSet* writes, storage::Db* db, const EventId& id);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_TIMER_WRITES_H_
