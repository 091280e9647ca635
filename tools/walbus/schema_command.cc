// walbus schema check OLD NEW: whether the event schema NEW may replace OLD
// (bus/core/schema_compat.h), for an application's own CI. OLD and NEW are
// FlatBuffers schema sources (.fbs) or binary schemas (.bfbs); OLD may be a
// database instead, whose every stored version of --type NEW must extend.
// walbus schema ls DIR: the event types with schemas in a database.
// walbus schema show DIR TYPE: every version of one type's schema, as .fbs.
// walbus schema generate: C++ bindings of event schemas (schema_codegen.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <filesystem>

#include <flatbuffers/reflection_generated.h>

#include "bus/core/schema_compat.h"
#include "tools/walbus/commands.h"
#include "tools/walbus/inspect_util.h"
#include "tools/walbus/schema_codegen.h"
#include "tools/walbus/schema_source.h"
#include "tools/walbus/schema_text.h"

namespace walbus::tools {
namespace {

namespace wi = walbus::internal;

// A schema file: binary when it is one, else source, its includes looked
// up beside it, then in `include_dirs` (-I) in order. InvalidArgument
// naming the file when it is neither.
Result<wi::BinarySchema> LoadSchema(const std::string& path, const std::vector<std::string>& include_dirs = {}) {
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
  std::vector<std::string> dirs = {slash == std::string::npos ? "." : path.substr(0, slash)};
  dirs.insert(dirs.end(), include_dirs.begin(), include_dirs.end());
  return wi::ParseSchemaSource(bytes, dirs, path);
}

// Prints the violations (one per line) and the verdict; the exit code.
int Verdict(const std::string& old_name, const std::string& new_path, const std::vector<std::string>& violations,
            const std::string& root) {
  if (violations.empty()) {
    std::cout << new_path << " may replace " << old_name << " (" << root << ")\n";
    return 0;
  }
  for (const std::string& line : violations) std::cout << line << "\n";
  std::cerr << "walbus schema check: " << new_path << " may not replace " << old_name << " (" << violations.size()
            << (violations.size() == 1 ? " violation" : " violations")
            << "): publish the change as a new type version (….v2) instead\n";
  return 1;
}

// NEW against every version of `type` a database holds.
int CheckAgainstDatabase(const std::string& dir, const std::string& type, const wi::BinarySchema& next,
                         const std::string& new_path) {
  if (type.empty()) {
    std::cerr << "walbus schema check: " << dir << " is a database: name the event type with --type\n";
    return 2;
  }
  wi::inspect_util::SecondaryView view;
  if (Status s = wi::inspect_util::OpenSecondary(dir, &view); !s.ok()) return Fail("schema check", s);
  std::vector<storage::SchemaRecord> accepted;
  if (Status s = wi::LoadAcceptedSchemas(*view.db, type, &accepted); !s.ok()) return Fail("schema check", s);
  if (accepted.empty()) return Fail("schema check", Status::NotFound("no schema of " + type + " in " + dir));
  std::vector<std::string> violations;
  for (size_t i = 0; i < accepted.size(); ++i) {
    auto prev = wi::BinarySchema::FromBytes(accepted[i].binary_schema);
    if (!prev.ok()) return Fail("schema check", prev.status());
    for (const std::string& line : wi::CheckEvolution(*prev, next)) {
      violations.push_back("against version " + std::to_string(i + 1) + ": " + line);
    }
  }
  return Verdict(type + " in " + dir, new_path, violations, next.RootName());
}

int RunCheck(const std::string& old_path, const std::string& new_path, const std::string& type,
             const std::vector<std::string>& include_dirs) {
  auto new_schema = LoadSchema(new_path, include_dirs);
  if (!new_schema.ok()) return Fail("schema check", new_schema.status());
  std::error_code ec;
  if (std::filesystem::is_directory(old_path, ec)) return CheckAgainstDatabase(old_path, type, *new_schema, new_path);
  auto old_schema = LoadSchema(old_path, include_dirs);
  if (!old_schema.ok()) return Fail("schema check", old_schema.status());
  return Verdict(old_path, new_path, wi::CheckEvolution(*old_schema, *new_schema), new_schema->RootName());
}

int RunList(const std::string& dir, bool json) {
  wi::inspect_util::SecondaryView view;
  if (Status s = wi::inspect_util::OpenSecondary(dir, &view); !s.ok()) return Fail("schema ls", s);
  std::vector<std::string> types;
  if (Status s = wi::ListSchemaTypes(*view.db, &types); !s.ok()) return Fail("schema ls", s);
  std::vector<std::vector<std::string>> rows = {{"TYPE", "VERSIONS", "LATEST HASH", "ROOT TABLE", "LAST REGISTERED"}};
  for (const std::string& type : types) {
    std::vector<storage::SchemaRecord> accepted;
    if (Status s = wi::LoadAcceptedSchemas(*view.db, type, &accepted); !s.ok()) return Fail("schema ls", s);
    uint64_t last_ms = 0;
    for (const auto& r : accepted) last_ms = std::max(last_ms, r.last_registered_ms);
    const auto latest = wi::BinarySchema::FromBytes(accepted.back().binary_schema);
    const std::string hash = wi::SchemaHashText(accepted.back().hash);
    const std::string last = wi::inspect_util::IsoTimeMs(static_cast<int64_t>(last_ms));
    if (json) {
      std::cout << "{\"type\":" << wi::JsonString(type) << ",\"versions\":" << accepted.size() << ",\"latest_hash\":\""
                << hash << "\",\"root_table\":" << wi::JsonString(latest->RootName()) << ",\"last_registered\":\""
                << last << "\"}\n";
    } else {
      rows.push_back({type, std::to_string(accepted.size()), hash, latest->RootName(), last});
    }
  }
  if (!json) std::cout << wi::inspect_util::Table(rows);
  return 0;
}

// One stored version of a type's schema: what it is, when it was
// registered, and its source text.
void ShowVersion(const std::string& type, size_t version, const storage::SchemaRecord& record,
                 const wi::BinarySchema& schema, const std::string& source, bool json) {
  const std::string hash = wi::SchemaHashText(record.hash);
  const std::string first = wi::inspect_util::IsoTimeMs(static_cast<int64_t>(record.first_registered_ms));
  const std::string last = wi::inspect_util::IsoTimeMs(static_cast<int64_t>(record.last_registered_ms));
  const auto* ident = schema.schema().file_ident();
  const std::string identifier = ident == nullptr ? "" : ident->str();
  if (json) {
    std::cout << "{\"type\":" << wi::JsonString(type) << ",\"version\":" << version << ",\"hash\":\"" << hash
              << "\",\"root_table\":" << wi::JsonString(schema.RootName())
              << ",\"file_identifier\":" << wi::JsonString(identifier) << ",\"first_registered\":\"" << first
              << "\",\"last_registered\":\"" << last << "\",\"bytes\":" << record.binary_schema.size()
              << ",\"fbs\":" << wi::JsonString(source) << "}\n";
    return;
  }
  std::cout << "# " << type << " version " << version << ": hash " << hash << ", root " << schema.RootName()
            << ", identifier \"" << identifier << "\", " << record.binary_schema.size() << " bytes\n"
            << "# first registered " << first << ", last registered " << last << "\n"
            << source << (source.empty() || source.back() == '\n' ? "" : "\n");
}

int RunShow(const std::string& dir, const std::string& type, uint32_t only_version, bool json) {
  wi::inspect_util::SecondaryView view;
  if (Status s = wi::inspect_util::OpenSecondary(dir, &view); !s.ok()) return Fail("schema show", s);
  std::vector<storage::SchemaRecord> accepted;
  if (Status s = wi::LoadAcceptedSchemas(*view.db, type, &accepted); !s.ok()) return Fail("schema show", s);
  if (accepted.empty()) return Fail("schema show", Status::NotFound("no schema of " + type + " in " + dir));
  if (only_version > accepted.size()) {
    return Fail("schema show", Status::NotFound(type + " has " + std::to_string(accepted.size()) +
                                                " schema versions, not " + std::to_string(only_version)));
  }
  for (size_t i = 0; i < accepted.size(); ++i) {
    if (only_version != 0 && i + 1 != only_version) continue;
    auto schema = wi::BinarySchema::FromBytes(accepted[i].binary_schema);
    if (!schema.ok()) return Fail("schema show", schema.status());
    if (!json && i > 0 && only_version == 0) std::cout << "\n";
    ShowVersion(type, i + 1, accepted[i], *schema, wi::SchemaSourceText(*schema), json);
  }
  return 0;
}

// Writes `text` to `path` unless it holds it already: a build that
// regenerates the same code recompiles nothing.
Status WriteIfChanged(const std::string& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (in && std::string(std::istreambuf_iterator<char>(in), {}) == text) return Status::OK();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) return Status::IOError("cannot write " + path);
  return Status::OK();
}

int RunGenerate(const std::vector<std::string>& paths, const std::string& function, const std::string& header,
                const std::string& source) {
  std::vector<wi::BoundSchema> bound;
  for (const std::string& path : paths) {
    auto schema = LoadSchema(path);
    if (!schema.ok()) return Fail("schema generate", schema.status());
    auto binding = wi::BindSchema(path, *schema);
    if (!binding.ok()) return Fail("schema generate", binding.status());
    bound.push_back(std::move(*binding));
  }
  const std::string header_name = std::filesystem::path(header).filename().string();
  auto code = wi::GenerateBindings(bound, function, header_name);
  if (!code.ok()) return Fail("schema generate", code.status());
  if (Status s = WriteIfChanged(header, code->header); !s.ok()) return Fail("schema generate", s);
  if (Status s = WriteIfChanged(source, code->source); !s.ok()) return Fail("schema generate", s);
  return 0;
}

struct Values {
  std::vector<std::string> paths, include_dirs;
  std::string function, header, source;
  std::string old_path, new_path, type, dir;
  uint32_t version = 0;
  bool json = false;
};

}  // namespace

