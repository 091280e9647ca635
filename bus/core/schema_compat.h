// Event contracts: whether one FlatBuffers schema of an event type may
// replace another. An event type's schema evolves only so that data written
// with either schema reads correctly with the other (Confluent's BACKWARD
// and FORWARD together); anything else is a new type version. The check
// reads both binary schemas (reflection, header-only: the library links no
// schema parser). flatc's own check (Parser::ConformTo) misses several
// breaking changes this one names; the walbus tool runs both.
//
// Threading: none shared; every function is pure.
#ifndef WALBUS_BUS_CORE_SCHEMA_COMPAT_H_
#define WALBUS_BUS_CORE_SCHEMA_COMPAT_H_

#include <string>
#include <string_view>
#include <vector>

#include "storage/db.h"
#include "storage/records.h"
#include "walbus/status.h"

#include <flatbuffers/reflection_generated.h>

namespace walbus::internal {

// A binary schema (.bfbs) that passed reflection::VerifySchemaBuffer and has
// a root table: reflection reads nothing else (it can read out of bounds on
// a malformed schema).
class BinarySchema {
 public:
  // InvalidArgument when `bytes` is not a binary schema, is larger than
  // kMaxSchemaBytes, or has no root table.
  static Result<BinarySchema> FromBytes(std::string bytes);

  const std::string& bytes() const { return bytes_; }
  const reflection::Schema& schema() const;
  // The root table's name, with its namespace ("orders.OrderApproved").
  std::string RootName() const;
  // FNV-1a 64 of the bytes: names a schema in listings (equal bytes are
  // what makes two registrations the same schema).
  uint64_t Hash() const;

 private:
  explicit BinarySchema(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string bytes_;
};

// A binary schema larger than this is refused (64 MiB): what the
// database stores of one.
inline constexpr size_t kMaxSchemaBytes = storage::kMaxSchemaBytes;

// Every way `next` fails to be a compatible evolution of `prev`, one line
// each naming the table, field, enum or value; empty when `next` may
// replace `prev`. Refused: a changed root table or file identifier; a
// deleted table, enum, field or enum value (deprecate a field instead); a
// field whose type, default, `required` or optional-ness changed, or that
// was renamed; a new field that is required; a struct changed in any way;
// an enum value renumbered or its underlying type changed; a union member
// added before the end or bound to another table.
std::vector<std::string> CompatibilityViolations(const BinarySchema& prev, const BinarySchema& next);

// A scalar's size in bytes (a union's tag is one); 0 for what is no scalar.
uint32_t ScalarBytes(reflection::BaseType t);

// A schema's hash as listings show it: 16 lowercase hex digits.
std::string SchemaHashText(uint64_t hash);

// The schemas accepted for `type` (EventContracts::RegisterSchema), version 1 first.
// Corruption when one does not decode, is not where its version says, or is
// no binary schema.
Status LoadAcceptedSchemas(const storage::Db& db, const std::string& type, std::vector<storage::SchemaRecord>* out);

// Every event type with a schema, in key order.
Status ListSchemaTypes(const storage::Db& db, std::vector<std::string>* types);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_SCHEMA_COMPAT_H_
