// Replays: Bus::Replay and friends (the record and its checks) and the
// dispatcher's side (selecting events and running them in line).
#include "bus/dispatch/replay.h"

#include <algorithm>
#include <cassert>

#include "bus/core/envelope.h"
#include "bus/dispatch/dispatcher.h"
#include "bus/util/rfc3339.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

// Replayed events selected but not completed, per subscriber; past it the
// replay waits. Bounds the memory a replay holds like the live window.
constexpr size_t kReplayWindow = 1024;
constexpr size_t kReplayScanChunk = 256;

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
  report.started_ms = r.started_ms;
  report.ended_ms = r.ended_ms;
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

// ---------------------------------------------------------------------------
// Dispatcher.

void Dispatcher::StartReplay(uint64_t replay_id, storage::ReplayRecord record) {
  assert(record.state == static_cast<uint8_t>(ReplayState::kRunning));
  Message m;
  m.kind = Message::Kind::kReplay;
  m.control = std::make_unique<Message::Control>();
  m.control->replay_id = replay_id;
  m.control->replay = std::move(record);
  Send(std::move(m));
}

void Dispatcher::CancelReplay(uint64_t replay_id, const OperatorAction& action) {
  Message m;
  m.kind = Message::Kind::kCancelReplay;
  m.control = std::make_unique<Message::Control>();
  m.control->replay_id = replay_id;
  m.control->replay.cancelled_by = action.operator_name;
  m.control->replay.cancel_reason = action.reason;
  Send(std::move(m));
}

void Dispatcher::HandleReplay(Message& m) {
  Message::Control& c = *m.control;
  if (m.kind == Message::Kind::kCancelReplay) {
    for (auto& sub : subs_) {
      if (sub->replay == nullptr || sub->replay->id != c.replay_id || sub->replay->cancelled) continue;
      sub->replay->record.cancelled_by = std::move(c.replay.cancelled_by);
      sub->replay->record.cancel_reason = std::move(c.replay.cancel_reason);
      DropQueuedReplay(sub.get());
    }
    return;
  }
  auto it = std::find_if(subs_.begin(), subs_.end(), [&](const auto& s) { return s->id == c.replay.subscriber_id; });
  if (it == subs_.end()) return;  // resumes when the subscriber is active again
  Subscriber* sub = it->get();
  if (sub->replay != nullptr) {
    config_.log->logger().error("walbus: replay {} of {} not started: replay {} is running", c.replay_id, sub->name,
                                sub->replay->id);
    return;
  }
  auto job = std::make_unique<ReplayJob>();
  job->id = c.replay_id;
  job->record = std::move(c.replay);
  job->scan_from = std::max(job->record.next_seq, job->record.from_seq);
  job->ids = SelectedIds(job->record);
  job->dirty = true;
  sub->replay = std::move(job);
}

void Dispatcher::DropQueuedReplay(Subscriber* sub) {
  ReplayJob* job = sub->replay.get();
  job->cancelled = true;
  job->dirty = true;
  auto queued = [&](const std::shared_ptr<const Event>& e) {
    if (!sub->out_of_line.Is(e->seq, OutOfLineEvents::Kind::kReplay)) return false;
    sub->out_of_line.Finish(e->seq);
    job->in_flight.erase(e->seq);
    return true;
  };
  sub->holds.DropWaiting(queued);
  for (auto it = sub->keys.begin(); it != sub->keys.end();) {
    auto& events = it->second.events;
    // The front event may be running (or waiting for its retry): it ends
    // as it would have.
    const auto first = events.begin() + (it->second.head_busy && !events.empty() ? 1 : 0);
    events.erase(std::remove_if(first, events.end(), queued), events.end());
    it = events.empty() ? sub->keys.erase(it) : std::next(it);
  }
}

