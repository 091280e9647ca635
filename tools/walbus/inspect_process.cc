// The views of process instances (walbus/process.h): the running ones of
// a process in key order, and one in full.
#include <algorithm>
#include <sstream>

#include "storage/db.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tools/walbus/inspect.h"
#include "tools/walbus/inspect_util.h"

namespace walbus::internal {
namespace {

using namespace inspect_util;

ProcessEntry MakeEntry(std::string key, std::string_view value, const PayloadReader& payloads) {
  ProcessEntry e;
  e.key = std::move(key);
  if (!storage::DecodeProcess(value, &e.record)) {
    e.error = "malformed instance record of " + std::to_string(value.size()) + " bytes";
    return e;
  }
  e.ok = true;
  if (!e.record.state_type.empty()) {
    e.state = payloads.Read(e.record.state_type, e.record.state, e.record.state_version);
  }
  return e;
}

// The timeout that falls due first, "name at time"; "-" without one.
std::string NextTimeout(const storage::ProcessRecord& r) {
  if (r.timeouts.empty()) return "-";
  auto first = std::min_element(r.timeouts.begin(), r.timeouts.end(),
                                [](const auto& a, const auto& b) { return a.due_wall_ms < b.due_wall_ms; });
  return TextSafe(first->name) + " at " + IsoTimeMs(static_cast<int64_t>(first->due_wall_ms));
}

// The state for people: its JSON when its schema reads it, the text when
// it is text, else a hex summary.
std::string StateText(const ProcessEntry& e) {
  if (!e.state.json.empty()) return e.state.json;
  if (IsValidTextWithoutControls(e.record.state)) return e.record.state;
  return Hex(e.record.state, kPayloadHexBytes);
}

}  // namespace

Status ListProcesses(const std::string& dir, const std::string& name, std::vector<ProcessEntry>* out, size_t limit) {
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  storage::CfHandle* processes = view.db->cf(storage::Cf::kProcesses);
  if (processes == nullptr) return Status::OK();  // written before process managers: none
  PayloadReader payloads;
  if (Status s = payloads.Load(*view.db); !s.ok()) return s;
  const std::string prefix = storage::ProcessKeyPrefix(name);
  std::string upper = prefix;
  upper.back() = '\1';  // just past every key of the prefix
  return view.db->ScanRange(processes, nullptr, storage::KeyBounds{prefix, upper}, false,
                            [&](std::string_view k, std::string_view v) {
                              if (out->size() >= limit) return false;
                              out->push_back(MakeEntry(std::string(k.substr(prefix.size())), v, payloads));
                              return true;
                            });
}

Status FindProcess(const std::string& dir, const std::string& name, const std::string& key, ProcessEntry* out,
                   bool* found) {
  *found = false;
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  storage::CfHandle* processes = view.db->cf(storage::Cf::kProcesses);
  if (processes == nullptr) return Status::OK();
  std::string value;
  if (Status s = view.db->Get(processes, storage::ProcessKey(name, key), &value, found); !s.ok() || !*found) return s;
  PayloadReader payloads;
  if (Status s = payloads.Load(*view.db); !s.ok()) return s;
  *out = MakeEntry(key, value, payloads);
  return Status::OK();
}

std::string ProcessTable(const std::vector<ProcessEntry>& entries) {
  if (entries.empty()) return "no instances running\n";
  std::vector<std::vector<std::string>> rows = {{"KEY", "STARTED", "UPDATED", "EVENTS", "NEXT TIMEOUT"}};
  for (const ProcessEntry& e : entries) {
    if (!e.ok) {
      rows.push_back({TextSafe(e.key), "unreadable", TextSafe(e.error), "", ""});
      continue;
    }
    const storage::ProcessRecord& r = e.record;
    rows.push_back({TextSafe(e.key), IsoTimeMs(static_cast<int64_t>(r.started_wall_ms)),
                    IsoTimeMs(static_cast<int64_t>(r.updated_wall_ms)), std::to_string(r.events_handled),
                    NextTimeout(r)});
  }
  return Table(rows);
}

std::string ProcessText(const ProcessEntry& e) {
  std::ostringstream o;
  Field(o, "key", TextSafe(e.key));
  if (!e.ok) {
    Field(o, "error", TextSafe(e.error));
    return o.str();
  }
  const storage::ProcessRecord& r = e.record;
  Field(o, "definition version", std::to_string(r.definition_version));
  Field(o, "started", IsoTimeMs(static_cast<int64_t>(r.started_wall_ms)));
  Field(o, "updated", IsoTimeMs(static_cast<int64_t>(r.updated_wall_ms)));
  Field(o, "events handled", std::to_string(r.events_handled));
  if (!r.state_type.empty())
    Field(o, "state type", r.state_type + " (schema version " + std::to_string(r.state_version) + ")");
  Field(o, "state", TextSafe(StateText(e)));
  for (const storage::ProcessTimeoutRecord& t : r.timeouts) {
    Field(o, "timeout",
          TextSafe(t.name) + " at " + IsoTimeMs(static_cast<int64_t>(t.due_wall_ms)) + " (event " + t.id.ToString() +
              ")");
  }
  for (const storage::ProcessHandledRecord& h : r.last_handled) {
    Field(o, "handled",
          IsoTimeMs(static_cast<int64_t>(h.handled_wall_ms)) + " seq " + std::to_string(h.seq) + " " +
              TextSafe(h.type) + " " + h.id.ToString());
  }
  return o.str();
}

std::string ProcessJson(const ProcessEntry& e) {
  std::ostringstream o;
  o << "{\"key\":" << JsonString(e.key);
  if (!e.ok) {
    o << ",\"error\":" << JsonString(e.error) << "}";
    return o.str();
  }
  const storage::ProcessRecord& r = e.record;
  o << ",\"definition_version\":" << r.definition_version << ",\"state_type\":" << JsonString(r.state_type)
    << ",\"state_version\":" << r.state_version
    << ",\"started\":" << JsonString(IsoTimeMs(static_cast<int64_t>(r.started_wall_ms)))
    << ",\"updated\":" << JsonString(IsoTimeMs(static_cast<int64_t>(r.updated_wall_ms)))
    << ",\"events_handled\":" << r.events_handled << ",\"state_size\":" << r.state.size();
  if (!e.state.json.empty()) {
    o << ",\"state_json\":" << e.state.json;
  } else if (IsValidTextWithoutControls(r.state)) {
    o << ",\"state_text\":" << JsonString(r.state);
  } else {
    o << ",\"state_hex\":" << JsonString(Hex(r.state, kPayloadHexBytes));
  }
  o << ",\"timeouts\":[";
  for (size_t i = 0; i < r.timeouts.size(); ++i) {
    const storage::ProcessTimeoutRecord& t = r.timeouts[i];
    o << (i ? "," : "") << "{\"name\":" << JsonString(t.name)
      << ",\"due\":" << JsonString(IsoTimeMs(static_cast<int64_t>(t.due_wall_ms)))
      << ",\"event_id\":" << JsonString(t.id.ToString()) << "}";
  }
  o << "],\"recent\":[";
  for (size_t i = 0; i < r.last_handled.size(); ++i) {
    const storage::ProcessHandledRecord& h = r.last_handled[i];
    o << (i ? "," : "") << "{\"id\":" << JsonString(h.id.ToString()) << ",\"seq\":" << h.seq
      << ",\"type\":" << JsonString(h.type)
      << ",\"at\":" << JsonString(IsoTimeMs(static_cast<int64_t>(h.handled_wall_ms))) << "}";
  }
  o << "]}";
  return o.str();
}

}  // namespace walbus::internal
