#include "bus/api/event_contracts.h"

#include <cassert>
#include <map>
#include <utility>
#include <vector>

#include "bus/core/envelope.h"
#include "bus/core/payload_contract.h"
#include "bus/core/schema_compat.h"
#include "bus/util/closest.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"
#include "storage/records.h"

namespace walbus::internal {
namespace {

// Every violation of `next` against each accepted schema, each line naming
// the version it breaks.
std::vector<std::string> ViolationsAgainst(const std::vector<storage::SchemaRecord>& accepted,
                                           const BinarySchema& next) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < accepted.size(); ++i) {
    auto prev = BinarySchema::FromBytes(accepted[i].binary_schema);
    assert(prev.ok() && "LoadAcceptedSchemas read each one back");
    for (const std::string& line : CompatibilityViolations(*prev, next)) {
      lines.push_back("against version " + std::to_string(i + 1) + ": " + line);
    }
  }
  return lines;
}

// The version `schema` is already: one accepted byte for byte, or an
// earlier one it reads as exactly (compatible both ways, so the same
// fields, types and defaults; another flatc's bytes or other attributes):
// the schema of a build rolled back. One that reads as exactly the latest
// but differs in bytes is a new version: its attributes may say more
// (nested_flatbuffer, flexbuffer) about what the payload check checks.
// 0 when it is none of them.
uint32_t SameVersion(const std::vector<storage::SchemaRecord>& accepted, const BinarySchema& schema) {
  for (size_t i = 0; i < accepted.size(); ++i) {
    if (accepted[i].binary_schema == schema.bytes()) return static_cast<uint32_t>(i + 1);
  }
  for (size_t i = 0; i + 1 < accepted.size(); ++i) {
    auto earlier = BinarySchema::FromBytes(accepted[i].binary_schema);
    assert(earlier.ok() && "LoadAcceptedSchemas read each one back");
    if (CompatibilityViolations(*earlier, schema).empty() && CompatibilityViolations(schema, *earlier).empty()) {
      return static_cast<uint32_t>(i + 1);
    }
  }
  return 0;
}

}  // namespace

EventContractsImpl::EventContractsImpl(Parts parts) : parts_(std::move(parts)) {
  assert(parts_.gate != nullptr && parts_.db != nullptr && parts_.committer != nullptr && parts_.schemas != nullptr &&
         parts_.options != nullptr && parts_.log != nullptr && parts_.on_upcaster_added);
}

Status EventContractsImpl::Load() {
  std::vector<PayloadContract> contracts;
  std::map<std::string, std::vector<uint64_t>> hashes;
  if (Status s = LoadLatestContracts(*parts_.db, &contracts, &hashes); !s.ok()) return s;
  for (PayloadContract& contract : contracts) parts_.schemas->SetContract(std::move(contract));
  for (auto& [type, versions] : hashes) parts_.schemas->SetVersionHashes(type, std::move(versions));
  return Status::OK();
}

Result<SchemaVersion> EventContractsImpl::LatestSchema(std::string_view type) const {
  std::shared_ptr<const PayloadContract> contract = parts_.schemas->Contract(type);
  if (contract == nullptr) return Status::NotFound("no schema of " + std::string(type));
  return SchemaVersion{contract->version(), SchemaHashText(contract->schema().Hash()), false};
}

Result<SchemaVersion> EventContractsImpl::Schema(std::string_view type, uint32_t version) const {
  std::optional<uint64_t> hash = parts_.schemas->VersionHash(type, version);
  if (!hash) return Status::NotFound("no schema version " + std::to_string(version) + " of " + std::string(type));
  return SchemaVersion{version, SchemaHashText(*hash), false};
}

