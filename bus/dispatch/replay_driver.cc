#include "bus/dispatch/replay_driver.h"

#include <algorithm>
#include <cassert>

#include "bus/core/envelope.h"
#include "bus/dispatch/replay.h"
#include "bus/util/unix_time.h"

namespace walbus::internal {
namespace {

// Replayed events selected but not completed, per subscriber; past it the
// replay waits. Bounds the memory a replay holds like the live window.
constexpr size_t kReplayWindow = 1024;
constexpr size_t kReplayScanChunk = 256;

}  // namespace

ReplayDriver::ReplayDriver(storage::Db* db, Committer* committer, const Clock* clock, const BusLog* log,
                           size_t max_payload_bytes)
    : db_(db), committer_(committer), clock_(clock), log_(log), max_payload_bytes_(max_payload_bytes) {
  assert(db_ != nullptr && committer_ != nullptr && clock_ != nullptr && log_ != nullptr);
}

void ReplayDriver::Cancel(const Subscribers& subs, uint64_t replay_id, std::string cancelled_by, std::string reason) {
  for (auto& sub : subs) {
    if (sub->replay == nullptr || sub->replay->id != replay_id || sub->replay->cancelled) continue;
    sub->replay->record.cancelled_by = std::move(cancelled_by);
    sub->replay->record.cancel_reason = std::move(reason);
    DropQueued(sub.get());
    return;  // a replay runs through one subscriber
  }
}

void ReplayDriver::Begin(const Subscribers& subs, uint64_t replay_id, storage::ReplayRecord record) {
  assert(IsRunning(record));
  auto it = std::find_if(subs.begin(), subs.end(), [&](const auto& s) { return s->id == record.subscriber_id; });
  if (it == subs.end()) return;  // resumes when the subscriber is active again
  Subscriber* sub = it->get();
  if (sub->replay != nullptr) {
    log_->logger().error("walbus: replay {} of {} not started: replay {} is running", replay_id, sub->name,
                         sub->replay->id);
    return;
  }
  auto job = std::make_unique<ReplayJob>();
  job->id = replay_id;
  job->record = std::move(record);
  job->scan_from = std::max(job->record.next_seq, job->record.from_seq);
  job->ids = SelectedIds(job->record);
  job->dirty = true;
  sub->replay = std::move(job);
}

void ReplayDriver::DropQueued(Subscriber* sub) {
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

bool ReplayDriver::CountOutcome(Subscriber* sub, const Event& event, Message::Kind kind) {
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

ReplayDriver::Pumped ReplayDriver::Pump(Subscriber* sub) {
  Pumped pumped;
  ReplayJob* job = sub->replay.get();
  if (job == nullptr) return pumped;
  storage::ReplayRecord& r = job->record;
  auto capped = [&] { return r.max_events != 0 && r.selected >= r.max_events; };
  while (!job->cancelled && !sub->paused && job->in_flight.size() < kReplayWindow && job->scan_from <= r.to_seq &&
         !capped()) {
    const uint64_t from = job->scan_from;
    bool any = false;
    Status s = db_->ScanOutbox(from, kReplayScanChunk, [&](uint64_t seq, std::string_view bytes) {
      if (seq > r.to_seq || capped()) return false;
      any = true;
      job->scan_from = seq + 1;
      auto event = std::make_shared<Event>();
      if (!DecodeEnvelope(bytes, max_payload_bytes_, event.get()).ok()) return true;  // quarantined live
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
      pumped.subjects.push_back(event->subject);
      sub->holds.QueueBack(std::move(event));
      return job->in_flight.size() < kReplayWindow;
    });
    if (!s.ok()) {
      log_->logger().error("walbus: replay {} reading the outbox at seq {} failed (retried): {}", job->id, from,
                           s.ToString());
      pumped.storage_failed = true;
      break;
    }
    if (!any) job->scan_from = r.to_seq + 1;  // nothing more is kept up to to_seq
  }
  std::sort(pumped.subjects.begin(), pumped.subjects.end());
  pumped.subjects.erase(std::unique(pumped.subjects.begin(), pumped.subjects.end()), pumped.subjects.end());
  const bool ended = job->cancelled || job->scan_from > r.to_seq || capped();
  if (ended && job->in_flight.empty()) End(sub);
  return pumped;
}

void ReplayDriver::End(Subscriber* sub) {
  ReplayJob* job = sub->replay.get();
  storage::ReplayRecord& r = job->record;
  r.state = static_cast<uint8_t>(job->cancelled ? ReplayState::kCancelled : ReplayState::kDone);
  r.ended_ms = ToUnixMillisUnsigned(clock_->WallNow());
  job->dirty = true;
  WriteSet scope;
  AddReplayRecord(db_, &scope, job);
  if (Status s = committer_->CommitOne(&scope, /*sync=*/true); !s.ok()) {
    r.state = static_cast<uint8_t>(ReplayState::kRunning);
    job->dirty = true;
    log_->logger().warn("walbus: recording the end of replay {} failed (retried): {}", job->id, s.ToString());
    return;
  }
  log_->logger().info("walbus: replay {} of {} {}: {} selected, {} delivered, {} skipped, {} failed", job->id,
                      sub->name, job->cancelled ? "cancelled" : "done", r.selected, r.delivered, r.skipped, r.failed);
  sub->replay.reset();
}

}  // namespace walbus::internal
