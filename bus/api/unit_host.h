// UnitHost: the ScopeHost of one bus's units of work (Transaction,
// HandlerContext, ReadView, and the units operator actions write): the
// storage, options, schemas, column families and timeline they read
// through, the gate their calls pass, and the commit of a Transaction.
// It owns none of what it hands out.
//
// Threading: thread-safe (each part it hands out is, and commits go
// through the committer).
#ifndef WALBUS_BUS_API_UNIT_HOST_H_
#define WALBUS_BUS_API_UNIT_HOST_H_

#include <functional>

#include "bus/core/call_gate.h"
#include "bus/core/committer.h"
#include "bus/core/disk_budget.h"
#include "bus/core/schema_registry.h"
#include "bus/core/scope.h"
#include "bus/core/state_reader.h"
#include "bus/core/timeline.h"
#include "storage/db.h"
#include "walbus/options.h"

namespace walbus::internal {

class UnitHost final : public ScopeHost {
 public:
  // What units reach. REQUIRES: each outlives this and every unit made
  // with it.
  struct Parts {
    CallGate* gate;
    storage::Db* db;
    Committer* committer;
    const Options* options;  // its durability decides each commit's fsync
    const SchemaRegistry* schemas;
    const AppColumnFamilies* app_cfs;
    Timeline* timeline;
    DiskBudget* disk_budget;  // decides which commits of events fit
  };

  explicit UnitHost(Parts parts);
  UnitHost(const UnitHost&) = delete;
  UnitHost& operator=(const UnitHost&) = delete;
  ~UnitHost() = default;

  CallGate& gate() override { return *parts_.gate; }
  storage::Db* db() const override { return parts_.db; }
  const Options& options() const override { return *parts_.options; }
  const SchemaRegistry& schemas() const override { return *parts_.schemas; }
  const AppColumnFamilies& app_column_families() const override { return *parts_.app_cfs; }
  Timeline& timeline() override { return *parts_.timeline; }
  Result<Receipt> CommitTransaction(ScopeRep* scope, bool sync) override;

  // Commits `writes` inside an admitted call (a Transaction's, an ingested
  // event's), fsynced when `sync` or under Durability::kSync. An empty set
  // commits nothing. Closed once the gate is shut; ResourceExhausted,
  // writing nothing, when its events or scheduled events do not fit in
  // Options::disk_budget.
  Result<Receipt> CommitWrites(WriteSet* writes, bool sync = false);

  // What a commit the budget refuses asks to make room (Options::
  // drop_oldest_types): given the bytes wanted, frees what it can and
  // returns the bytes freed. Set once, before any commit.
  using RoomMaker = std::function<uint64_t(uint64_t bytes)>;
  void SetRoomMaker(RoomMaker make_room) { make_room_ = std::move(make_room); }

 private:
  // The bytes `writes` adds to what Options::disk_budget bounds.
  uint64_t BudgetedBytes(const WriteSet& writes) const;
  // Admits `bytes` into the disk budget, making room once when refused.
  Status AdmitToBudget(uint64_t bytes);

  const Parts parts_;
  RoomMaker make_room_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_UNIT_HOST_H_
