// The views of scheduled events: the pending ones in due order, and where
// one stands.
#include <sstream>

#include "bus/core/envelope.h"
#include "bus/core/timeline.h"
#include "storage/db.h"
#include "storage/keys.h"
#include "storage/records.h"
#include "tools/walbus/inspect.h"
#include "tools/walbus/inspect_util.h"

namespace walbus::internal {
namespace {

using namespace inspect_util;

// The rewind the database last stored: timeline ms less it is wall time.
Status StoredRewind(const storage::Db& db, uint64_t* rewind_ms) {
  std::string value;
  bool found = false;
  if (Status s = db.Get(db.cf(storage::Cf::kMeta), storage::kMetaTimeline, &value, &found); !s.ok()) return s;
  Timeline::State state;
  if (found && !Timeline::Decode(value, &state)) return Status::Corruption("the stored timeline is malformed");
  *rewind_ms = state.rewind_ms;
  return Status::OK();
}

int64_t ToWallMs(uint64_t timeline_ms, uint64_t rewind_ms) {
  return static_cast<int64_t>(timeline_ms) - static_cast<int64_t>(rewind_ms);
}

// Fills the pending entry of the timer at `key`.
ScheduledEntry PendingEntry(std::string_view key, std::string_view value, uint64_t rewind_ms,
                            const PayloadReader& payloads) {
  ScheduledEntry e;
  e.state = "pending";
  uint64_t due_ms = 0;
  storage::TimerRecord record;
  if (!storage::ParseTimerKey(key, &due_ms, &e.id)) {
    e.state = "unreadable";
    e.error = "malformed timer key";
    return e;
  }
  e.at_ms = ToWallMs(due_ms, rewind_ms);
  if (!storage::DecodeTimer(value, &record)) {
    e.error = "malformed timer record";
    return e;
  }
  e.scheduled_ms = static_cast<int64_t>(record.scheduled_wall_ms);
  Status s = DecodeEnvelope(record.envelope, kMaxInspectPayloadBytes, &e.event);
  if (!s.ok()) {
    e.error = s.message();
    return e;
  }
  e.event_ok = true;
  e.payload = payloads.Read(e.event.type, e.event.data, e.event.schema_version);
  return e;
}

}  // namespace

Status ListScheduled(const std::string& dir, std::vector<ScheduledEntry>* out, size_t limit) {
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  storage::CfHandle* timers = view.db->cf(storage::Cf::kTimers);
  if (timers == nullptr) return Status::OK();  // written before scheduled events: none
  uint64_t rewind_ms = 0;
  if (Status s = StoredRewind(*view.db, &rewind_ms); !s.ok()) return s;
  PayloadReader payloads;
  if (Status s = payloads.Load(*view.db); !s.ok()) return s;
  return view.db->ScanRange(timers, nullptr, {}, false, [&](std::string_view k, std::string_view v) {
    if (out->size() >= limit) return false;
    out->push_back(PendingEntry(k, v, rewind_ms, payloads));
    return true;
  });
}

Status FindScheduled(const std::string& dir, const EventId& id, ScheduledEntry* out, bool* found) {
  *found = false;
  SecondaryView view;
  if (Status s = OpenSecondary(dir, &view); !s.ok()) return s;
  std::string value;
  if (Status s = view.db->Get(view.db->cf(storage::Cf::kVersions), storage::TimerStateKey(id), &value, found);
      !s.ok() || !*found) {
    return s;
  }
  uint64_t rewind_ms = 0;
  if (Status s = StoredRewind(*view.db, &rewind_ms); !s.ok()) return s;
  *out = ScheduledEntry{};
  out->id = id;
  storage::TimerState state{};
  uint64_t ms = 0;
  if (value.size() != 8 || !storage::ParseTimerStateValue(storage::GetBe64(value), &state, &ms)) {
    out->state = "unreadable";
    out->error = "malformed state record";
    return Status::OK();
  }
  out->at_ms = ToWallMs(ms, rewind_ms);
  if (state == storage::TimerState::kFired) out->state = "fired";
  if (state == storage::TimerState::kCancelled) out->state = "cancelled";
  if (state != storage::TimerState::kPending) return Status::OK();
  PayloadReader payloads;
  if (Status s = payloads.Load(*view.db); !s.ok()) return s;
  std::string record;
  bool has_record = false;
  const std::string key = storage::TimerKey(ms, id);
  storage::CfHandle* timers = view.db->cf(storage::Cf::kTimers);
  if (timers != nullptr) {
    if (Status s = view.db->Get(timers, key, &record, &has_record); !s.ok()) return s;
  }
  if (!has_record) {
    out->state = "pending";
    out->error = "its timer record is missing";
    return Status::OK();
  }
  *out = PendingEntry(key, record, rewind_ms, payloads);
  return Status::OK();
}

std::string ScheduledTable(const std::vector<ScheduledEntry>& entries) {
  if (entries.empty()) return "no scheduled events pending\n";
  std::vector<std::vector<std::string>> rows = {{"DUE", "ID", "TYPE", "SUBJECT"}};
  for (const ScheduledEntry& e : entries) {
    if (!e.event_ok) {
      rows.push_back({IsoTimeMs(e.at_ms), e.id.ToString(), "unreadable", TextSafe(e.error)});
      continue;
    }
    rows.push_back({IsoTimeMs(e.at_ms), e.id.ToString(), TextSafe(e.event.type), TextSafe(e.event.subject)});
  }
  return Table(rows);
}

std::string ScheduledText(const ScheduledEntry& e) {
  std::ostringstream o;
  Field(o, "id", e.id.ToString());
  Field(o, "state", e.state);
  const char* at_label = e.state == "pending" ? "due" : e.state == "fired" ? "fired at" : "cancelled at";
  if (e.state != "unreadable") Field(o, at_label, IsoTimeMs(e.at_ms));
  if (!e.error.empty()) Field(o, "error", TextSafe(e.error));
  if (e.state != "pending" || !e.event_ok) return o.str();
  Field(o, "scheduled at", IsoTimeMs(e.scheduled_ms));
  EventFieldsText(o, e.event);
  Field(o, "payload", PayloadText(e.event, e.payload));
  return o.str();
}

std::string ScheduledJson(const ScheduledEntry& e) {
  std::ostringstream o;
  o << "{\"id\":\"" << e.id.ToString() << "\",\"state\":\"" << e.state << "\",\"at\":" << JsonString(IsoTimeMs(e.at_ms))
    << ",\"at_ms\":" << e.at_ms;
  if (!e.error.empty()) o << ",\"error\":" << JsonString(e.error);
  if (e.state == "pending" && e.event_ok) {
    o << ",\"scheduled_at\":" << JsonString(IsoTimeMs(e.scheduled_ms));
    EventFieldsJson(o, e.event, e.payload);
  }
  o << "}";
  return o.str();
}

}  // namespace walbus::internal
