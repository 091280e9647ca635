// CheckPinnedSchema: an event type's schema against the versions an
// application's repository pinned, for its own contract tests.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "bus/core/envelope.h"
#include "bus/core/payload_contract.h"
#include "bus/core/schema_compat.h"
#include "walbus/contracts.h"

namespace walbus {
namespace {

namespace fs = std::filesystem;

// The pinned versions under `dir`, by version: the files v<N>.bfbs.
Status ListPins(const fs::path& dir, std::map<uint64_t, fs::path>* pins) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::OK();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 7 || name[0] != 'v' || name.compare(name.size() - 5, 5, ".bfbs") != 0) continue;
    const std::string digits = name.substr(1, name.size() - 6);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    (*pins)[std::stoull(digits)] = it->path();
  }
  if (ec) return Status::IOError("cannot read " + dir.string() + ": " + ec.message());
  return Status::OK();
}

Result<internal::BinarySchema> ReadPin(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) return Status::IOError("cannot read " + path.string());
  auto schema = internal::BinarySchema::FromBytes(bytes.str());
  if (!schema.ok()) return Status::Corruption(path.string() + ": " + schema.status().message());
  return schema;
}

bool PinningAsked() {
  const char* value = std::getenv(kPinContractsVariable);
  return value != nullptr && std::string_view(value) == "1";
}

Status Pin(const fs::path& path, std::string_view bytes) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (ec || !out.flush()) return Status::IOError("cannot write " + path.string());
  return Status::OK();
}

}  // namespace

Status CheckPinnedSchema(std::string_view type_name, std::string_view binary_schema, std::string_view pinned_dir) {
  const std::string type(type_name);
  if (Status s = internal::ValidateEventType(type); !s.ok()) return s;
  auto schema = internal::BinarySchema::FromBytes(std::string(binary_schema));
  if (!schema.ok()) return Status::InvalidArgument("schema of " + type + ": " + schema.status().message());
  // A schema the bus would refuse to check payloads with is refused here.
  if (auto contract = internal::PayloadContract::Make(type, 0, *schema); !contract.ok()) return contract.status();
  const fs::path dir = fs::path(pinned_dir) / type;
  std::map<uint64_t, fs::path> pins;
  if (Status s = ListPins(dir, &pins); !s.ok()) return s;
  std::vector<std::string> violations;
  bool pinned = false;
  for (const auto& [version, path] : pins) {
    auto old = ReadPin(path);
    if (!old.ok()) return old.status();
    pinned = pinned || old->bytes() == schema->bytes();
    for (const std::string& line : internal::CompatibilityViolations(*old, *schema)) {
      violations.push_back("against " + path.filename().string() + ": " + line);
    }
  }
  if (!violations.empty()) {
    std::string message = "schema of " + type + " breaks " + std::to_string(pins.size()) + " pinned in " +
                          dir.string() + "; publish the change as a new type version instead:";
    for (const std::string& line : violations) message += "\n  " + line;
    return Status::InvalidArgument(message);
  }
  if (pinned) return Status::OK();
  const fs::path next = dir / ("v" + std::to_string(pins.empty() ? 1 : pins.rbegin()->first + 1) + ".bfbs");
  if (PinningAsked()) return Pin(next, schema->bytes());
  return Status::NotFound(
      std::string(pins.empty() ? "no schema of " + type + " is pinned"
                               : "the schema of " + type + " changed compatibly but is not pinned") +
      ": run with " + kPinContractsVariable + "=1 to pin it as " + next.string() + ", and commit that file");
}

}  // namespace walbus
