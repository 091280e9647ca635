// A binary schema written back as FlatBuffers schema source (.fbs), so that
// `walbus schema show` prints what an application's repository would hold.
// Written from reflection alone: the FlatBuffers library has no generator
// of schema text, only flatc does.
#ifndef WALBUS_TOOLS_WALBUS_SCHEMA_TEXT_H_
#define WALBUS_TOOLS_WALBUS_SCHEMA_TEXT_H_

#include <string>

#include "bus/core/schema_compat.h"

namespace walbus::internal {

// The schema as source: its user attributes declared, then enums, structs
// (each after the structs it holds), unions and tables, each under its
// namespace, and the root type, file identifier and extension. Parsed
// again it gives a schema that no compatibility rule tells from this one
// (fields in id order, every default and attribute kept; comments,
// includes and attributes flatc does not keep in binary schemas are lost).
std::string SchemaSourceText(const BinarySchema& schema);

}  // namespace walbus::internal

#endif  // WALBUS_TOOLS_WALBUS_SCHEMA_TEXT_H_
