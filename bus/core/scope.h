// ScopeRep: the buffered writes, preconditions and events of one unit of
// work (a Transaction or a handler's context), before the committer writes
// them in one batch.
#ifndef WALBUS_BUS_CORE_SCOPE_H_
#define WALBUS_BUS_CORE_SCOPE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "storage/db.h"
#include "walbus/bus.h"

namespace walbus::internal {

class BusImpl;

struct Op {
  enum class Kind : uint8_t { kPut, kDelete, kAddCounter, kDeleteRange };
  Kind kind;
  storage::CfHandle* cf;
  std::string key;    // kDeleteRange: the first key removed
  std::string value;  // kPut; kDeleteRange: the first key kept
  uint64_t delta = 0;  // kAddCounter only
};

// "The key's version must be `version`; commit sets it to next_version
// (version + 1 when 0)."
struct Expectation {
  std::string version_key;  // storage::VersionKey(cf id, key)
  uint64_t version;
  std::string description;  // "orders/order-42", for the Conflict message
  uint64_t next_version = 0;
  uint64_t Next() const { return next_version != 0 ? next_version : version + 1; }
};

struct ScopeRep {
  explicit ScopeRep(BusImpl* b) : bus(b) {}

  BusImpl* bus;
  Status error;  // the first failed call; the commit returns it
  std::vector<Op> ops;
  std::vector<Expectation> expects;
  // Events in publish order; seq is set by the committer.
  std::vector<std::shared_ptr<Event>> events;
  std::vector<std::string> envelopes;  // parallel to events
  size_t bytes = 0;  // approximate size of the batch this scope adds
  bool committed = false;

  // Handler contexts only.
  const Event* parent = nullptr;
  std::string subscriber_name;
  std::string idempotency_key;  // subscriber/event id, made on first use
  uint32_t attempt = 0;

  void Fail(Status s) {
    if (error.ok()) error = std::move(s);
  }
  void AddOp(Op op) {
    bytes += op.key.size() + op.value.size() + 16;
    ops.push_back(std::move(op));
  }
};

// Builds the public wrappers around a ScopeRep (their constructors are
// private to keep the representation out of the public headers).
struct ScopeAccess {
  static Transaction NewTransaction(std::unique_ptr<ScopeRep> rep) { return Transaction(std::move(rep)); }
  static std::unique_ptr<HandlerContext> NewContext(std::unique_ptr<ScopeRep> rep) {
    return std::unique_ptr<HandlerContext>(new HandlerContext(std::move(rep)));
  }
  static ScopeRep* Rep(WriteScope& scope) { return scope.rep_.get(); }
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_SCOPE_H_
