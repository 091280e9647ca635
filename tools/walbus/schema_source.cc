#include "tools/walbus/schema_source.h"

#include <flatbuffers/idl.h>

#include <cstdint>

namespace walbus::internal {
namespace {

// flatc's verdict, from the two binary schemas read back into parsers;
// empty when it finds nothing or cannot read one back.
std::string FlatcVerdict(const BinarySchema& prev, const BinarySchema& next) {
  flatbuffers::Parser base, candidate;
  if (!base.Deserialize(reinterpret_cast<const uint8_t*>(prev.bytes().data()), prev.bytes().size()) ||
      !candidate.Deserialize(reinterpret_cast<const uint8_t*>(next.bytes().data()), next.bytes().size())) {
    return {};
  }
  return candidate.ConformTo(base);
}

// flatc's binary schema keeps an integer default as an int64 and stores a
// ulong default above 2^63-1 as 0: the schema walbus registers would
// then disagree with the .fbs an application's code was generated from.
Status CheckUlongDefaults(const flatbuffers::Parser& parser, const std::string& file_name) {
  for (const flatbuffers::StructDef* object : parser.structs_.vec) {
    for (const flatbuffers::FieldDef* field : object->fields.vec) {
      if (field->value.type.base_type != flatbuffers::BASE_TYPE_ULONG || field->IsScalarOptional()) continue;
      uint64_t value = 0;
      if (flatbuffers::StringToNumber(field->value.constant.c_str(), &value) &&
          value > static_cast<uint64_t>(INT64_MAX)) {
        return Status::InvalidArgument(file_name + ": " + object->name + "." + field->name + ": the default " +
                                       field->value.constant +
                                       " is above 9223372036854775807 (2^63-1), which a binary schema cannot hold "
                                       "(flatc stores it as 0); choose a smaller default or make the field optional "
                                       "(= null)");
      }
    }
  }
  return Status::OK();
}

}  // namespace

Result<BinarySchema> ParseSchemaSource(std::string_view source, const std::vector<std::string>& include_dirs,
                                       const std::string& file_name) {
  // As `flatc --binary --schema` parses: what it accepts (unions of
  // structs and strings among it) is accepted here.
  flatbuffers::IDLOptions options;
  options.lang_to_generate = flatbuffers::IDLOptions::kBinary;
  // As walbus_add_event_schemas has flatc write it: with nested_flatbuffer,
  // flexbuffer and bit_flags, which payload checks and JSON need.
  options.binary_schema_builtins = true;
  flatbuffers::Parser parser(options);
  const std::string text(source);
  std::vector<const char*> include_paths;
  include_paths.reserve(include_dirs.size() + 1);
  for (const std::string& dir : include_dirs) include_paths.push_back(dir.c_str());
  include_paths.push_back(nullptr);
  if (!parser.Parse(text.c_str(), include_dirs.empty() ? nullptr : include_paths.data(), file_name.c_str())) {
    return Status::InvalidArgument(file_name + ": " + parser.error_);
  }
  if (Status s = CheckUlongDefaults(parser, file_name); !s.ok()) return s;
  parser.Serialize();
  auto schema = BinarySchema::FromBytes(
      std::string(reinterpret_cast<const char*>(parser.builder_.GetBufferPointer()), parser.builder_.GetSize()));
  if (!schema.ok()) return Status::InvalidArgument(file_name + ": " + schema.status().message());
  return schema;
}

std::vector<std::string> CheckEvolution(const BinarySchema& prev, const BinarySchema& next) {
  std::vector<std::string> lines = CompatibilityViolations(prev, next);
  if (lines.empty()) {
    if (std::string verdict = FlatcVerdict(prev, next); !verdict.empty()) lines.push_back("flatc: " + verdict);
  }
  return lines;
}

}  // namespace walbus::internal
