// SchemaRegistry: event type -> payload contract (the type's registered
// schema), payload verifier and upcaster, so that payloads are checked and
// consumers accept every live version of a type.
//
// Types are "<base>.v<N>" (orders.order-approved.v1). An upcaster turns
// version N of a base into a later version of the same base; chains are
// followed (v1 -> v2 -> v3). A subscriber that declares v3 receives v1 and
// v2 events upcast to v3.
//
// Threading: thread-safe. Registration takes an exclusive lock; lookups a
// shared one, so upcasters and verifiers run concurrently on workers.
#ifndef WALBUS_BUS_CORE_SCHEMA_REGISTRY_H_
#define WALBUS_BUS_CORE_SCHEMA_REGISTRY_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/payload_contract.h"
#include "bus/util/mutex.h"
#include "walbus/bus.h"

namespace walbus::internal {

// "orders.order-approved.v12" -> {"orders.order-approved", 12}; nullopt
// when the type does not end in ".v<N>".
struct TypeVersion {
  std::string base;
  uint32_t version = 0;
};
std::optional<TypeVersion> SplitType(std::string_view type);
// The type without its version: "orders.order-approved.v12" ->
// "orders.order-approved" (all of it when it has no '.').
std::string_view TypeBaseName(std::string_view type);

class SchemaRegistry {
 public:
  // With `require_contracts`, a type without a contract fails Verify
  // (Options::require_schemas).
  explicit SchemaRegistry(bool require_contracts = false) : require_contracts_(require_contracts) {}

  // Makes `contract` the one its type's payloads are checked against,
  // unless the type has one of a later version already.
  void SetContract(PayloadContract contract);
  // The type's contract; null when it has none.
  std::shared_ptr<const PayloadContract> Contract(std::string_view type) const;

  // REQUIRES: types valid (ValidateEventType).
  Status AddVerifier(const std::string& type, PayloadVerifier verifier);
  // InvalidArgument unless `to` is a later version of the same base.
  Status AddUpcaster(const std::string& from, const std::string& to, Upcaster upcaster);

  // Checks `data` against the type's contract, then its verifier. OK for a
  // type with neither, unless contracts are required. *schema_version (when
  // given) gets the version of the contract checked; 0 without one.
  Status Verify(std::string_view type, std::string_view data, uint32_t* schema_version = nullptr) const;

  // The hash of every accepted schema version of `type` (version 1 first),
  // as stored: set at open, appended to as versions are accepted.
  void SetVersionHashes(const std::string& type, std::vector<uint64_t> hashes);
  void AddVersionHash(const std::string& type, uint32_t version, uint64_t hash);
  // The hash of `type`'s schema version `version`; nullopt when unknown.
  std::optional<uint64_t> VersionHash(std::string_view type, uint32_t version) const;

  // Whether an event of `type` can be published or ingested under
  // require_contracts: the type has a contract, or upcasters bring a type
  // that has one to it.
  bool CanArrive(std::string_view type) const;
  // The types with a contract, sorted.
  std::vector<std::string> ContractTypes() const;

  enum class Resolution : uint8_t {
    kAsIs,          // the subscriber takes this type
    kUpcast,        // *out holds the event at a version the subscriber takes
    kNoTranslator,  // same base, but no chain of upcasters reaches a wanted version
    kNotWanted,     // the subscriber does not take this base at all
  };
  // Brings `event` to a type in `wanted` (empty = every type, as is).
  // An upcaster's error is returned as a non-OK status.
  Result<Resolution> Resolve(const Event& event, const std::vector<std::string>& wanted, Event* out) const;

 private:
  const bool require_contracts_;
  mutable SharedMutex mu_;
  std::map<std::string, std::shared_ptr<const PayloadContract>, std::less<>> contracts_ GUARDED_BY(mu_);
  std::map<std::string, PayloadVerifier, std::less<>> verifiers_ GUARDED_BY(mu_);
  std::map<std::string, std::pair<std::string, Upcaster>, std::less<>> upcasters_ GUARDED_BY(mu_);  // from -> (to, fn)
  std::map<std::string, std::vector<uint64_t>, std::less<>> version_hashes_ GUARDED_BY(mu_);
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_SCHEMA_REGISTRY_H_
