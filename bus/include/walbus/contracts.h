// walbus/contracts.h: event contracts (Bus::Contracts()): the FlatBuffers
// schemas of event types, kept in the database with every version ever
// accepted (docs/contracts.md has the evolution rules), payload verifiers,
// and upcasters from one version of a type to a later one.
#ifndef WALBUS_CONTRACTS_H_
#define WALBUS_CONTRACTS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "walbus/event.h"
#include "walbus/export.h"
#include "walbus/status.h"

namespace walbus {

// Checks the payload of one event type: OK, or why not. Registered with
// EventContracts::RegisterVerifier; runs at Publish and at ingest.
using PayloadVerifier = std::function<Status(std::string_view data)>;

// Brings an event from one version of its type to a later one (v1 -> v2):
// returns the new `data`. Registered with EventContracts::RegisterUpcaster;
// an error is a failed attempt of the subscriber's handler.
using Upcaster = std::function<Result<std::string>(const Event& from)>;

// What a registration of a schema came to.
struct SchemaVersion {
  uint32_t version = 0;  // 1 for a type's first schema, then 2, 3, ...
  std::string hash;      // 16 hex digits (FNV-1a 64 of the binary schema)
  bool added = false;    // false: this very schema was accepted before
};

// The contracts of a bus's event types, from Bus::Contracts().
//
// Threading: every method is thread-safe; schema registrations run one at
// a time, so each is checked against every one before it. Lives as long
// as its Bus.
class WALBUS_EXPORT EventContracts {
 public:
  EventContracts() = default;
  EventContracts(const EventContracts&) = delete;
  EventContracts& operator=(const EventContracts&) = delete;
  virtual ~EventContracts() = default;

  // Registers `binary_schema` (FlatBuffers, as `flatc --binary --schema`
  // writes it) as the contract of event type `type`, kept in the database
  // with every schema accepted for the type before. The bytes are verified
  // first. A schema accepted before, byte for byte, is taken again (its
  // version, `added` false). A new one must be a compatible evolution of
  // every schema accepted for the type (docs/contracts.md): otherwise
  // InvalidArgument listing each violation, against each version, and
  // nothing is stored; publish such a change as a new type version.
  // InvalidArgument too for a bad type or bytes that are no binary schema;
  // Corruption when a stored schema no longer reads; Closed after
  // Bus::Close().
  [[nodiscard]] virtual Result<SchemaVersion> RegisterSchema(std::string_view type, std::string_view binary_schema) = 0;
  // The schema `type`'s payloads are checked against now (the latest
  // accepted): its version and hash, `added` false. NotFound when the type
  // has no schema. Never does I/O.
  [[nodiscard]] virtual Result<SchemaVersion> LatestSchema(std::string_view type) const = 0;
  // Version `version` of `type`'s schema, as accepted in this database
  // (an event's Event::schema_version names one): its hash, `added`
  // false. NotFound when there is no such version. Never does I/O.
  [[nodiscard]] virtual Result<SchemaVersion> Schema(std::string_view type, uint32_t version) const = 0;

  // Registers a payload verifier for `type`, replacing any earlier one;
  // it runs beside the type's schema, if any. InvalidArgument when `type`
  // breaks the event type rules (walbus/event.h) or `verifier` is empty.
  [[nodiscard]] virtual Status RegisterVerifier(std::string_view type, PayloadVerifier verifier) = 0;

  // Registers how to bring `from_type` to the later `to_type` (same base
  // name, higher version), replacing an earlier upcaster of `from_type`.
  // Subscribers paused on an event this makes translatable resume.
  // InvalidArgument when either type breaks the event type rules, when the
  // two differ in base name or `to_type`'s version is not higher, or when
  // `upcaster` is empty.
  [[nodiscard]] virtual Status RegisterUpcaster(std::string_view from_type, std::string_view to_type,
                                                Upcaster upcaster) = 0;
};

// The CloudEvents `dataschema` of a payload checked against `schema`, the
// type's schema of that version: `walbus:schema:<type>:v<N>:<hash>`.
inline std::string DataSchemaUri(std::string_view type, const SchemaVersion& schema) {
  return "walbus:schema:" + std::string(type) + ":v" + std::to_string(schema.version) + ":" + schema.hash;
}

// The environment variable that makes CheckPinnedSchema pin a new schema
// instead of failing on it: set to 1 for the one run that pins.
inline constexpr char kPinContractsVariable[] = "WALBUS_PIN_CONTRACTS";

// For an application's contract tests: whether `binary_schema`, this
// build's schema of event type `type`, is a compatible evolution of every
// version pinned for the type, the files `<pinned_dir>/<type>/v<N>.bfbs` the
// repository keeps of each released version. OK when it is and is pinned
// itself. InvalidArgument listing each violation against each pinned file
// when it breaks one (publish the change as a new type version instead),
// or for a bad type or schema; NotFound when the schema is new (nothing is
// pinned yet, or it changed compatibly): with WALBUS_PIN_CONTRACTS=1 in the
// environment it is written as the next `v<N>.bfbs` instead, to be committed,
// and OK returned. Corruption for a pinned file that is no binary schema;
// IOError when the directory cannot be read or written.
[[nodiscard]] WALBUS_EXPORT Status CheckPinnedSchema(std::string_view type, std::string_view binary_schema,
                                                     std::string_view pinned_dir);

}  // namespace walbus

#endif  // WALBUS_CONTRACTS_H_
