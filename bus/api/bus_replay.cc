// BusImpl's replays (walbus/bus.h: Replay, GetReplay, CancelReplay) and the
// records they keep: what the replay runs (bus/dispatch/replay.h) is the
// dispatcher's.
#include <algorithm>
#include <cassert>

#include "bus/api/bus_impl.h"
#include "bus/core/envelope.h"
#include "bus/core/state_reader.h"
#include "bus/dispatch/replay.h"
#include "bus/util/rfc3339.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

// A dry run lists at most this many seqs (it counts them all).
constexpr size_t kDryRunListedSeqs = 10000;

}  // namespace

Status BusImpl::NextActionId(uint64_t* id) {
  uint64_t last = 0;
  Status s = db_->Scan(storage::Cf::kReplays, storage::kActionKeyPrefix, SIZE_MAX,
                       [&](std::string_view key, std::string_view) {
                         storage::ParseActionKey(key, &last);
                         return true;
                       });
  *id = last + 1;
  return s;
}

// What `request` would run, with nothing changed: the report of a finished
// look (`record` is the request's, checked).
Result<ReplayReport> BusImpl::DryRunReplay(const ReplayRequest& request, storage::ReplayRecord record,
                                           const Subscriber* active, uint32_t sub_id, uint64_t now_ms) {
  // Nothing will run: the report is of a finished look.
  record.state = static_cast<uint8_t>(ReplayState::kDone);
  record.ended_ms = now_ms;
  ReplayReport report = ReportFromRecord(0, record);
  const std::unordered_set<std::string> ids = SelectedIds(record);
  Status scan = Status::OK();
  if (record.from_seq <= record.to_seq) {
    scan = db_->ScanOutbox(record.from_seq, SIZE_MAX, [&](uint64_t seq, std::string_view bytes) {
      if (seq > record.to_seq || (record.max_events != 0 && report.selected >= record.max_events)) return false;
      Event event;
      if (!DecodeEnvelope(bytes, options_.max_payload_bytes, &event).ok()) return true;
      if ((active != nullptr && !active->Matches(event.type)) || !ReplaySelects(record, ids, event)) return true;
      ++report.selected;
      if (report.seqs.size() < kDryRunListedSeqs) report.seqs.push_back(seq);
      if (request.mode == ReplayMode::kSameInbox) {
        std::string value;
        bool found = false;
        bool dead_letter = false;
        if (db_->Get(db_->cf(storage::Cf::kInbox),
                     storage::InboxKey(db_->inbox_layout(), sub_id, storage::IdBytes(event.id)), &value, &found)
                .ok() &&
            found &&
            db_->Get(db_->cf(storage::Cf::kDeadLetters), storage::SubscriberSeqKey(sub_id, seq), &value, &dead_letter)
                .ok() &&
            !dead_letter) {
          ++report.skipped;  // handled before: a same-inbox replay skips it
        }
      }
      return true;
    });
  }
  if (!scan.ok()) return scan;
  return report;
}

Status BusImpl::AddRebuildWrites(const ReplayRequest& request, uint32_t sub_id, uint64_t checkpoint, WriteSet* writes) {
  assert(std::none_of(registry_.by_name.begin(), registry_.by_name.end(), [sub_id](const auto& named) {
    return named.second.id == sub_id && named.second.active != nullptr;
  }));
  std::vector<storage::CfHandle*> clear;
  for (const std::string& name : request.clear_column_families) {
    Result<storage::CfHandle*> cf = app_cfs_.Find(name);
    if (!cf.ok()) return Status::InvalidArgument("replay: cannot clear: " + cf.status().message());
    clear.push_back(*cf);
  }
  uint64_t first_kept = committer_->last_seq() + 1;
  Status scan = db_->ScanOutbox(1, 1, [&](uint64_t seq, std::string_view) {
    first_kept = seq;
    return false;
  });
  if (!scan.ok()) return scan;
  if (first_kept > 1) {
    return Status::NotSupported("replay: events below seq " + std::to_string(first_kept) +
                                " are no longer kept, and a rebuild from cleared state needs every event the "
                                "subscriber took; keep them (Options::retain_events and friends)");
  }
  std::string prefix;
  storage::PutBe32(&prefix, sub_id);
  bool dead_letters = false;
  scan = db_->Scan(storage::Cf::kDeadLetters, prefix, 1, [&](std::string_view, std::string_view) {
    dead_letters = true;
    return false;
  });
  if (!scan.ok()) return scan;
  if (dead_letters) {
    return Status::NotSupported("replay: subscriber " + request.subscriber +
                                " has dead letters; they would run in the rebuild and again when redriven: redrive "
                                "or purge them first");
  }
  for (storage::CfHandle* cf : clear) {
    writes->AddOp(ClearAll(cf));
  }
  // What it handled above its checkpoint runs again, live, on the cleared
  // state: its inbox records go (events it never finished have none).
  Status inner;
  scan = db_->ScanOutbox(checkpoint + 1, SIZE_MAX, [&](uint64_t, std::string_view bytes) {
    Event event;
    if (!DecodeEnvelope(bytes, options_.max_payload_bytes, &event).ok()) return true;  // never delivered
    const std::string key = storage::InboxKey(db_->inbox_layout(), sub_id, storage::IdBytes(event.id));
    std::string value;
    bool handled = false;
    inner = db_->Get(db_->cf(storage::Cf::kInbox), key, &value, &handled);
    if (inner.ok() && handled) writes->Delete(db_->cf(storage::Cf::kInbox), key);
    return inner.ok();
  });
  return scan.ok() ? inner : scan;
}