bool Dispatcher::CountReplayOutcome(Subscriber* sub, const Event& event, Message::Kind kind) {
  if (sub->replay == nullptr || !sub->out_of_line.Is(event.seq, OutOfLineEvents::Kind::kReplay)) return false;
  storage::ReplayRecord& r = sub->replay->record;
  switch (kind) {
    case Message::Kind::kDone: ++r.delivered; break;
    case Message::Kind::kDeadLettered: ++r.failed; break;
    default:  // the inbox had it, or a stale version
      ++r.skipped;
      break;
  }
  sub->replay->dirty = true;
  return true;
}

void Dispatcher::AddReplayRecord(WriteSet* scope, ReplayJob* job) {
  if (!job->dirty) return;
  job->record.next_seq = job->NextSeq();
  scope->AddOp(Op{Op::Kind::kPut, db_->cf(storage::Cf::kReplays), storage::ActionKey(job->id),
                  storage::EncodeReplay(job->record)});
  job->dirty = false;
}

void Dispatcher::PumpReplay(Subscriber* sub) {
  ReplayJob* job = sub->replay.get();
  if (job == nullptr) return;
  storage::ReplayRecord& r = job->record;
  auto capped = [&] { return r.max_events != 0 && r.selected >= r.max_events; };
  std::vector<std::string> subjects;
  while (!job->cancelled && !sub->paused && job->in_flight.size() < kReplayWindow && job->scan_from <= r.to_seq &&
         !capped()) {
    const uint64_t from = job->scan_from;
    bool any = false;
    Status s = db_->ScanOutbox(from, kReplayScanChunk, [&](uint64_t seq, std::string_view bytes) {
      if (seq > r.to_seq || capped()) return false;
      any = true;
      job->scan_from = seq + 1;
      auto event = std::make_shared<Event>();
      if (!DecodeEnvelope(bytes, config_.max_payload_bytes, event.get()).ok()) return true;  // quarantined live
      event->seq = seq;
      if (!sub->Matches(event->type) || !ReplaySelects(r, job->ids, *event)) return true;
      ++r.selected;
      job->dirty = true;
      // An operator redrive runs it already; a parked subject is repaired
      // by redriving its dead letters (which releases it), not by a replay.
      if (sub->out_of_line.Contains(seq) || sub->holds.ParkedBehind(event->subject) != 0) {
        ++r.skipped;
        return true;
      }
      sub->out_of_line.StartReplay(seq);
      job->in_flight.insert(seq);
      subjects.push_back(event->subject);
      sub->holds.QueueBack(std::move(event));
      return job->in_flight.size() < kReplayWindow;
    });
    if (!s.ok()) {
      config_.log->logger().error("walbus: replay {} reading the outbox at seq {} failed (retried): {}", job->id, from,
                                  s.ToString());
      retry_soon_ = true;
      break;
    }
    if (!any) job->scan_from = r.to_seq + 1;  // nothing more is kept up to to_seq
  }
  std::sort(subjects.begin(), subjects.end());
  subjects.erase(std::unique(subjects.begin(), subjects.end()), subjects.end());
  for (const std::string& subject : subjects) {
    auto key = sub->keys.find(subject);
    if (key == sub->keys.end() || !key->second.head_busy) ApplyRedrive(sub, subject);
  }
  const bool ended = job->cancelled || job->scan_from > r.to_seq || capped();
  if (!ended || !job->in_flight.empty()) return;
  r.state = static_cast<uint8_t>(job->cancelled ? ReplayState::kCancelled : ReplayState::kDone);
  r.ended_ms = WallMillis();
  job->dirty = true;
  WriteSet scope;
  AddReplayRecord(&scope, job);
  if (Status s = committer_->CommitOne(&scope, /*sync=*/true); !s.ok()) {
    r.state = static_cast<uint8_t>(ReplayState::kRunning);
    job->dirty = true;
    config_.log->logger().warn("walbus: recording the end of replay {} failed (retried): {}", job->id, s.ToString());
    return;
  }
  config_.log->logger().info("walbus: replay {} of {} {}: {} selected, {} delivered, {} skipped, {} failed", job->id,
                             sub->name, job->cancelled ? "cancelled" : "done", r.selected, r.delivered, r.skipped,
                             r.failed);
  sub->replay.reset();
}

}  // namespace walbus::internal