Result<SchemaVersion> EventContractsImpl::RegisterSchema(std::string_view type_name, std::string_view binary_schema) {
  const std::string type(type_name);
  if (Status s = ValidateEventType(type); !s.ok()) return s;
  auto schema = BinarySchema::FromBytes(std::string(binary_schema));
  if (!schema.ok()) return Status::InvalidArgument("schema of " + type + ": " + schema.status().message());
  // The contract is made before anything is stored: a schema that cannot
  // check payloads is refused.
  auto contract = PayloadContract::Make(type, 0, *schema);
  if (!contract.ok()) return contract.status();
  CallGate::Call call(parts_.gate);
  if (!call.admitted()) return ClosedStatus();
  MutexLock lock(&schemas_mu_);
  std::vector<storage::SchemaRecord> accepted;
  if (Status s = LoadAcceptedSchemas(*parts_.db, type, &accepted); !s.ok()) return s;
  const uint64_t now_ms = ToUnixMillisUnsigned(parts_.options->clock->WallNow());
  uint32_t version = SameVersion(accepted, *schema);
  const bool added = version == 0;
  storage::SchemaRecord record;
  if (added) {
    const std::vector<std::string> violations = ViolationsAgainst(accepted, *schema);
    if (!violations.empty()) {
      std::string message = "schema of " + type + " is not a compatible evolution of the " +
                            std::to_string(accepted.size()) +
                            " accepted before; publish the change as a new type version instead:";
      for (const std::string& line : violations) message += "\n  " + line;
      return Status::InvalidArgument(message);
    }
    version = static_cast<uint32_t>(accepted.size() + 1);
    record = storage::SchemaRecord{schema->Hash(), now_ms, now_ms, schema->bytes()};
  } else {
    record = std::move(accepted[version - 1]);
    record.last_registered_ms = now_ms;
  }
  WriteSet scope;
  scope.Put(parts_.db->cf(storage::Cf::kMeta), storage::SchemaKey(type, version), storage::EncodeSchema(record));
  if (Status s = parts_.committer->CommitOne(&scope, /*sync=*/true); !s.ok()) return s;
  if (!added && version < accepted.size()) {
    parts_.log->logger().info(
        "walbus: the schema of {} is its version {} of {} (an earlier build); payloads are checked against "
        "version {}, which reads them",
        type, version, accepted.size(), accepted.size());
  }
  if (added) {
    parts_.log->logger().info("walbus: schema version {} of {} accepted ({})", version, type, schema->RootName());
    auto made = PayloadContract::Make(type, version, std::move(*schema));
    assert(made.ok() && "checked before the commit");
    parts_.schemas->AddVersionHash(type, version, record.hash);
    parts_.schemas->SetContract(std::move(*made));
  }
  return SchemaVersion{version, SchemaHashText(record.hash), added};
}

void EventContractsImpl::WarnUnpublishable(Registry& registry) {
  std::vector<std::pair<std::string, std::string>> silent;  // (type, subscriber)
  {
    MutexLock warned_lock(&warned_mu_);
    MutexLock lock(&registry.mu);
    for (const auto& [name, entry] : registry.by_name) {
      if (entry.active == nullptr) continue;
      for (const std::string& type : entry.active->types) {
        if (!parts_.schemas->CanArrive(type) && warned_.insert(type).second) silent.emplace_back(type, name);
      }
    }
  }
  if (silent.empty()) return;
  const std::vector<std::string> registered = parts_.schemas->ContractTypes();
  for (const auto& [type, subscriber] : silent) {
    std::string nearest;
    for (const std::string& near : ClosestNames(type, registered, 3)) nearest += (nearest.empty() ? "" : ", ") + near;
    parts_.log->logger().warn(
        "walbus: subscriber {} takes {}, which has no schema: under require_schemas no event of it can be published "
        "or ingested{}",
        subscriber, type, nearest.empty() ? std::string() : "; types with a schema near it: " + nearest);
  }
}

Status EventContractsImpl::RegisterVerifier(std::string_view type, PayloadVerifier verifier) {
  if (Status s = ValidateEventType(type); !s.ok()) return s;
  return parts_.schemas->AddVerifier(std::string(type), std::move(verifier));
}

Status EventContractsImpl::RegisterUpcaster(std::string_view from_type, std::string_view to_type, Upcaster upcaster) {
  if (Status s = ValidateEventType(from_type); !s.ok()) return s;
  if (Status s = ValidateEventType(to_type); !s.ok()) return s;
  if (Status s = parts_.schemas->AddUpcaster(std::string(from_type), std::string(to_type), std::move(upcaster));
      !s.ok()) {
    return s;
  }
  parts_.on_upcaster_added();
  return Status::OK();
}

}  // namespace walbus::internal
