// ScopeRep: one unit of work (a Transaction or a handler's context): its
// WriteSet, which the committer writes in one batch, and the ScopeHost its
// calls go to.
#ifndef WALBUS_BUS_CORE_SCOPE_H_
#define WALBUS_BUS_CORE_SCOPE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/call_gate.h"
#include "bus/core/state_reader.h"
#include "bus/core/timeline.h"
#include "bus/core/write_set.h"
#include "storage/db.h"
#include "walbus/bus.h"

namespace walbus::internal {

class SchemaRegistry;
struct ScopeRep;

// What a scope needs of the bus that made it (BusImpl is one): storage,
// the options, the schemas its events are checked against, the gate its
// calls pass, and the commit of a Transaction.
class ScopeHost {
 public:
  virtual CallGate& gate() = 0;
  // REQUIRES (all three): inside an admitted call, or a handler's context.
  virtual storage::Db* db() const = 0;
  virtual const Options& options() const = 0;
  virtual const SchemaRegistry& schemas() const = 0;
  // The column families Options::column_families lists.
  virtual const AppColumnFamilies& app_column_families() const = 0;
  // The time scheduled events fall due in.
  virtual Timeline& timeline() = 0;
  // Commits a Transaction's scope, fsynced when `sync` or under
  // Durability::kSync: InvalidArgument when it was committed before, the
  // first failed call's error, Closed, or the committer's.
  virtual Result<Receipt> CommitTransaction(ScopeRep* scope, bool sync) = 0;

 protected:
  ~ScopeHost() = default;
};

// One unit of work as the public wrappers (Transaction, HandlerContext)
// hold it: the writes it buffers, and what the wrappers need beside them.
struct ScopeRep {
  explicit ScopeRep(ScopeHost* h) : host(h) {}

  ScopeHost* host;
  Status error;  // the first failed call; the commit returns it
  WriteSet writes;
  StateReader reader;  // the snapshot, taken at the first read
  bool committed = false;

  // Handler contexts only.
  const Event* parent = nullptr;
  std::string subscriber_name;
  uint32_t subscriber_id = 0;
  std::string idempotency_key;  // subscriber/event id, made on first use
  uint32_t attempt = 0;
  std::optional<HandlerContext::ReplayRun> replay;  // run by a replay

  // The schedule keys this unit scheduled or cancelled under (its
  // expectation on the key's version is among writes.expects): the event
  // it scheduled last under each, or nullopt once it cancelled.
  std::map<std::string, std::optional<EventId>, std::less<>> schedule_keys;

  void Fail(Status s) {
    if (error.ok()) error = std::move(s);
  }

  // What every call that writes, and a second Commit, returns once the
  // transaction was committed: its writes would be dropped, and an event
  // id handed out for an event that is never written.
  static Status AlreadyCommitted() { return Status::InvalidArgument("transaction already committed"); }
};

// Held by each call of a Transaction or a ReadView made on an application
// thread, for as long as it uses storage: Close() waits for it, or it gets
// Closed. A handler's context needs none: Close() lets running handlers
// finish before it closes storage.
class ScopeCall {
 public:
  ScopeCall(ScopeHost* host, bool in_handler) {
    if (!in_handler) call_.emplace(&host->gate());
  }
  explicit ScopeCall(ScopeRep* rep) : ScopeCall(rep->host, rep->parent != nullptr) {}
  bool admitted() const { return !call_.has_value() || call_->admitted(); }

 private:
  std::optional<CallGate::Call> call_;
};

// Whether a write of `rep` may go on inside `call`: OK, AlreadyCommitted,
// or, once the bus closed, the unit's first error (the closing fails it).
inline Status CheckWritable(ScopeRep* rep, const ScopeCall& call) {
  if (rep->committed) return ScopeRep::AlreadyCommitted();
  if (call.admitted()) return Status::OK();
  rep->Fail(ClosedStatus());
  return rep->error;
}

// Makes `event` (scheduled by this unit: EventSpec::schedule_key) the one
// pending under `key`, cancelling the one pending under it before, in the
// same commit. Fails the unit on a storage error. REQUIRES: an admitted
// call; `key` checked.
Status ScheduleUnderKey(ScopeRep* rep, std::string_view key, const EventId& event);

// A ReadView as the public wrapper holds it: the bus's calls pass its gate,
// and the snapshot is taken when the view is made (none after Close).
struct ViewRep {
  explicit ViewRep(ScopeHost* h) : host(h) {}
  ScopeHost* host;
  StateReader reader;
};

// Builds the public wrappers around a ScopeRep (their constructors are
// private to keep the representation out of the public headers).
struct ScopeAccess {
  static Transaction NewTransaction(std::unique_ptr<ScopeRep> rep) { return Transaction(std::move(rep)); }
  static std::unique_ptr<HandlerContext> NewContext(std::unique_ptr<ScopeRep> rep) {
    return std::unique_ptr<HandlerContext>(new HandlerContext(std::move(rep)));
  }
  static ScopeRep* Rep(WriteScope& scope) { return scope.rep_.get(); }
  static ReadView NewView(std::unique_ptr<ViewRep> rep) { return ReadView(std::move(rep)); }
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_SCOPE_H_