Result<ReplayReport> BusImpl::Replay(const ReplayRequest& request) {
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  if (Status s = ValidateSubscriberName(request.subscriber); !s.ok()) return s;
  std::shared_ptr<Subscriber> active;
  uint32_t sub_id = 0;
  uint64_t checkpoint = 0;
  {
    MutexLock lock(&registry_.mu);
    auto it = registry_.by_name.find(request.subscriber);
    if (it == registry_.by_name.end()) return Status::InvalidArgument("no subscriber named " + request.subscriber);
    active = it->second.active;
    sub_id = it->second.id;
    checkpoint = active != nullptr ? active->watermark.load(std::memory_order_acquire) : it->second.durable.checkpoint;
  }
  if (request.mode == ReplayMode::kFreshScope) {
    // Not active here (a tool on a stopped database): as it was last
    // subscribed. A database from before registrations were kept records
    // the replay, and the next Subscribe decides.
    bool safe = true;
    if (active != nullptr) {
      safe = active->side_effect_safe;
    } else {
      std::string value;
      bool found = false;
      storage::RegistrationRecord registration;
      Status s = db_->Get(db_->cf(storage::Cf::kCheckpoints),
                          storage::CheckpointKey(sub_id, storage::CheckpointField::kRegistration), &value, &found);
      if (!s.ok()) return s;
      if (found && storage::DecodeRegistration(value, &registration)) safe = registration.side_effect_safe;
    }
    if (!safe) {
      return Status::NotSupported("subscriber " + request.subscriber +
                                  " is not side_effect_safe: a fresh-scope replay would run its effects again; "
                                  "use same-inbox, or declare SubscriberOptions::side_effect_safe");
    }
  }
  storage::ReplayRecord record;
  const uint64_t now_ms = ToUnixMillisUnsigned(options_.clock->WallNow());
  if (Status s = RecordFromRequest(request, sub_id, checkpoint, active != nullptr ? active->handler_version : "",
                                   now_ms, &record);
      !s.ok()) {
    return s;
  }
  const bool rebuild = !request.clear_column_families.empty();
  if (rebuild && active != nullptr) {
    return Status::Busy("replay: subscriber " + request.subscriber +
                        " is active in this process; a rebuild that clears state is recorded while it is not "
                        "(before Subscribe, or with the walbus tool on the stopped database)");
  }
  if (request.action.dry_run) {
    if (rebuild) {
      WriteSet unused;  // what would refuse it, refuses the dry run
      MutexLock registry_lock(&registry_.mu);
      const uint64_t checkpoint_now = registry_.by_name.find(request.subscriber)->second.durable.checkpoint;
      if (Status s = AddRebuildWrites(request, sub_id, checkpoint_now, &unused); !s.ok()) return s;
    }
    return DryRunReplay(request, std::move(record), active.get(), sub_id, now_ms);
  }
  MutexLock lock(&actions_mu_);
  bool running = false;
  if (Status s = LoadReplays(*db_,
                             [&](uint64_t, storage::ReplayRecord& r) {
                               running |=
                                   r.subscriber_id == sub_id && r.state == static_cast<uint8_t>(ReplayState::kRunning);
                             });
      !s.ok()) {
    return s;
  }
  if (running) return Status::Busy("subscriber " + request.subscriber + " has a replay running; cancel it or wait");
  uint64_t id = 0;
  if (Status s = NextActionId(&id); !s.ok()) return s;
  WriteSet scope;
  scope.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(id), storage::EncodeReplay(record));
  if (rebuild) {
    // Held to the commit: the subscriber cannot become active (Subscribe
    // takes it) between the check and the clear.
    MutexLock registry_lock(&registry_.mu);
    auto it = registry_.by_name.find(request.subscriber);
    if (it->second.active != nullptr)
      return Status::Busy("replay: subscriber " + request.subscriber + " became active");
    if (Status s = AddRebuildWrites(request, sub_id, it->second.durable.checkpoint, &scope); !s.ok()) return s;
    if (Status s = committer_->CommitOne(&scope, /*sync=*/true); !s.ok()) return s;
  } else if (Status s = committer_->CommitOne(&scope, /*sync=*/true); !s.ok()) {
    return s;
  }
  ReplayReport report = ReportFromRecord(id, record);
  log_->logger().info("walbus: {} {} of {} recorded by {} ({}): {}, {}", rebuild ? "rebuild" : "replay", id,
                      request.subscriber, request.action.operator_name, request.action.reason,
                      request.mode == ReplayMode::kSameInbox ? "same-inbox" : "fresh-scope", report.selection);
  if (active != nullptr) dispatcher_->StartReplay(id, std::move(record));
  return report;
}

