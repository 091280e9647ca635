// EventContractsImpl: the contracts of event types behind Bus::Contracts()
// (walbus/contracts.h): schemas kept in walbus.meta, each new one checked
// against every one accepted before for its type; payload verifiers and
// upcasters, held in memory. What it accepts becomes the SchemaRegistry's
// contract, which Publish, ingest and delivery check against.
//
// Threading: thread-safe; schema registrations run one at a time
// (schemas_mu_), so each is checked against every one before it.
#ifndef WALBUS_BUS_API_EVENT_CONTRACTS_H_
#define WALBUS_BUS_API_EVENT_CONTRACTS_H_

#include <functional>
#include <set>
#include <string>

#include "bus/core/call_gate.h"
#include "bus/core/committer.h"
#include "bus/core/schema_registry.h"
#include "bus/dispatch/subscriber.h"
#include "bus/telemetry/log.h"
#include "bus/util/mutex.h"
#include "storage/db.h"
#include "walbus/contracts.h"
#include "walbus/options.h"

namespace walbus::internal {

class EventContractsImpl final : public EventContracts {
 public:
  // What the contracts are kept in and acted on. REQUIRES: each outlives
  // this.
  struct Parts {
    CallGate* gate;  // a registration stores inside an admitted call
    storage::Db* db;
    Committer* committer;
    SchemaRegistry* schemas;  // what accepted contracts become
    const Options* options;   // its clock
    BusLog* log;
    // Called after an upcaster is added: events paused for want of one may
    // translate now.
    std::function<void()> on_upcaster_added;
  };

  explicit EventContractsImpl(Parts parts);

  // Makes each type's latest accepted schema its payloads' contract.
  // REQUIRES: called once, before the bus is shared.
  Status Load();

  Result<SchemaVersion> RegisterSchema(std::string_view type, std::string_view binary_schema) override;
  Result<SchemaVersion> LatestSchema(std::string_view type) const override;
  Result<SchemaVersion> Schema(std::string_view type, uint32_t version) const override;
  Status RegisterVerifier(std::string_view type, PayloadVerifier verifier) override;
  Status RegisterUpcaster(std::string_view from_type, std::string_view to_type, Upcaster upcaster) override;

  // Under Options::require_schemas: warns once about each type an active
  // subscriber of `registry` takes that nothing can publish (no schema,
  // no upcaster from one), naming the registered types nearest to it.
  void WarnUnpublishable(Registry& registry);

 private:
  const Parts parts_;
  Mutex schemas_mu_;  // serializes schema registrations
  Mutex warned_mu_;
  std::set<std::string> warned_ GUARDED_BY(warned_mu_);  // types warned about
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_EVENT_CONTRACTS_H_
