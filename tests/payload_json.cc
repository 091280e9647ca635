#include "tests/payload_json.h"

#include <flatbuffers/idl.h>

namespace walbus::testing {
namespace {

flatbuffers::IDLOptions BinaryOptions() {
  flatbuffers::IDLOptions options;
  options.lang_to_generate = flatbuffers::IDLOptions::kBinary;
  options.binary_schema_builtins = true;  // as walbus_add_event_schemas has flatc write it
  return options;
}

}  // namespace

std::string BinarySchemaFromSource(std::string_view schema) {
  flatbuffers::Parser parser(BinaryOptions());
  if (!parser.Parse(std::string(schema).c_str())) return {};
  parser.Serialize();
  return std::string(reinterpret_cast<const char*>(parser.builder_.GetBufferPointer()), parser.builder_.GetSize());
}

namespace {

std::string Parse(flatbuffers::IDLOptions options, std::string_view schema, std::string_view json, std::string* error) {
  flatbuffers::Parser parser(options);
  const std::string schema_text(schema), json_text(json);
  if (!parser.Parse(schema_text.c_str()) || !parser.Parse(json_text.c_str())) {
    if (error != nullptr) *error = parser.error_;
    return {};
  }
  return std::string(reinterpret_cast<const char*>(parser.builder_.GetBufferPointer()), parser.builder_.GetSize());
}

}  // namespace

std::string PayloadFromJson(std::string_view schema, std::string_view json, std::string* error) {
  return Parse(BinaryOptions(), schema, json, error);
}

std::string PayloadFromJsonKeepingDefaults(std::string_view schema, std::string_view json) {
  flatbuffers::IDLOptions options = BinaryOptions();
  options.force_defaults = true;
  return Parse(options, schema, json, nullptr);
}

}  // namespace walbus::testing
