// WriteSet: what one unit of work writes, as the committer takes it: the
// operations, the version preconditions, the events with their encoded
// envelopes, and an estimate of the batch's size. It knows nothing of who
// made it: a Transaction, a handler's context (both through ScopeRep), or
// the dispatcher's and the quarantine's own records.
//
// Threading: none; one thread builds a set, then hands it to the committer
// and does not touch it until the commit returns.
#ifndef WALBUS_BUS_CORE_WRITE_SET_H_
#define WALBUS_BUS_CORE_WRITE_SET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "storage/db.h"
#include "walbus/event.h"

namespace walbus::internal {

struct Op {
  enum class Kind : uint8_t { kPut, kDelete, kAddCounter, kDeleteRange };
  Kind kind;
  storage::CfHandle* cf;
  std::string key;     // kDeleteRange: the first key removed
  std::string value;   // kPut; kDeleteRange: the first key kept
  uint64_t delta = 0;  // kAddCounter only
};

// "The key's version must be `version`; commit sets it to next_version
// (version + 1 when 0)."
struct Expectation {
  std::string version_key;  // storage::VersionKey(cf id, key), or a TimerStateKey
  uint64_t version;
  std::string description;  // "orders/order-42", for the Conflict message
  uint64_t next_version = 0;
  // A scheduled event's state (storage::TimerStateKey): the Conflict says
  // what became of the event instead of quoting versions.
  bool timer_state = false;
  uint64_t Next() const { return next_version != 0 ? next_version : version + 1; }
};

// What a commit does to one scheduled event, for the scheduler to learn
// (CommitListener::OnTimersChanged).
struct TimerChange {
  enum class Kind : uint8_t { kScheduled, kFired, kCancelled };
  Kind kind;
  uint64_t due_ms;  // timeline ms
};

struct WriteSet {
  std::vector<Op> ops;
  std::vector<Expectation> expects;
  // Events in publish order; seq is set by the committer.
  std::vector<std::shared_ptr<Event>> events;
  std::vector<std::string> envelopes;  // parallel to events
  // Scheduled events this set schedules, fires or cancels (their writes
  // are among `ops` and `expects`).
  std::vector<TimerChange> timers;
  size_t bytes = 0;  // approximate size of the batch this set adds

  void AddOp(Op op) {
    bytes += op.key.size() + op.value.size() + 16;
    ops.push_back(std::move(op));
  }
  // The common ops by name.
  // @{
  void Put(storage::CfHandle* cf, std::string key, std::string value) {
    AddOp(Op{Op::Kind::kPut, cf, std::move(key), std::move(value)});
  }
  void Delete(storage::CfHandle* cf, std::string key) { AddOp(Op{Op::Kind::kDelete, cf, std::move(key), {}}); }
  // Every key in [from, to).
  void DeleteRange(storage::CfHandle* cf, std::string from, std::string to) {
    AddOp(Op{Op::Kind::kDeleteRange, cf, std::move(from), std::move(to)});
  }
  // Adds `delta` to the counter at `key` (wrapping: ~0 takes one away).
  void AddCounter(storage::CfHandle* cf, std::string key, uint64_t delta) {
    AddOp(Op{Op::Kind::kAddCounter, cf, std::move(key), {}, delta});
  }
  // @}
  bool empty() const { return ops.empty() && expects.empty() && events.empty(); }
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_WRITE_SET_H_
