// AbandonProcessInstance (walbus/process.h): an operator's abandonment of a
// process instance, recorded as the other operator actions are, and
// delivered to the process as an event under the instance's key.
#include "bus/api/bus_impl.h"
#include "bus/core/envelope.h"
#include "bus/process/process_run.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"
#include "walbus/process.h"

namespace walbus {

Result<uint64_t> AbandonProcessInstance(Bus& bus, std::string_view name, std::string_view key,
                                        const OperatorAction& action) {
  auto* impl = dynamic_cast<internal::BusImpl*>(&bus);
  if (impl == nullptr) return Status::InvalidArgument("AbandonProcessInstance takes a bus that Bus::Open made");
  return impl->AbandonProcessInstance(name, key, action);
}

namespace internal {

Result<uint64_t> BusImpl::AbandonProcessInstance(std::string_view name, std::string_view key,
                                                 const OperatorAction& action) {
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  if (action.operator_name.empty() || action.reason.empty()) {
    return Status::InvalidArgument("an operator action needs an operator name and a reason");
  }
  if (Status s = ValidateProcessName(name); !s.ok()) return s;
  Transaction tx = Begin();
  ScopeRep* rep = ScopeAccess::Rep(tx);
  auto stored = rep->reader.Get(db_.get(), db_->cf(storage::Cf::kProcesses), storage::ProcessKey(name, key), nullptr);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) {
    return Status::NotFound("no instance of process " + std::string(name) + " runs under key " + std::string(key));
  }
  if (action.dry_run) return uint64_t{0};
  MutexLock lock(&actions_mu_);
  uint64_t action_id = 0;
  if (Status s = NextActionId(&action_id); !s.ok()) return s;
  EventSpec abandon;
  abandon.type = ProcessAbandonType(name);
  abandon.subject = std::string(key);
  abandon.data = std::to_string(action_id);
  if (Status s = tx.Publish(abandon).status(); !s.ok()) return s;
  using storage::ActionRecord;
  const ActionRecord record{"process-abandon",
                            action.operator_name,
                            action.reason,
                            ToUnixMillis(options_.clock->WallNow()),
                            {{"process", ActionRecord::JsonText(name)}, {"key", ActionRecord::JsonText(key)}}};
  rep->writes.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(action_id), storage::EncodeAction(record));
  if (Status s = committer_->CommitOne(&rep->writes, /*sync=*/true); !s.ok()) return s;
  return action_id;
}

}  // namespace internal
}  // namespace walbus
