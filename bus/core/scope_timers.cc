// WriteScope's calls on scheduled events: cancel and read by id, and the
// schedule keys (EventSpec::schedule_key) that name one pending event each.
// The writes that move an event through its states are in timer_writes.cc;
// docs/time.md explains both.
#include <algorithm>
#include <cstring>

#include "bus/core/scope.h"
#include "bus/core/timer_writes.h"
#include "storage/keys.h"

namespace walbus {
namespace {

using internal::ScopeCall;
using internal::ScopeRep;

std::string DescribeScheduleKey(std::string_view key) { return "schedule key " + std::string(key); }

// The committed state value of event `id` as the unit's snapshot holds it
// (with the unit's own writes laid over when `own`), or nullopt.
Result<std::optional<uint64_t>> StoredState(ScopeRep* rep, const EventId& id, const internal::WriteSet* own) {
  storage::Db* db = rep->host->db();
  auto stored = rep->reader.Get(db, db->cf(storage::Cf::kVersions), storage::TimerStateKey(id), own);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return std::optional<uint64_t>();
  if ((*stored)->size() != 8) return Status::Corruption("state record of " + internal::DescribeTimer(id));
  return std::optional<uint64_t>(storage::GetBe64(**stored));
}

bool IsPending(uint64_t value) {
  storage::TimerState state{};
  uint64_t ms = 0;
  return storage::ParseTimerStateValue(value, &state, &ms) && state == storage::TimerState::kPending;
}

// Whether this unit moves `id`'s state already (it cancelled it).
bool CancelledHere(const ScopeRep* rep, const EventId& id) {
  const std::string state_key = storage::TimerStateKey(id);
  return std::any_of(rep->writes.expects.begin(), rep->writes.expects.end(),
                     [&](const internal::Expectation& e) { return e.version_key == state_key; });
}

// The event the key names as the unit's snapshot holds it, if it is still
// pending there (an id left by a cancel by id is stale). *version: the
// key's version.
Result<std::optional<EventId>> PendingUnderKey(ScopeRep* rep, std::string_view key, uint64_t* version) {
  storage::Db* db = rep->host->db();
  storage::CfHandle* versions = db->cf(storage::Cf::kVersions);
  auto stored_version = rep->reader.Get(db, versions, storage::ScheduleKeyVersionKey(key), nullptr);
  if (!stored_version.ok()) return stored_version.status();
  *version = 0;
  if (stored_version->has_value()) {
    if ((*stored_version)->size() != 8) return Status::Corruption("version of " + DescribeScheduleKey(key));
    *version = storage::GetBe64(**stored_version);
  }
  auto named = rep->reader.Get(db, versions, storage::ScheduleKeyIdKey(key), nullptr);
  if (!named.ok()) return named.status();
  if (!named->has_value()) return std::optional<EventId>();
  EventId id;
  if ((*named)->size() != id.bytes.size()) return Status::Corruption("event id of " + DescribeScheduleKey(key));
  std::memcpy(id.bytes.data(), (*named)->data(), id.bytes.size());
  auto state = StoredState(rep, id, nullptr);
  if (!state.ok()) return state.status();
  if (!state->has_value() || !IsPending(**state)) return std::optional<EventId>();
  return std::optional<EventId>(id);
}

// The unit's first call under `key`: asserts the key's version (so the
// committer orders this unit against every other schedule and cancel
// under it) and cancels the event pending under it.
Status ClaimKey(ScopeRep* rep, std::string_view key) {
  uint64_t version = 0;
  auto pending = PendingUnderKey(rep, key, &version);
  if (!pending.ok()) return pending.status();
  rep->writes.expects.push_back(
      internal::Expectation{storage::ScheduleKeyVersionKey(key), version, DescribeScheduleKey(key)});
  rep->writes.bytes += key.size() + 16;
  if (pending->has_value() && !CancelledHere(rep, **pending)) {
    auto state = StoredState(rep, **pending, nullptr);
    if (!state.ok()) return state.status();
    internal::AddCancel(&rep->writes, rep->host->db(), **pending, **state, rep->host->timeline().NowMs());
  }
  return Status::OK();
}

// The unit's entry for `key`, claimed on first use. REQUIRES: an admitted
// call; `key` checked.
Result<std::optional<EventId>*> KeyEntry(ScopeRep* rep, std::string_view key) {
  auto it = rep->schedule_keys.find(key);
  if (it == rep->schedule_keys.end()) {
    if (Status s = ClaimKey(rep, key); !s.ok()) return s;
    it = rep->schedule_keys.emplace(std::string(key), std::nullopt).first;
  }
  return &it->second;
}

Status CheckScheduleKey(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("a schedule key is empty");
  if (key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument("a schedule key is longer than " + std::to_string(kMaxKeyBytes) + " bytes");
  }
  return Status::OK();
}

// Readies `key` for a schedule or a cancel under it: claimed on first use,
// and the event this unit scheduled under it before dropped. Fails the
// unit on an error. REQUIRES: an admitted call.
Result<std::optional<EventId>*> TakeKey(ScopeRep* rep, std::string_view key) {
  Status checked = CheckScheduleKey(key);
  auto entry = checked.ok() ? KeyEntry(rep, key) : Result<std::optional<EventId>*>(checked);
  if (!entry.ok()) {
    rep->Fail(entry.status());
    return entry;
  }
  if (**entry) internal::DropOwnSchedule(&rep->writes, rep->host->db(), ***entry);
  return entry;
}

}  // namespace

namespace internal {

Status ScheduleUnderKey(ScopeRep* rep, std::string_view key, const EventId& event) {
  auto entry = TakeKey(rep, key);
  if (!entry.ok()) return entry.status();
  storage::Db* db = rep->host->db();
  rep->writes.Put(db->cf(storage::Cf::kVersions), storage::ScheduleKeyIdKey(key), std::string(storage::IdBytes(event)));
  **entry = event;
  return Status::OK();
}

}  // namespace internal

Status WriteScope::CancelScheduled(const EventId& id) {
  ScopeRep* rep = rep_.get();
  ScopeCall call(rep);
  if (Status s = CheckWritable(rep, call); !s.ok()) return s;
  storage::Db* db = rep->host->db();
  if (internal::DropOwnSchedule(&rep->writes, db, id)) {
    for (auto& [key, own] : rep->schedule_keys) {
      if (own == id) own.reset();  // the key's record is stale now: read as none
    }
    return Status::OK();
  }
  if (CancelledHere(rep, id)) return Status::OK();
  auto stored = StoredState(rep, id, nullptr);
  Status s = stored.status();
  if (s.ok() && !stored->has_value()) s = Status::NotFound("no event " + id.ToString() + " was scheduled");
  if (!s.ok()) {
    rep->Fail(s);
    return s;
  }
  const uint64_t value = **stored;
  if (!IsPending(value)) {
    // It fired or was cancelled as of the snapshot, and states only move
    // forward: the commit could only refuse it.
    s = internal::TimerStateConflict(internal::DescribeTimer(id), value);
    rep->Fail(s);
    return s;
  }
  internal::AddCancel(&rep->writes, db, id, value, rep->host->timeline().NowMs());
  return Status::OK();
}

Result<ScheduledStatus> WriteScope::GetScheduled(const EventId& id) {
  ScopeRep* rep = rep_.get();
  ScopeCall call(rep);
  if (!call.admitted()) return internal::ClosedStatus();
  internal::Timeline& timeline = rep->host->timeline();
  const std::string state_key = storage::TimerStateKey(id);
  std::optional<uint64_t> value;
  for (const internal::Expectation& e : rep->writes.expects) {
    if (e.version_key == state_key) value = e.Next();  // this unit's own cancel
  }
  if (!value) {
    // This unit's own schedule (a put of the state) laid over the snapshot.
    auto stored = StoredState(rep, id, &rep->writes);
    if (!stored.ok()) return stored.status();
    if (!stored->has_value()) return ScheduledStatus{};
    value = **stored;
  }
  storage::TimerState state{};
  uint64_t ms = 0;
  if (!storage::ParseTimerStateValue(*value, &state, &ms)) {
    return Status::Corruption("state record of " + internal::DescribeTimer(id));
  }
  constexpr ScheduledStatus::State kStates[] = {ScheduledStatus::State::kUnknown, ScheduledStatus::State::kPending,
                                                ScheduledStatus::State::kFired, ScheduledStatus::State::kCancelled};
  return ScheduledStatus{kStates[static_cast<uint8_t>(state)], timeline.ToWall(ms)};
}

Status WriteScope::CancelScheduledByKey(std::string_view key) {
  ScopeRep* rep = rep_.get();
  ScopeCall call(rep);
  if (Status s = CheckWritable(rep, call); !s.ok()) return s;
  auto entry = TakeKey(rep, key);
  if (!entry.ok()) return entry.status();
  storage::Db* db = rep->host->db();
  rep->writes.Delete(db->cf(storage::Cf::kVersions), storage::ScheduleKeyIdKey(key));
  (*entry)->reset();
  return Status::OK();
}

Result<std::optional<EventId>> WriteScope::ScheduledByKey(std::string_view key) {
  ScopeRep* rep = rep_.get();
  ScopeCall call(rep);
  if (!call.admitted()) return internal::ClosedStatus();
  if (Status s = CheckScheduleKey(key); !s.ok()) return s;
  if (auto own = rep->schedule_keys.find(key); own != rep->schedule_keys.end()) return own->second;
  uint64_t version = 0;
  return PendingUnderKey(rep, key, &version);
}

}  // namespace walbus
