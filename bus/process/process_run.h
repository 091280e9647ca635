// One step of a process instance: the event, the instance record as the
// step leaves it, and the timeouts it set or cancelled. Made by the
// process's handler (process.cc) for each event; the ProcessContext the
// application's handler gets is a view of it.
//
// Threading: one handler call, on its worker thread.
#ifndef WALBUS_BUS_PROCESS_PROCESS_RUN_H_
#define WALBUS_BUS_PROCESS_PROCESS_RUN_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/scope.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "walbus/process.h"

namespace walbus::internal {

// What a definition fixes for every step (process.cc checks it).
struct ProcessShape {
  std::string name;
  uint32_t version = 1;
  std::string timeout_type;  // "walbus.process-timeout.<name>.v1"
  std::string abandon_type;  // "walbus.process-abandon.<name>.v1"
  std::string state_type;
};

// A record's unix ms as the public types' wall time.
inline std::chrono::system_clock::time_point WallTime(uint64_t unix_ms) {
  return FromUnixMillis(static_cast<int64_t>(unix_ms));
}

// The type of the events that deliver `process`'s timeouts.
std::string ProcessTimeoutType(std::string_view process);
// The type of the events that carry an operator's abandonment of one of
// `process`'s instances (OperatorActions::AbandonProcess): subject the instance
// key, data the action's id.
std::string ProcessAbandonType(std::string_view process);
// The id of process `name`'s subscriber, or nullopt when it never ran.
Result<std::optional<uint32_t>> ProcessSubscriberId(storage::Db* db, std::string_view name);
// A timeout event's payload: its name and the data it was set with.
std::string EncodeTimeoutPayload(std::string_view name, std::string_view data);
bool DecodeTimeoutPayload(std::string_view payload, std::string* name, std::string* data);

struct ProcessRun {
  ProcessRun(const ProcessShape& of, HandlerContext& context, std::string instance_key)
      : shape(of), ctx(context), rep(ScopeAccess::Rep(context)), key(std::move(instance_key)) {}

  // The context the application's handler gets.
  ProcessContext View() { return ProcessContext(this); }

  // Loads the instance record from the step's snapshot; false when none
  // runs. Asserts the record's version first when `serialize` (events of
  // several subjects may reach the instance).
  Result<bool> Load(bool serialize);
  // Starts a new instance (no record was loaded).
  void Start(uint64_t now_wall_ms);
  // Ends the loaded instance for an operator: its pending timeouts
  // cancelled, its record deleted, counted as abandoned.
  Status Abandon();
  // Takes the timeout `id` named `name` out of the record: false when the
  // record holds no such timeout (it was replaced or cancelled since).
  bool TakeFiredTimeout(const std::string& name, const EventId& id);
  // Upgrades the state to the state type's current schema version.
  Status UpgradeState(const StateUpgrade& upgrade);
  // Writes what the step leaves: the record, or its removal and the
  // cancel of its timeouts on Complete.
  Status Finish(const Event& event, uint64_t now_wall_ms);

  // Adds one to a counter of the process, committed with the step.
  void Count(storage::CheckpointField field);

  Status SetTimeout(std::string_view name, const EventSpec& delivery, std::string_view data);
  Status CancelTimeout(std::string_view name);
  // CancelTimeout without checking the name (its callers did).
  Status DropTimeout(std::string_view name);
  // Cancels the scheduled event `id` (a timeout) unless it fired already.
  Status CancelIfPending(const EventId& id);
  void RefreshTimeouts();

  const ProcessShape& shape;
  HandlerContext& ctx;
  ScopeRep* rep;
  std::string key;
  std::string record_key;  // storage::ProcessKey(shape.name, key)
  bool is_new = false;
  bool completed = false;
  storage::ProcessRecord record;
  std::optional<std::string> fired_timeout;
  std::string timeout_data;
  std::vector<ProcessTimeout> timeouts;  // record.timeouts as the public type
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_PROCESS_PROCESS_RUN_H_
