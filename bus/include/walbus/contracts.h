// walbus/contracts.h: event contracts: the FlatBuffers schemas of event
// types, kept in the database with every version ever accepted
// (Bus::RegisterSchema; docs/contracts.md has the evolution rules).
#ifndef WALBUS_CONTRACTS_H_
#define WALBUS_CONTRACTS_H_

#include <cstdint>
#include <string>

namespace walbus {

// What a registration of a schema came to.
struct SchemaVersion {
  uint32_t version = 0;  // 1 for a type's first schema, then 2, 3, ...
  std::string hash;      // 16 hex digits (FNV-1a 64 of the binary schema)
  bool added = false;    // false: this very schema was accepted before
};

}  // namespace walbus

#endif  // WALBUS_CONTRACTS_H_
