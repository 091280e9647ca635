// The workload shared by walbus-stress and walbus-crash: producers commit
// "state change + event" transactions on subjects guarded by optimistic
// versions, so every subject's events carry versions 1, 2, 3, ... in commit
// order; subscribers record, per subject, the last version they applied and
// count one effect per (subject, version). That makes every guarantee
// checkable from the database alone, whatever crashed in between:
//
//   exactly_once       each (subscriber, subject, version) effect counts 1
//   per_subject_order  no handler saw a version out of sequence
//   all_delivered      each subscriber applied each subject's last version
//   no half commits    a version exists in state iff its event was handled
#ifndef WALBUS_TOOLS_WORKLOAD_H_
#define WALBUS_TOOLS_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/bus.h"

namespace walbus::workload {

inline constexpr std::string_view kEventType = "stress.item-recorded.v1";
// Events that fail on purpose: data "poison" always throws; "transient"
// throws on its first two attempts. Their effect counts under
// "<sub>/fault/<event id>".
inline constexpr std::string_view kFaultType = "stress.fault-injected.v1";
inline constexpr std::string_view kStateCf = "state";
inline constexpr std::string_view kEffectsCf = "effects";
inline constexpr std::string_view kOrderCf = "order";

std::string SubscriberName(size_t i);
std::string SubjectName(size_t k);

// Options for the workload's database in `dir`.
Options BusOptions(const std::string& dir, Durability durability, size_t workers);

// Applies one event for the running subscriber (see the top of the file).
Outcome HandleItem(const Event& e, HandlerContext& ctx);

// Registers subscribers "sub-0".."sub-<count-1>", each running `handler`
// on both event types.
Status SubscribeAll(Bus& bus, size_t count, const Handler& handler, const RetryPolicy& retry);

// Publishes one kFaultType event ("poison" or "transient") on `subject`.
Status CommitFault(Bus& bus, const std::string& subject, std::string_view kind, Receipt* receipt);
// The effect count of a fault event for a subscriber, read through `tx`.
Result<uint64_t> FaultEffects(Transaction& tx, const std::string& subscriber, const EventId& id);
// The longest commit-to-handler delay of a kEventType event seen by
// HandleItem in this process, in milliseconds.
int64_t MaxItemLatencyMs();
// The bytes of keys and values (and of events' subjects and data) that
// CommitItem and HandleItem committed in this process: the logical bytes a
// device's writes are measured against.
uint64_t LogicalBytesCommitted();

// One attempt to advance `subject`: read its version v, assert it, write the
// state, publish version v + 1. Conflict when another producer got there
// first. On success *version is the new version and *receipt the commit's.
Status CommitItem(Bus& bus, const std::string& subject, const std::string& payload, uint64_t* version,
                  Receipt* receipt);

struct CheckResult {
  bool exactly_once = true;
  bool per_subject_order = true;
  bool all_delivered = true;
  std::vector<std::string> failures;  // one line each, for the operator
  bool passed() const { return exactly_once && per_subject_order && all_delivered; }
};

// Checks every subject's versions for every subscriber: the final versions
// read through `state` (the producers' bus), the effects and order records
// through `effects` (the bus whose handlers ran; the same one unless events
// crossed a bridge). Neither is committed. Non-OK only when a read fails.
Status CheckSubjects(Transaction& state, Transaction& effects, size_t subscribers, size_t subjects,
                     CheckResult* result);

// Entries left in the outbox of the closed database in `dir`.
Status CountOutbox(const std::string& dir, size_t* entries);

}  // namespace walbus::workload

#endif  // WALBUS_TOOLS_WORKLOAD_H_
