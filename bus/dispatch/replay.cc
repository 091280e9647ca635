// Replays: OperatorActions::StartReplay and friends (the record and its checks). The
// dispatcher's side (selecting events and running them in line) is
// ReplayDriver's.
#include "bus/dispatch/replay.h"

#include <algorithm>
#include <cassert>

#include "bus/core/envelope.h"
#include "bus/util/rfc3339.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

std::string SelectionText(const storage::ReplayRecord& r) {
  std::string text = "seq " + std::to_string(r.from_seq) + ".." + std::to_string(r.to_seq);
  auto time_text = [](int64_t ms) { return FormatRfc3339(FromUnixMillis(ms)); };
  if (r.since_ms != 0) text += "; since " + time_text(r.since_ms);
  if (r.until_ms != 0) text += "; until " + time_text(r.until_ms);
  if (!r.types.empty()) {
    text += "; types ";
    for (size_t i = 0; i < r.types.size(); ++i) text += (i ? "," : "") + r.types[i];
  }
  if (!r.subject.empty()) text += "; subject " + r.subject;
  if (!r.ids.empty()) text += "; " + std::to_string(r.ids.size()) + " event ids";
  if (r.max_events != 0) text += "; at most " + std::to_string(r.max_events);
  if (!r.cleared.empty()) {
    text += "; cleared ";
    for (size_t i = 0; i < r.cleared.size(); ++i) text += (i ? "," : "") + r.cleared[i];
  }
  return text;
}

// What a rebuild (clear_column_families) needs of the request itself.
Status CheckRebuild(const ReplayRequest& request) {
  if (request.clear_column_families.empty()) return Status::OK();
  if (request.mode != ReplayMode::kFreshScope) {
    return Status::InvalidArgument("replay: clearing column families needs mode kFreshScope (fresh-scope)");
  }
  const bool filtered = request.from_seq != 0 || request.to_seq != 0 || request.since.time_since_epoch().count() != 0 ||
                        request.until.time_since_epoch().count() != 0 || !request.types.empty() ||
                        !request.subject.empty() || !request.ids.empty() || request.max_events != 0;
  if (filtered) {
    return Status::InvalidArgument(
        "replay: a rebuild that clears column families replays every event the subscriber took; a filter would "
        "leave the cleared state partial");
  }
  if (request.clear_column_families.size() > storage::kMaxReplayListEntries) {
    return Status::InvalidArgument("replay: too many column families to clear");
  }
  return Status::OK();
}

}  // namespace

Status RecordFromRequest(const ReplayRequest& request, uint32_t subscriber_id, uint64_t checkpoint,
                         const std::string& handler_version, uint64_t now_ms, storage::ReplayRecord* record) {
  if (request.action.operator_name.empty() || request.action.reason.empty()) {
    return Status::InvalidArgument("a replay needs an operator name and a reason");
  }
  if (request.mode != ReplayMode::kSameInbox && request.mode != ReplayMode::kFreshScope) {
    return Status::InvalidArgument("unknown replay mode");
  }
  if (request.from_seq != 0 && request.to_seq != 0 && request.from_seq > request.to_seq) {
    return Status::InvalidArgument("replay: from_seq " + std::to_string(request.from_seq) + " is above to_seq " +
                                   std::to_string(request.to_seq));
  }
  const int64_t since = ToUnixMillis(request.since), until = ToUnixMillis(request.until);
  if (since < 0 || until < 0) return Status::InvalidArgument("replay: times before 1970 are not taken");
  if (since != 0 && until != 0 && since >= until) return Status::InvalidArgument("replay: since is not before until");
  if (request.types.size() > storage::kMaxReplayListEntries || request.ids.size() > storage::kMaxReplayListEntries) {
    return Status::InvalidArgument("replay: at most " + std::to_string(storage::kMaxReplayListEntries) +
                                   " types and as many event ids");
  }
  for (const std::string& type : request.types) {
    if (Status s = ValidateEventType(type); !s.ok()) return s;
  }
  if (request.subject.size() > 1024) return Status::InvalidArgument("replay: subject longer than 1024 bytes");
  if (request.action.operator_name.size() > 1024 || request.action.reason.size() > 1024) {
    return Status::InvalidArgument("replay: operator and reason are at most 1024 bytes each");
  }
  if (Status s = CheckRebuild(request); !s.ok()) return s;
  *record = storage::ReplayRecord{};
  record->subscriber_id = subscriber_id;
  record->subscriber = request.subscriber;
  record->mode = static_cast<uint8_t>(request.mode);
  record->state = static_cast<uint8_t>(ReplayState::kRunning);
  record->operator_name = request.action.operator_name;
  record->reason = request.action.reason;
  record->handler_version = handler_version;
  record->from_seq = std::max<uint64_t>(request.from_seq, 1);
  record->to_seq = request.to_seq != 0 ? std::min(request.to_seq, checkpoint) : checkpoint;
  record->since_ms = since;
  record->until_ms = until;
  record->types = request.types;
  record->subject = request.subject;
  for (const EventId& id : request.ids) record->ids.emplace_back(storage::IdBytes(id));
  record->max_events = request.max_events;
  record->started_ms = now_ms;
  record->next_seq = record->from_seq;
  record->cleared = request.clear_column_families;
  return Status::OK();
}

