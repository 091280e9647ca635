// walbus schema check OLD NEW: whether the event schema NEW may replace OLD
// (bus/core/schema_compat.h), for an application's own CI. OLD and NEW are
// FlatBuffers schema sources (.fbs) or binary schemas (.bfbs).
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bus/core/schema_compat.h"
#include "tools/walbus/commands.h"
#include "tools/walbus/schema_source.h"

namespace walbus::tools {
namespace {

namespace wi = walbus::internal;

// A schema file: binary when it is one, else source (its includes looked
// up beside it). InvalidArgument naming the file when it is neither.
Result<wi::BinarySchema> LoadSchema(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  if (bytes.size() > wi::kMaxSchemaBytes) return Status::InvalidArgument(path + " is larger than a schema may be");
  const bool binary_name = path.size() > 5 && path.compare(path.size() - 5, 5, ".bfbs") == 0;
  auto binary = wi::BinarySchema::FromBytes(bytes);
  if (binary.ok() || binary_name) {
    if (!binary.ok()) return Status::InvalidArgument(path + ": " + binary.status().message());
    return binary;
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  return wi::ParseSchemaSource(bytes, dir, path);
}

int RunCheck(const std::string& old_path, const std::string& new_path) {
  auto old_schema = LoadSchema(old_path);
  if (!old_schema.ok()) return Fail("schema check", old_schema.status());
  auto new_schema = LoadSchema(new_path);
  if (!new_schema.ok()) return Fail("schema check", new_schema.status());
  const std::vector<std::string> violations = wi::CheckEvolution(*old_schema, *new_schema);
  if (violations.empty()) {
    std::cout << new_path << " may replace " << old_path << " (" << new_schema->RootName() << ")\n";
    return 0;
  }
  for (const std::string& line : violations) std::cout << line << "\n";
  std::cerr << "walbus schema check: " << new_path << " may not replace " << old_path << " (" << violations.size()
            << (violations.size() == 1 ? " violation" : " violations")
            << "): publish the change as a new type version (….v2) instead\n";
  return 1;
}

struct Values {
  std::string old_path, new_path;
};

}  // namespace

void AddSchemaCommand(CLI::App* app, Runners* runners) {
  CLI::App* schema = app->add_subcommand("schema", "Event contracts: FlatBuffers schemas of event types");
  schema->require_subcommand(1);
  auto v = std::make_shared<Values>();
  CLI::App* check = schema->add_subcommand(
      "check",
      "Whether NEW may replace OLD as the schema of one event type: exit 0 when it may, 1 with one line per "
      "violation, 2 on bad input. OLD and NEW are .fbs sources or .bfbs binary schemas.");
  check->add_option("old", v->old_path, "The schema in use")->required();
  check->add_option("new", v->new_path, "The proposed schema")->required();
  runners->push_back([check, v]() -> std::optional<int> {
    if (!check->parsed()) return std::nullopt;
    return RunCheck(v->old_path, v->new_path);
  });
}

}  // namespace walbus::tools
