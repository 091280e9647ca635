// OperatorActionsImpl: the operator's actions behind Bus::Operator()
// (walbus/operations.h): dead letters, replays, removing a subscriber,
// cancelling a scheduled event, abandoning a process instance. Each is
// recorded in walbus.replays, under one sequence of action ids, before or
// with what it changes. It acts on the parts it is given and owns none.
//
// Threading: thread-safe; actions that take an id run one at a time
// (actions_mu_).
#ifndef WALBUS_BUS_API_OPERATOR_ACTIONS_H_
#define WALBUS_BUS_API_OPERATOR_ACTIONS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "bus/core/call_gate.h"
#include "bus/core/committer.h"
#include "bus/core/scope.h"
#include "bus/dispatch/dispatcher.h"
#include "bus/dispatch/retention.h"
#include "bus/dispatch/subscriber.h"
#include "bus/telemetry/log.h"
#include "bus/util/mutex.h"
#include "storage/db.h"
#include "storage/records.h"
#include "walbus/operations.h"
#include "walbus/options.h"

namespace walbus::internal {

class OperatorActionsImpl final : public OperatorActions {
 public:
  // What the actions act on. REQUIRES: each outlives this; `inbox_window`
  // may be null (no Options::inbox_window).
  struct Parts {
    CallGate* gate;  // every action runs inside an admitted call
    storage::Db* db;
    Committer* committer;
    Registry* registry;
    Dispatcher* dispatcher;
    ScopeHost* scopes;  // the units CancelScheduled and AbandonProcess write
    const AppColumnFamilies* app_cfs;
    const Options* options;  // its clock and max_payload_bytes
    BusLog* log;
    InboxWindow* inbox_window;
  };

  explicit OperatorActionsImpl(Parts parts);

  Result<ActionReport> RedriveDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action) override;
  Result<ActionReport> SkipDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action) override;
  Result<ActionReport> PurgeDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action) override;
  Result<ActionReport> RemoveSubscriber(std::string_view name, const OperatorAction& action) override;
  Result<ReplayReport> StartReplay(const ReplayRequest& request) override;
  Status CancelReplay(uint64_t replay_id, const OperatorAction& action) override;
  Result<ReplayReport> Replay(uint64_t replay_id) override;
  Result<uint64_t> CancelScheduled(const EventId& id, const OperatorAction& action) override;
  Result<uint64_t> AbandonProcess(std::string_view process, std::string_view key,
                                  const OperatorAction& action) override;

  // Restarts the running replays of a subscriber that became active.
  Status ResumeReplays(const std::shared_ptr<Subscriber>& sub);
  // Deletes removed subscriber `id`'s inbox records, then marks its
  // tombstone done (a removal's second half; an open finishes what a crash
  // left). REQUIRES: `id` is removed.
  Status DeleteRemovedInbox(uint32_t id);

 private:
  enum class DeadLetterAction : uint8_t { kRedrive, kSkip, kPurge };
  // The shared part of the dead-letter actions: checks, selects, records
  // the action with its unparking and deletions in the same commit, and
  // fills the report.
  Status ActOnDeadLetters(DeadLetterAction kind, const DeadLetterSelection& selection, const OperatorAction& action,
                          ActionReport* report);
  // The dead letters `selection` picks, in seq order, with their event ids
  // and subjects; the parked subjects among those (unless purging).
  Status SelectDeadLetters(DeadLetterAction kind, uint32_t id, const DeadLetterSelection& selection,
                           ActionReport* report, std::vector<std::string>* event_ids);
  // The id of the next operator action (every kind shares the sequence).
  Status NextActionId(uint64_t* id) REQUIRES(actions_mu_);
  // The record of `action`, done now by its operator, with `fields`.
  storage::ActionRecord RecordOf(const char* kind, const OperatorAction& action,
                                 std::vector<std::pair<std::string, std::string>> fields) const;
  // Commits `writes` (an action and what it changes) durably.
  Status CommitAction(WriteSet* writes);
  // What the replay `record` would select and do, read from the outbox and
  // the inbox, with nothing recorded (OperatorAction::dry_run).
  Result<ReplayReport> DryRunReplay(const ReplayRequest& request, storage::ReplayRecord record,
                                    const Subscriber* active, uint32_t sub_id, uint64_t now_ms);
  // A rebuild's writes beside its record (ReplayRequest::
  // clear_column_families): the clears, and the deletion of the inbox
  // records of what the subscriber handled above its checkpoint, so those
  // events run again, live, on the cleared state. InvalidArgument for an
  // unknown column family; NotSupported when part of the history is gone or
  // dead letters wait. REQUIRES: the subscriber is not active, and cannot
  // become so before the commit.
  Status AddRebuildWrites(const ReplayRequest& request, uint32_t sub_id, uint64_t checkpoint, WriteSet* writes)
      REQUIRES(registry_.mu);
  // Records a checked replay request (its record, and a rebuild's clears)
  // in one commit; returns its id. Busy when the subscriber has a replay
  // running, or became active before a rebuild's commit.
  Result<uint64_t> RecordReplay(const ReplayRequest& request, uint32_t sub_id, const storage::ReplayRecord& record);
  // Whether a fresh-scope replay may run the subscriber's effects again:
  // as active here, or else as it was last subscribed.
  Result<bool> SideEffectSafe(uint32_t sub_id, const Subscriber* active);
  // Whether subscriber `sub_id` has a replay running. REQUIRES: actions_mu_
  // held, so none starts meanwhile.
  Result<bool> ReplayRunning(uint32_t sub_id) REQUIRES(actions_mu_);
  // The dead letters and parked subjects a removal of subscriber `id` drops.
  Status SelectForRemoval(uint32_t id, ActionReport* report);
  // A removal's one commit: its record, the tombstone, and the ranges of
  // every record of the subscriber.
  void AddRemovalWrites(const std::string& name, const Registry::Entry& entry, const OperatorAction& action,
                        const ActionReport& report, WriteSet* writes);

  CallGate* const gate_;
  storage::Db* const db_;
  Committer* const committer_;
  Registry& registry_;
  Dispatcher* const dispatcher_;
  ScopeHost* const scopes_;
  const AppColumnFamilies& app_cfs_;
  const Options& options_;
  BusLog* const log_;
  InboxWindow* const inbox_window_;
  Mutex actions_mu_;  // serializes the actions that take an id
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_OPERATOR_ACTIONS_H_
