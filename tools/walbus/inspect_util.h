// The helpers the inspection reports share (tools/walbus/inspect.cc,
// tools/walbus/inspect_events.cc): a read-only view of a database, and the text and
// JSON formatting of untrusted values.
#ifndef WALBUS_TOOLS_WALBUS_INSPECT_UTIL_H_
#define WALBUS_TOOLS_WALBUS_INSPECT_UTIL_H_

#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bus/dispatch/recovery.h"
#include "bus/util/escape.h"
#include "storage/db.h"
#include "tools/walbus/payload_json.h"
#include "walbus/event.h"
#include "walbus/status.h"

namespace walbus::internal::inspect_util {

// Envelopes read back are decoded with this payload cap.
constexpr size_t kMaxInspectPayloadBytes = 64u << 20;

// A secondary instance keeps its own info log; it lives in a private
// temporary directory for the duration of one inspection.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "walbus-inspect-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A read-only view of a database: a secondary instance and its scratch
// directory, the instance closed before the directory is removed.
struct SecondaryView {
  ScratchDir scratch;
  std::unique_ptr<storage::Db> db;  // declared last: destroyed first
};

Status OpenSecondary(const std::string& dir, SecondaryView* view);

using internal::JsonString;
using internal::TextSafe;
bool IsValidTextWithoutControls(std::string_view s);
// "application/json", in any case, with or without parameters.
bool IsJsonContentType(std::string_view ct);
// Hex of the first max_bytes bytes.
std::string Hex(std::string_view s, size_t max_bytes);
// "2024-05-01T12:34:56.789Z"; the bare number when out of range.
std::string IsoTimeMs(int64_t unix_ms);
std::string IsoTime(std::chrono::system_clock::time_point t);
// Left-aligned columns, the last one not padded; widths capped.
std::string Table(const std::vector<std::vector<std::string>>& rows);
// One "label  value" line of a detail view.
void Field(std::ostringstream& o, std::string_view label, std::string_view value);
// "<n> bytes: <hex of the first bytes>".
std::string HexSummary(std::string_view bytes);
// Subscriber ids to names, from the registry.
std::map<uint32_t, std::string> SubscriberNames(const RecoveredState& state);
// The key prefix of one subscriber's entries (InvalidArgument for an
// unknown name), or the empty prefix for an empty name.
Status SubscriberPrefix(const RecoveredState& state, const std::string& subscriber, std::string* prefix);

// The event's attributes as detail lines, and its payload in one value:
// as its type's schema reads it (`payload`, when it did), text for JSON
// that is valid UTF-8, else a hex summary.
void EventFieldsText(std::ostringstream& o, const Event& ev);
std::string PayloadText(const Event& ev, const PayloadReading& payload);
// The event's attributes and payload as JSON members, each preceded by a
// comma (to follow members already written).
void EventFieldsJson(std::ostringstream& o, const Event& ev, const PayloadReading& payload);

}  // namespace walbus::internal::inspect_util

#endif  // WALBUS_TOOLS_WALBUS_INSPECT_UTIL_H_
