#include "tools/walbus/schema_source.h"

#include <flatbuffers/idl.h>

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

}  // namespace

Result<BinarySchema> ParseSchemaSource(std::string_view source, const std::string& include_dir,
                                       const std::string& file_name) {
  // As `flatc --binary --schema` parses: what it accepts (unions of
  // structs and strings among it) is accepted here.
  flatbuffers::IDLOptions options;
  options.lang_to_generate = flatbuffers::IDLOptions::kBinary;
  flatbuffers::Parser parser(options);
  const std::string text(source);
  const char* include_paths[] = {include_dir.c_str(), nullptr};
  if (!parser.Parse(text.c_str(), include_dir.empty() ? nullptr : include_paths, file_name.c_str())) {
    return Status::InvalidArgument(file_name + ": " + parser.error_);
  }
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
