#include "bus/api/unit_host.h"

#include <cassert>

namespace walbus::internal {

UnitHost::UnitHost(Parts parts) : parts_(parts) {
  assert(parts_.gate != nullptr && parts_.db != nullptr && parts_.committer != nullptr && parts_.options != nullptr &&
         parts_.schemas != nullptr && parts_.app_cfs != nullptr && parts_.timeline != nullptr &&
         parts_.disk_budget != nullptr);
}

Result<Receipt> UnitHost::CommitTransaction(ScopeRep* scope, bool sync) {
  if (scope->committed) return ScopeRep::AlreadyCommitted();
  scope->committed = true;
  scope->reader.Release();  // a committed transaction reads no more
  if (!scope->error.ok()) return scope->error;
  return CommitWrites(&scope->writes, sync);
}

Result<Receipt> UnitHost::CommitWrites(WriteSet* writes, bool sync) {
  Receipt receipt;
  if (writes->empty()) return receipt;
  Status s;
  {
    CallGate::Call call(parts_.gate);
    if (!call.admitted()) return ClosedStatus();
    // Without a budget, every commit skips the walk over its writes.
    const uint64_t budgeted = parts_.disk_budget->budget() != 0 ? BudgetedBytes(*writes) : 0;
    if (budgeted > 0) {
      if (Status fits = AdmitToBudget(budgeted); !fits.ok()) return fits;
    }
    s = parts_.committer->CommitOne(writes, sync || parts_.options->durability == Durability::kSync,
                                    &receipt.first_seq);
  }
  if (!s.ok()) return s;
  receipt.event_ids.reserve(writes->events.size());
  for (const auto& e : writes->events) receipt.event_ids.push_back(e->id);
  return receipt;
}

Status UnitHost::AdmitToBudget(uint64_t bytes) {
  DiskBudget& budget = *parts_.disk_budget;
  if (make_room_ == nullptr) return budget.Admit(bytes);
  // What others commit meanwhile, and the log's growth, may take the room
  // made: a few tries, each making room for what is missing then.
  constexpr int kTries = 4;
  for (int i = 0; i < kTries; ++i) {
    uint64_t short_by = 0;
    Status fits = budget.Admit(bytes, /*count_refusal=*/false, &short_by);
    if (fits.ok()) return fits;
    if (make_room_(short_by) == 0) {
      budget.CountRefusal();
      return fits;
    }
  }
  return budget.Admit(bytes);
}

uint64_t UnitHost::BudgetedBytes(const WriteSet& writes) const {
  uint64_t bytes = 0;
  for (const std::string& envelope : writes.envelopes) bytes += envelope.size();
  storage::CfHandle* timers = parts_.db->cf(storage::Cf::kTimers);
  for (const Op& op : writes.ops) {
    if (op.cf == timers && op.kind == Op::Kind::kPut) bytes += op.key.size() + op.value.size();
  }
  return bytes;
}

}  // namespace walbus::internal