ReplayReport ReportFromRecord(uint64_t replay_id, const storage::ReplayRecord& r) {
  ReplayReport report;
  report.replay_id = replay_id;
  report.subscriber = r.subscriber;
  report.mode = static_cast<ReplayMode>(r.mode);
  report.state = static_cast<ReplayState>(r.state);
  report.operator_name = r.operator_name;
  report.reason = r.reason;
  report.handler_version = r.handler_version;
  report.selection = SelectionText(r);
  report.started = FromUnixMillis(static_cast<int64_t>(r.started_ms));
  if (r.ended_ms != 0) report.ended = FromUnixMillis(static_cast<int64_t>(r.ended_ms));
  report.selected = r.selected;
  report.delivered = r.delivered;
  report.skipped = r.skipped;
  report.failed = r.failed;
  report.next_seq = r.next_seq;
  report.error = r.error;
  report.cancelled_by = r.cancelled_by;
  report.cancel_reason = r.cancel_reason;
  report.cleared = r.cleared;
  return report;
}

std::unordered_set<std::string> SelectedIds(const storage::ReplayRecord& record) {
  return std::unordered_set<std::string>(record.ids.begin(), record.ids.end());
}

bool ReplaySelects(const storage::ReplayRecord& r, const std::unordered_set<std::string>& ids, const Event& event) {
  const int64_t time = ToUnixMillis(event.time);
  if (r.since_ms != 0 && time < r.since_ms) return false;
  if (r.until_ms != 0 && time >= r.until_ms) return false;
  if (!r.types.empty() && std::find(r.types.begin(), r.types.end(), event.type) == r.types.end()) return false;
  if (!r.subject.empty() && event.subject != r.subject) return false;
  return ids.empty() || ids.count(std::string(storage::IdBytes(event.id))) != 0;
}

void AddReplayRecord(storage::Db* db, WriteSet* writes, ReplayJob* job) {
  if (!job->dirty) return;
  job->record.next_seq = job->NextSeq();
  writes->Put(db->cf(storage::Cf::kReplays), storage::ActionKey(job->id), storage::EncodeReplay(job->record));
  job->dirty = false;
}

Status LoadReplays(const storage::Db& db, const std::function<void(uint64_t id, storage::ReplayRecord&)>& visit) {
  return db.Scan(storage::Cf::kReplays, storage::kActionKeyPrefix, SIZE_MAX,
                 [&](std::string_view key, std::string_view value) {
                   uint64_t id = 0;
                   storage::ReplayRecord record;
                   // Dead-letter actions share the space (as JSON): skipped.
                   if (storage::ParseActionKey(key, &id) && storage::DecodeReplay(value, &record)) visit(id, record);
                   return true;
                 });
}

}  // namespace walbus::internal
