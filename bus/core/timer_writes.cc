#include "bus/core/timer_writes.h"

#include <algorithm>
#include <cassert>

#include "storage/keys.h"
#include "storage/records.h"

namespace walbus::internal {
namespace {

using storage::CheckpointField;
using storage::TimerState;

// The pending count is merged like every counter; -1 is its two's
// complement, which the unsigned addition wraps back to one less.
constexpr uint64_t kMinusOne = ~uint64_t{0};

void AddCount(WriteSet* writes, storage::Db* db, CheckpointField field, uint64_t delta) {
  writes->AddOp(
      Op{Op::Kind::kAddCounter, db->cf(storage::Cf::kCheckpoints), storage::CheckpointKey(0, field), {}, delta});
}

void ExpectState(WriteSet* writes, const EventId& id, uint64_t from, uint64_t to) {
  writes->expects.push_back(Expectation{storage::TimerStateKey(id), from, DescribeTimer(id), to, true});
  writes->bytes += 48;
}

}  // namespace

std::string DescribeTimer(const EventId& id) { return "scheduled event " + id.ToString(); }

Status TimerStateConflict(const std::string& description, uint64_t found) {
  storage::TimerState state{};
  uint64_t ms = 0;
  if (found == 0 || !storage::ParseTimerStateValue(found, &state, &ms)) {
    return Status::Conflict(description + " is not scheduled");
  }
  switch (state) {
    case storage::TimerState::kPending: return Status::Conflict(description + " is scheduled already");
    case storage::TimerState::kFired: return Status::Conflict(description + " fired already: it is in the outbox");
    case storage::TimerState::kCancelled: return Status::Conflict(description + " was cancelled already");
  }
  return Status::Conflict(description + " is not scheduled");
}

void AddSchedule(WriteSet* writes, storage::Db* db, const Event& event, std::string envelope, uint64_t due_ms,
                 uint64_t now_ms, uint64_t wall_ms) {
  storage::TimerRecord record{now_ms, wall_ms, std::move(envelope)};
  writes->AddOp(Op{Op::Kind::kPut, db->cf(storage::Cf::kTimers), storage::TimerKey(due_ms, event.id),
                   storage::EncodeTimer(record)});
  ExpectState(writes, event.id, 0, storage::TimerStateValue(TimerState::kPending, due_ms));
  AddCount(writes, db, CheckpointField::kScheduledPending, 1);
  writes->timers.push_back(TimerChange{TimerChange::Kind::kScheduled, due_ms});
}

void AddFire(WriteSet* writes, storage::Db* db, std::shared_ptr<Event> event, std::string envelope, uint64_t due_ms,
             uint64_t now_ms) {
  assert(event->seq == 0);
  writes->AddOp(Op{Op::Kind::kDelete, db->cf(storage::Cf::kTimers), storage::TimerKey(due_ms, event->id), {}});
  ExpectState(writes, event->id, storage::TimerStateValue(TimerState::kPending, due_ms),
              storage::TimerStateValue(TimerState::kFired, now_ms));
  AddCount(writes, db, CheckpointField::kScheduledPending, kMinusOne);
  AddCount(writes, db, CheckpointField::kScheduledFired, 1);
  writes->timers.push_back(TimerChange{TimerChange::Kind::kFired, due_ms});
  writes->bytes += envelope.size() + 16;
  writes->envelopes.push_back(std::move(envelope));
  writes->events.push_back(std::move(event));
}

void AddCancel(WriteSet* writes, storage::Db* db, const EventId& id, uint64_t pending, uint64_t now_ms) {
  TimerState state{};
  uint64_t due_ms = 0;
  const bool parsed = storage::ParseTimerStateValue(pending, &state, &due_ms);
  assert(parsed && state == TimerState::kPending);
  (void)parsed;
  writes->AddOp(Op{Op::Kind::kDelete, db->cf(storage::Cf::kTimers), storage::TimerKey(due_ms, id), {}});
  ExpectState(writes, id, pending, storage::TimerStateValue(TimerState::kCancelled, now_ms));
  AddCount(writes, db, CheckpointField::kScheduledPending, kMinusOne);
  AddCount(writes, db, CheckpointField::kScheduledCancelled, 1);
  writes->timers.push_back(TimerChange{TimerChange::Kind::kCancelled, due_ms});
}

bool DropOwnSchedule(WriteSet* writes, storage::Db* db, const EventId& id) {
  const std::string state_key = storage::TimerStateKey(id);
  auto expect = std::find_if(writes->expects.begin(), writes->expects.end(), [&](const Expectation& e) {
    return e.timer_state && e.version == 0 && e.version_key == state_key;
  });
  if (expect == writes->expects.end()) return false;
  TimerState state{};
  uint64_t due_ms = 0;
  if (!storage::ParseTimerStateValue(expect->next_version, &state, &due_ms)) return false;
  writes->expects.erase(expect);
  const std::string timer_key = storage::TimerKey(due_ms, id);
  std::erase_if(writes->ops,
                [&](const Op& op) { return op.cf == db->cf(storage::Cf::kTimers) && op.key == timer_key; });
  auto change = std::find_if(writes->timers.begin(), writes->timers.end(), [&](const TimerChange& t) {
    return t.kind == TimerChange::Kind::kScheduled && t.due_ms == due_ms;
  });
  if (change != writes->timers.end()) writes->timers.erase(change);
  AddCount(writes, db, CheckpointField::kScheduledPending, kMinusOne);
  return true;
}

}  // namespace walbus::internal
