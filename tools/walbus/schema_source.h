// Event schemas as an application's repository holds them: FlatBuffers
// schema source (.fbs) parsed into binary schemas, and flatc's own
// compatibility verdict beside walbus's (bus/core/schema_compat.h). The
// schema parser lives with the tool: the library takes binary schemas only.
#ifndef WALBUS_TOOLS_WALBUS_SCHEMA_SOURCE_H_
#define WALBUS_TOOLS_WALBUS_SCHEMA_SOURCE_H_

#include <string>
#include <string_view>
#include <vector>

#include "bus/core/schema_compat.h"
#include "walbus/status.h"

namespace walbus::internal {

// Parses FlatBuffers schema source; `include_dirs` (may be empty) are
// where its includes are looked up, in order, `file_name` names it in
// errors. InvalidArgument with the parser's message when it does not parse.
Result<BinarySchema> ParseSchemaSource(std::string_view source, const std::vector<std::string>& include_dirs,
                                       const std::string& file_name);

// CompatibilityViolations, and when it finds none, flatc's verdict
// (Parser::ConformTo) as one more line: what flatc refuses is refused too.
std::vector<std::string> CheckEvolution(const BinarySchema& prev, const BinarySchema& next);

}  // namespace walbus::internal

#endif  // WALBUS_TOOLS_WALBUS_SCHEMA_SOURCE_H_
