#include "bus/dispatch/scheduler.h"

#include <algorithm>
#include <cassert>

#include "bus/core/envelope.h"
#include "bus/core/timer_writes.h"
#include "storage/keys.h"
#include "storage/records.h"

namespace walbus::internal {
namespace {

using Steady = std::chrono::steady_clock;

// Lowers `target` to `value` when below it.
void LowerTo(std::atomic<uint64_t>& target, uint64_t value) {
  uint64_t seen = target.load();
  while (value < seen && !target.compare_exchange_weak(seen, value)) {
  }
}

// The smallest key of the timers due at `due_ms`.
std::string FirstKeyAt(uint64_t due_ms) { return storage::TimerKey(due_ms, EventId{}); }

}  // namespace

Scheduler::Scheduler(storage::Db* db, Committer* committer, Timeline* timeline, Quarantine* quarantine,
                     const BusLog* log, size_t max_payload_bytes)
    : db_(db),
      committer_(committer),
      timeline_(timeline),
      quarantine_(quarantine),
      log_(log),
      max_payload_bytes_(max_payload_bytes),
      scan_from_(FirstKeyAt(0)) {
  assert(db_ != nullptr && committer_ != nullptr && timeline_ != nullptr && quarantine_ != nullptr);
  stored_rewind_ = timeline_->state().rewind_ms;
}

Status Scheduler::Load() {
  const storage::CheckpointField fields[] = {storage::CheckpointField::kScheduledPending,
                                             storage::CheckpointField::kScheduledFired,
                                             storage::CheckpointField::kScheduledCancelled};
  std::atomic<uint64_t>* targets[] = {&pending_, &fired_, &cancelled_};
  for (size_t i = 0; i < std::size(fields); ++i) {
    std::string value;
    bool found = false;
    const std::string key = storage::CheckpointKey(0, fields[i]);
    if (Status s = db_->Get(db_->cf(storage::Cf::kCheckpoints), key, &value, &found); !s.ok()) return s;
    uint64_t n = 0;
    if (found && !storage::DecodeCounter(value, &n)) return Status::Corruption("scheduled-event counter");
    targets[i]->store(n, std::memory_order_relaxed);
  }
  at_open_ = counts();
  return Status::OK();
}

bool Scheduler::OnTimersChanged(const std::vector<TimerChange>& changes) {
  uint64_t earliest = kNone;
  for (const TimerChange& c : changes) {
    switch (c.kind) {
      case TimerChange::Kind::kScheduled:
        pending_.fetch_add(1, std::memory_order_relaxed);
        earliest = std::min(earliest, c.due_ms);
        break;
      case TimerChange::Kind::kFired:
        pending_.fetch_sub(1, std::memory_order_relaxed);
        fired_.fetch_add(1, std::memory_order_relaxed);
        break;
      case TimerChange::Kind::kCancelled:
        pending_.fetch_sub(1, std::memory_order_relaxed);
        cancelled_.fetch_add(1, std::memory_order_relaxed);
        break;
    }
  }
  if (earliest == kNone) return false;
  LowerTo(earliest_added_, earliest);
  return earliest < awaited_.load();
}

std::optional<std::chrono::milliseconds> Scheduler::FireDue(const std::function<bool()>& delivery_keeps_up) {
  uint64_t added = earliest_added_.load();
  while (added != kNone) {
    // A timer may now lie below where seeks start (its time was past, or
    // earlier than any pending one): start there.
    if (FirstKeyAt(added) < scan_from_) {
      scan_from_ = FirstKeyAt(added);
      scan_from_due_.store(added, std::memory_order_relaxed);
    }
    LowerTo(next_due_, added);
    // Emptied only if nothing earlier came meanwhile (else: take that too).
    if (earliest_added_.compare_exchange_weak(added, kNone)) break;
  }
  const uint64_t now_ms = timeline_->NowMs();
  const auto steady = Steady::now();
  if (steady - timeline_stored_ >= kStoreTimelineEvery && pending_.load(std::memory_order_relaxed) > 0) {
    StoreTimeline();
  }
  std::optional<std::chrono::milliseconds> wait;
  if (next_due_.load() <= now_ms) {
    if (steady - last_batch_ < kMinBatchInterval && !delivery_keeps_up()) {
      wait = std::chrono::duration_cast<std::chrono::milliseconds>(kMinBatchInterval - (steady - last_batch_));
    } else {
      last_batch_ = steady;
      if (!FireBatch(now_ms)) wait = std::chrono::milliseconds(1000);  // storage failed: logged, try again
    }
  }
  const uint64_t next = next_due_.load(std::memory_order_relaxed);
  if (!wait && next != kNone) wait = std::chrono::milliseconds(next > now_ms ? next - now_ms : 0);
  // What the dispatcher sleeps towards, published before looking for
  // timers added meanwhile: a commit adding one either is seen here or
  // sees the moment and wakes the dispatcher (OnTimersChanged).
  awaited_.store(wait ? now_ms + static_cast<uint64_t>(wait->count()) : kNone);
  if (earliest_added_.load() != kNone) return std::chrono::milliseconds(0);
  return wait;
}

bool Scheduler::BuildFire(std::string_view key, std::string_view value, uint64_t now_ms, WriteSet* writes,
                          WriteSet* unreadable) {
  uint64_t due_ms = 0;
  EventId id;
  storage::TimerRecord record;
  auto event = std::make_shared<Event>();
  Status s = storage::ParseTimerKey(key, &due_ms, &id) ? Status::OK() : Status::Corruption("malformed timer key");
  if (s.ok() && !storage::DecodeTimer(value, &record)) s = Status::Corruption("malformed timer record");
  if (s.ok()) s = DecodeEnvelope(record.envelope, max_payload_bytes_, event.get());
  if (s.ok() && event->id != id) s = Status::Corruption("the timer's event has another id");
  if (s.ok()) {
    AddFire(writes, db_, std::move(event), std::move(record.envelope), due_ms, now_ms, record.schedule_key);
    return true;
  }
  // Never fired, never lost: the bytes go to the quarantine for an
  // operator, and the timer stops coming due.
  log_->logger().error("walbus: a scheduled event cannot be read ({}); it goes to the quarantine", s.ToString());
  if (Status q = quarantine_->Add(value, "walbus.timers", s.message()); !q.ok()) {
    log_->logger().error("walbus: quarantining it failed: {}", q.ToString());
    return false;
  }
  if (storage::ParseTimerKey(key, &due_ms, &id)) {
    AddCancel(unreadable, db_, id, storage::TimerStateValue(storage::TimerState::kPending, due_ms), now_ms);
  } else {
    unreadable->Delete(db_->cf(storage::Cf::kTimers), std::string(key));
  }
  return false;
}

bool Scheduler::FireBatch(uint64_t now_ms) {
  std::vector<WriteSet> writes;
  writes.reserve(kFireBatch);
  WriteSet unreadable;
  uint64_t next = kNone;
  std::string last_key;
  Status scanned = db_->ScanRange(db_->cf(storage::Cf::kTimers), nullptr, storage::KeyBounds{scan_from_, {}}, false,
                                  [&](std::string_view key, std::string_view value) {
                                    uint64_t due_ms = 0;
                                    EventId id;
                                    if (storage::ParseTimerKey(key, &due_ms, &id) && due_ms > now_ms) {
                                      next = due_ms;
                                      return false;
                                    }
                                    if (writes.size() == kFireBatch) {
                                      next = now_ms;  // more are due: the next pass takes them
                                      return false;
                                    }
                                    last_key.assign(key);
                                    writes.emplace_back();
                                    if (!BuildFire(key, value, now_ms, &writes.back(), &unreadable)) writes.pop_back();
                                    return true;
                                  });
  if (!scanned.ok()) {
    log_->logger().error("walbus: reading scheduled events failed: {}", scanned.ToString());
    return false;
  }
  std::vector<CommitRequest> requests(writes.size());
  std::vector<CommitRequest*> pointers;
  for (size_t i = 0; i < writes.size(); ++i) {
    requests[i].writes = &writes[i];
    pointers.push_back(&requests[i]);
  }
  CommitRequest unreadable_request;
  unreadable_request.writes = &unreadable;
  if (!unreadable.empty()) pointers.push_back(&unreadable_request);
  committer_->Commit(pointers);
  bool ok = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Status& s = requests[i].status;
    if (s.ok()) {
      lateness_.Observe(static_cast<double>(now_ms - writes[i].timers[0].due_ms) / 1000.0);
    } else if (!s.IsConflict()) {  // a Conflict: it was cancelled meanwhile
      log_->logger().warn("walbus: firing a scheduled event failed (it fires later): {}", s.ToString());
      ok = false;
    }
  }
  if (!ok) return false;
  if (!last_key.empty()) {
    scan_from_ = last_key;
    scan_from_due_.store(storage::GetBe64(last_key), std::memory_order_relaxed);
  }
  next_due_.store(next);
  return true;
}

