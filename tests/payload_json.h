// Payloads built as flatc builds them from JSON, for tests and fuzz checks
// of event contracts.
#ifndef WALBUS_TESTS_PAYLOAD_JSON_H_
#define WALBUS_TESTS_PAYLOAD_JSON_H_

#include <string>
#include <string_view>

namespace walbus::testing {

// The FlatBuffers payload `json` describes, with the schema source
// `schema` (parsed as flatc --binary parses). Empty when either does not
// parse; *error then says why.
std::string PayloadFromJson(std::string_view schema, std::string_view json, std::string* error = nullptr);

// The same, with every scalar field the JSON names stored, even at its
// default (flatc's --force-defaults): JSON read from a payload reads back
// to a payload that shows the same JSON.
std::string PayloadFromJsonKeepingDefaults(std::string_view schema, std::string_view json);

// The binary schema of the schema source `schema`, as flatc --binary
// --schema --bfbs-builtins writes it; empty when it does not parse.
std::string BinarySchemaFromSource(std::string_view schema);

}  // namespace walbus::testing

#endif  // WALBUS_TESTS_PAYLOAD_JSON_H_
