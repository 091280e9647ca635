// A binary schema written back as FlatBuffers schema source (.fbs), so that
// `walbus schema show` prints what an application's repository would hold.
// Written from reflection alone: the FlatBuffers library has no generator
// of schema text, only flatc does.
#ifndef WALBUS_TOOLS_WALBUS_SCHEMA_TEXT_H_
#define WALBUS_TOOLS_WALBUS_SCHEMA_TEXT_H_

#include <string>
#include <vector>

#include "bus/core/schema_compat.h"

namespace walbus::internal {

// The schema as source: its user attributes declared, then enums, structs
// (each after the structs it holds), unions and tables, each under its
// namespace, and the root type, file identifier and extension. Parsed
// again it gives a schema that no compatibility rule tells from this one
// (fields in id order, every default and attribute kept; comments,
// includes and attributes flatc does not keep in binary schemas are lost).
//
// One thing source cannot say: a reference to a type that a nearer type
// of the same trailing name hides (flatc resolves names innermost
// namespace first, e.g. `orders.Line` written in namespace `shop.orders`
// where `shop.orders.Line` exists). Such a schema comes only from
// declarations in an order flatc resolves differently, or from other
// tools; each such reference gets a comment line in the text and, when
// `hidden` is given, an entry there ("orders.Line from namespace
// shop.orders"). The text then does not read back as the schema.
std::string SchemaSourceText(const BinarySchema& schema, std::vector<std::string>* hidden = nullptr);

}  // namespace walbus::internal

#endif  // WALBUS_TOOLS_WALBUS_SCHEMA_TEXT_H_