void Scheduler::StoreTimeline() {
  timeline_stored_ = Steady::now();
  const Timeline::State state = timeline_->state();
  WriteSet writes;
  writes.Put(db_->cf(storage::Cf::kMeta), std::string(storage::kMetaTimeline), Timeline::Encode(state));
  // A changed rewind is what a restart must not lose: sync that one.
  const bool sync = state.rewind_ms != stored_rewind_;
  if (Status s = committer_->CommitOne(&writes, sync); !s.ok()) {
    log_->logger().warn("walbus: storing the timeline failed: {}", s.ToString());
    return;
  }
  stored_rewind_ = state.rewind_ms;
}

Scheduler::Counts Scheduler::counts() const {
  return Counts{pending_.load(std::memory_order_relaxed), fired_.load(std::memory_order_relaxed),
                cancelled_.load(std::memory_order_relaxed)};
}

std::optional<uint64_t> Scheduler::next_due_ms() const {
  if (pending_.load(std::memory_order_relaxed) == 0) return std::nullopt;
  // In this order: a timer FireDue took out of earliest_added_ is in
  // next_due_ by then.
  const uint64_t added = earliest_added_.load();
  const uint64_t known = next_due_.load();
  if (known == kUnknown) {
    // The dispatcher has not read storage yet since the open: the first
    // pending timer is the answer.
    std::optional<uint64_t> first;
    Status s =
        db_->ScanRange(db_->cf(storage::Cf::kTimers), nullptr, {}, false, [&](std::string_view key, std::string_view) {
          uint64_t due_ms = 0;
          EventId id;
          if (storage::ParseTimerKey(key, &due_ms, &id)) first = due_ms;
          return false;
        });
    return s.ok() ? first : std::nullopt;
  }
  const uint64_t next = std::min(known, added);
  if (next == kNone) return std::nullopt;
  return next;
}

uint64_t Scheduler::CountOverdue(uint64_t cap) const {
  const std::string lower = FirstKeyAt(scan_from_due_.load(std::memory_order_relaxed));
  const std::string upper = FirstKeyAt(timeline_->NowMs() + 1);
  if (upper <= lower) return 0;
  uint64_t n = 0;
  Status s = db_->ScanRange(db_->cf(storage::Cf::kTimers), nullptr, storage::KeyBounds{lower, upper}, false,
                            [&](std::string_view, std::string_view) { return ++n < cap; });
  return s.ok() ? n : 0;
}

}  // namespace walbus::internal