void AddSchemaCommand(CLI::App* app, Runners* runners) {
  CLI::App* schema = app->add_subcommand("schema", "Event contracts: FlatBuffers schemas of event types");
  schema->require_subcommand(1);
  auto v = std::make_shared<Values>();
  CLI::App* check = schema->add_subcommand(
      "check",
      "Whether NEW may replace OLD as the schema of one event type: exit 0 when it may, 1 with one line per "
      "violation, 2 on bad input. OLD and NEW are .fbs sources or .bfbs binary schemas; OLD may be a database "
      "directory, then NEW is checked against every version of --type it holds.");
  check->add_option("old", v->old_path, "The schema in use, or a database")->required();
  check->add_option("new", v->new_path, "The proposed schema")->required();
  check->add_option("--type", v->type, "With a database: the event type");
  check
      ->add_option("-I,--include-dir", v->include_dirs,
                   "Where a source's includes are looked up after its own folder (repeatable, in order)")
      ->check(CLI::ExistingDirectory);
  runners->push_back([check, v]() -> std::optional<int> {
    if (!check->parsed()) return std::nullopt;
    return RunCheck(v->old_path, v->new_path, v->type, v->include_dirs);
  });
  CLI::App* list = schema->add_subcommand("ls", "The event types with schemas in a database, and their versions");
  list->add_option("dir", v->dir, "Database directory")->required();
  list->add_flag("--json", v->json, "Print JSON Lines: one object per type");
  runners->push_back([list, v]() -> std::optional<int> {
    if (!list->parsed()) return std::nullopt;
    return RunList(v->dir, v->json);
  });
  CLI::App* show = schema->add_subcommand(
      "show",
      "Every version of one event type's schema in a database: its hash, root table, registration times "
      "and .fbs source");
  show->add_option("dir", v->dir, "Database directory")->required();
  show->add_option("type", v->type, "The event type")->required();
  show->add_option("--version", v->version, "Only this version (1 is the first)")->check(CLI::PositiveNumber);
  show->add_flag("--json", v->json, "Print JSON Lines: one object per version, the source in \"fbs\"");
  runners->push_back([show, v]() -> std::optional<int> {
    if (!show->parsed()) return std::nullopt;
    return RunShow(v->dir, v->type, v->version, v->json);
  });
  CLI::App* generate = schema->add_subcommand(
      "generate",
      "C++ that binds event schemas to their event types (walbus/flatbuffers.h) and a function that "
      "registers them; walbus_add_event_schemas runs it on the .bfbs files flatc wrote");
  generate->add_option("schemas", v->paths, "Binary schemas (.bfbs) or sources (.fbs), one root table each")
      ->required();
  generate->add_option("--function", v->function, "The registration function, e.g. orders::RegisterEventSchemas")
      ->required();
  generate->add_option("--header", v->header, "The header to write")->required();
  generate->add_option("--source", v->source, "The source to write")->required();
  runners->push_back([generate, v]() -> std::optional<int> {
    if (!generate->parsed()) return std::nullopt;
    return RunGenerate(v->paths, v->function, v->header, v->source);
  });
}

}  // namespace walbus::tools
