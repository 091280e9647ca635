// PayloadContract: an event type's registered schema, as the check every
// payload of the type passes at Publish and Ingest.
//
// The check walks the payload with the schema (reflection, header-only):
// every table, string, vector, struct and union member the schema names is
// in bounds and aligned, required fields are present, nested FlatBuffers
// (`nested_flatbuffer`) are walked as their root table and FlexBuffers
// (`flexbuffer`) pass FlexBuffers' own verifier, and nesting and work are
// capped. Whatever it accepts, the verifier flatc generates for the same
// schema accepts too (tests/fuzz: the differential target). It is our own walk, not FlatBuffers' reflection
// `Verify`: the library links no FlatBuffers code (only its headers), and
// 2.0.8's walk dereferences null for a union member that is a string or a
// struct and stops at vectors of unions.
//
// Compatibility makes one schema enough: every accepted version of a type
// reads every other's data, so the latest one checks them all. Fields the
// schema does not know (a newer producer's) are skipped, as FlatBuffers
// readers skip them; so are union members it does not know.
//
// Threading: immutable once made; Verify may run on any number of threads.
#ifndef WALBUS_BUS_CORE_PAYLOAD_CONTRACT_H_
#define WALBUS_BUS_CORE_PAYLOAD_CONTRACT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/schema_compat.h"
#include "walbus/status.h"

namespace walbus::internal {

// Bounds on one payload's walk: nesting depth (tables within tables, nested
// FlatBuffers included), and steps: a table, a field present in it, an
// element of a vector of offsets, four bytes of a FlexBuffer. A payload
// whose every table, field and element has bytes of its own takes at most
// one step per byte; the walk allows kPayloadStepsPerByte, so that only
// offsets that point at the same data many times (a small hostile buffer
// that would make the walk long) exhaust it.
inline constexpr uint32_t kMaxPayloadDepth = 64;
inline constexpr uint32_t kPayloadStepsPerByte = 4;

class PayloadContract {
 public:
  // The contract of version `version` of `type`'s schema. A schema
  // without a file_identifier checks no identifier. InvalidArgument when a
  // `nested_flatbuffer` attribute names a table the schema does not hold.
  static Result<PayloadContract> Make(std::string type, uint32_t version, BinarySchema schema);

  // OK when `data` is a buffer of the schema's root table, with its file
  // identifier if the schema has one. InvalidArgument otherwise, naming the
  // type, the schema version and the first field that failed.
  Status Verify(std::string_view data) const;

  const std::string& type() const { return type_; }
  uint32_t version() const { return version_; }
  const BinarySchema& schema() const { return schema_; }

 private:
  PayloadContract(std::string type, uint32_t version, BinarySchema schema)
      : type_(std::move(type)), version_(version), schema_(std::move(schema)) {}

  std::string type_;
  uint32_t version_;
  BinarySchema schema_;
};

// The root table of a `nested_flatbuffer` field of `parent`, resolved as
// flatc resolves the name: in the parent's namespace, then each enclosing
// one. Null when the field has no such attribute; *unknown when it names a
// table the schema does not hold.
const reflection::Object* NestedFlatBufferRoot(const reflection::Schema& schema, const reflection::Object& parent,
                                               const reflection::Field& field, bool* unknown);

// The contract of every type with a schema in `db`: its latest accepted
// one. Corruption when a stored schema does not read or cannot be one.
// *hashes (when given) gets, per type, the hash of every accepted version,
// version 1 first.
Status LoadLatestContracts(const storage::Db& db, std::vector<PayloadContract>* out,
                           std::map<std::string, std::vector<uint64_t>>* hashes = nullptr);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_PAYLOAD_CONTRACT_H_