Status BusImpl::ResumeReplays(const std::shared_ptr<Subscriber>& sub) {
  MutexLock lock(&actions_mu_);
  std::vector<std::pair<uint64_t, storage::ReplayRecord>> resume;
  if (Status s =
          LoadReplays(*db_,
                      [&](uint64_t id, storage::ReplayRecord& r) {
                        if (r.subscriber_id == sub->id && r.state == static_cast<uint8_t>(ReplayState::kRunning)) {
                          resume.emplace_back(id, std::move(r));
                        }
                      });
      !s.ok()) {
    return s;
  }
  for (auto& [id, record] : resume) {
    if (record.mode == static_cast<uint8_t>(ReplayMode::kFreshScope) && !sub->side_effect_safe) {
      // Recorded while the subscriber was not running here: checked now.
      record.state = static_cast<uint8_t>(ReplayState::kRefused);
      record.error = "subscriber is not side_effect_safe: a fresh-scope replay would run its effects again";
      record.ended_ms = ToUnixMillisUnsigned(options_.clock->WallNow());
      WriteSet scope;
      scope.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(id), storage::EncodeReplay(record));
      if (Status s = committer_->CommitOne(&scope, /*sync=*/true); !s.ok()) return s;
      log_->logger().warn("walbus: replay {} of {} refused: {}", id, sub->name, record.error);
      continue;
    }
    if (record.handler_version.empty()) record.handler_version = sub->handler_version;
    log_->logger().info("walbus: replay {} of {} resumes at seq {}", id, sub->name, record.next_seq);
    dispatcher_->StartReplay(id, std::move(record));
  }
  return Status::OK();
}

Result<ReplayReport> BusImpl::GetReplay(uint64_t replay_id) {
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  std::string value;
  bool found = false;
  if (Status s = db_->Get(db_->cf(storage::Cf::kReplays), storage::ActionKey(replay_id), &value, &found); !s.ok()) {
    return s;
  }
  storage::ReplayRecord record;
  if (!found || !storage::DecodeReplay(value, &record)) {
    return Status::NotFound("no replay " + std::to_string(replay_id));
  }
  return ReportFromRecord(replay_id, record);
}

Status BusImpl::CancelReplay(uint64_t replay_id, const OperatorAction& action) {
  if (action.operator_name.empty() || action.reason.empty()) {
    return Status::InvalidArgument("cancelling a replay needs an operator name and a reason");
  }
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  Result<ReplayReport> current = GetReplay(replay_id);
  if (!current.ok()) return current.status();
  const ReplayReport& report = *current;
  if (report.state != ReplayState::kRunning) return Status::OK();
  bool active = false;
  {
    MutexLock lock(&registry_.mu);
    auto it = registry_.by_name.find(report.subscriber);
    active = it != registry_.by_name.end() && it->second.active != nullptr;
  }
  if (active) {
    dispatcher_->CancelReplay(replay_id, action);  // it records the end once its events finish
    return Status::OK();
  }
  MutexLock lock(&actions_mu_);
  std::string value;
  bool found = false;
  storage::ReplayRecord record;
  if (Status s = db_->Get(db_->cf(storage::Cf::kReplays), storage::ActionKey(replay_id), &value, &found); !s.ok()) {
    return s;
  }
  if (!found || !storage::DecodeReplay(value, &record))
    return Status::NotFound("no replay " + std::to_string(replay_id));
  if (record.state != static_cast<uint8_t>(ReplayState::kRunning)) return Status::OK();
  record.state = static_cast<uint8_t>(ReplayState::kCancelled);
  record.ended_ms = ToUnixMillisUnsigned(options_.clock->WallNow());
  record.cancelled_by = action.operator_name;
  record.cancel_reason = action.reason;
  WriteSet scope;
  scope.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(replay_id), storage::EncodeReplay(record));
  return committer_->CommitOne(&scope, /*sync=*/true);
}

}  // namespace walbus::internal
