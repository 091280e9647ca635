// walbus/contracts.h: event contracts: the FlatBuffers schemas of event
// types, kept in the database with every version ever accepted
// (Bus::RegisterSchema; docs/contracts.md has the evolution rules).
#ifndef WALBUS_CONTRACTS_H_
#define WALBUS_CONTRACTS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "walbus/export.h"
#include "walbus/status.h"

namespace walbus {

// What a registration of a schema came to.
struct SchemaVersion {
  uint32_t version = 0;  // 1 for a type's first schema, then 2, 3, ...
  std::string hash;      // 16 hex digits (FNV-1a 64 of the binary schema)
  bool added = false;    // false: this very schema was accepted before
};

// The CloudEvents `dataschema` of a payload checked against `schema`, the
// type's schema of that version: `walbus:schema:<type>:v<N>:<hash>`.
inline std::string DataSchemaUri(const std::string& type, const SchemaVersion& schema) {
  return "walbus:schema:" + type + ":v" + std::to_string(schema.version) + ":" + schema.hash;
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
[[nodiscard]] WALBUS_EXPORT Status CheckPinnedSchema(const std::string& type, std::string_view binary_schema,
                                                     const std::string& pinned_dir);

}  // namespace walbus

#endif  // WALBUS_CONTRACTS_H_
