// walbus schema generate: the C++ that binds an application's event
// schemas to their event types (walbus/adapters/flatbuffers.h), from the binary
// schemas flatc wrote. walbus_add_event_schemas (cmake/) runs it.
#ifndef WALBUS_TOOLS_WALBUS_SCHEMA_CODEGEN_H_
#define WALBUS_TOOLS_WALBUS_SCHEMA_CODEGEN_H_

#include <string>
#include <vector>

#include "bus/core/schema_compat.h"
#include "walbus/status.h"

namespace walbus::internal {

// The attribute on a root table that names its event type:
//   attribute "walbus_event";
//   table OrderApproved (walbus_event: "orders.order-approved.v1") { ... }
inline constexpr char kEventAttribute[] = "walbus_event";

// One event schema: where flatc wrote it and what it binds.
struct BoundSchema {
  std::string stem;        // file name without .bfbs or .fbs: flatc's header is <stem>_generated.h
  std::string event_type;  // the root table's walbus_event
  std::string table;       // the root table in C++: "::orders::OrderApproved"
  std::string file_identifier;
  std::string bytes;  // the binary schema
};

// Reads a binary schema's binding. InvalidArgument naming `path` when the
// schema has no file identifier, its root table no walbus_event, or that
// names no valid event type.
Result<BoundSchema> BindSchema(const std::string& path, const BinarySchema& schema);

// The header and source of the bindings of `schemas` and of `function`
// ("orders::RegisterEventSchemas"), which registers them all with a bus.
// `header_name` is how the source includes the header. InvalidArgument
// when two schemas bind one event type or `function` is no C++ name.
struct GeneratedCode {
  std::string header;
  std::string source;
};
Result<GeneratedCode> GenerateBindings(const std::vector<BoundSchema>& schemas, const std::string& function,
                                       const std::string& header_name);

}  // namespace walbus::internal

#endif  // WALBUS_TOOLS_WALBUS_SCHEMA_CODEGEN_H_
