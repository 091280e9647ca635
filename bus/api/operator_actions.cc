#include "bus/api/operator_actions.h"

#include <algorithm>
#include <cassert>
#include <set>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bus/core/envelope.h"
#include "bus/core/state_reader.h"
#include "bus/dispatch/replay.h"
#include "bus/process/process_run.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

// A dry run lists at most this many seqs (it counts them all).
constexpr size_t kDryRunListedSeqs = 10000;

// Deletes of one removed subscriber's inbox records per commit.
constexpr size_t kInboxDeletesPerCommit = 4096;

// The key range of every record of subscriber `id` in a column family
// keyed by be32(subscriber id) first.
std::pair<std::string, std::string> SubscriberRange(uint32_t id) {
  assert(id < UINT32_MAX);
  std::string from, to;
  storage::PutBe32(&from, id);
  storage::PutBe32(&to, id + 1);
  return {from, to};
}

Status NeedsOperatorAndReason(const OperatorAction& action, std::string_view what) {
  if (action.operator_name.empty() || action.reason.empty()) {
    return Status::InvalidArgument(std::string(what) + " needs an operator name and a reason");
  }
  return Status::OK();
}

}  // namespace

OperatorActionsImpl::OperatorActionsImpl(Parts parts)
    : gate_(parts.gate),
      db_(parts.db),
      committer_(parts.committer),
      registry_(*parts.registry),
      dispatcher_(parts.dispatcher),
      scopes_(parts.scopes),
      app_cfs_(*parts.app_cfs),
      options_(*parts.options),
      log_(parts.log),
      inbox_window_(parts.inbox_window) {
  assert(gate_ != nullptr && db_ != nullptr && committer_ != nullptr && dispatcher_ != nullptr && scopes_ != nullptr &&
         log_ != nullptr);
}

Status OperatorActionsImpl::NextActionId(uint64_t* id) {
  uint64_t last = 0;
  Status s = db_->Scan(storage::Cf::kReplays, storage::kActionKeyPrefix, SIZE_MAX,
                       [&](std::string_view key, std::string_view) {
                         storage::ParseActionKey(key, &last);
                         return true;
                       });
  *id = last + 1;
  return s;
}

storage::ActionRecord OperatorActionsImpl::RecordOf(const char* kind, const OperatorAction& action,
                                                    std::vector<std::pair<std::string, std::string>> fields) const {
  return storage::ActionRecord{kind, action.operator_name, action.reason, ToUnixMillis(options_.clock->WallNow()),
                               std::move(fields)};
}

Status OperatorActionsImpl::CommitAction(WriteSet* writes) { return committer_->CommitOne(writes, /*sync=*/true); }

// Dead letters.

Status OperatorActionsImpl::SelectDeadLetters(DeadLetterAction kind, uint32_t id, const DeadLetterSelection& selection,
                                              ActionReport* report, std::vector<std::string>* event_ids) {
  std::string prefix;
  storage::PutBe32(&prefix, id);
  std::set<std::string> subjects;
  Status scan =
      db_->Scan(storage::Cf::kDeadLetters, prefix, SIZE_MAX, [&](std::string_view key, std::string_view value) {
        uint32_t sub_id = 0;
        uint64_t seq = 0;
        storage::DeadLetterRecord record;
        Event event;
        if (!storage::ParseSubscriberSeqKey(key, &sub_id, &seq) || !storage::DecodeDeadLetter(value, &record) ||
            !DecodeEnvelope(record.envelope, options_.max_payload_bytes, &event).ok()) {
          return true;  // unreadable: left for an operator to look at
        }
        const bool chosen = selection.seqs.empty()
                                ? (selection.type.empty() || event.type == selection.type) &&
                                      (selection.subject.empty() || event.subject == selection.subject)
                                : std::find(selection.seqs.begin(), selection.seqs.end(), seq) != selection.seqs.end();
        if (chosen) {
          report->seqs.push_back(seq);
          event_ids->push_back(event.id.ToString());
          subjects.insert(event.subject);
        }
        return true;
      });
  if (!scan.ok() || kind == DeadLetterAction::kPurge) return scan;
  // Parked subjects among them (the durable view).
  const std::string parked_prefix = storage::CheckpointKey(id, storage::CheckpointField::kParked);
  return db_->Scan(storage::Cf::kCheckpoints, parked_prefix, SIZE_MAX, [&](std::string_view key, std::string_view) {
    std::string subject(key.substr(parked_prefix.size()));
    if (subjects.count(subject) != 0) report->released_subjects.push_back(subject);
    return true;
  });
}

Status OperatorActionsImpl::ActOnDeadLetters(DeadLetterAction kind, const DeadLetterSelection& selection,
                                             const OperatorAction& action, ActionReport* report) {
  static constexpr const char* kNames[] = {"redrive", "skip", "purge"};
  *report = ActionReport{};
  CallGate::Call call(gate_);
  if (!call.admitted()) return ClosedStatus();
  if (Status s = NeedsOperatorAndReason(action, "an operator action"); !s.ok()) return s;
  uint32_t id = 0;
  {
    MutexLock lock(&registry_.mu);
    auto it = registry_.by_name.find(selection.subscriber);
    if (it == registry_.by_name.end()) return Status::InvalidArgument("no subscriber named " + selection.subscriber);
    if (kind == DeadLetterAction::kRedrive && it->second.active == nullptr) {
      return Status::InvalidArgument("subscriber " + selection.subscriber +
                                     " is not active in this process: its handler is needed to redrive");
    }
    id = it->second.id;
  }
  std::vector<std::string> event_ids;  // for the record
  if (Status s = SelectDeadLetters(kind, id, selection, report, &event_ids); !s.ok()) return s;
  // Nothing selected: nothing to do and nothing to record (action_id 0).
  if (action.dry_run || (report->seqs.empty() && report->released_subjects.empty())) return Status::OK();

  MutexLock lock(&actions_mu_);
  if (Status s = NextActionId(&report->action_id); !s.ok()) return s;
  using storage::ActionRecord;
  const ActionRecord record = RecordOf(kNames[static_cast<uint8_t>(kind)], action,
                                       {{"subscriber", ActionRecord::JsonText(selection.subscriber)},
                                        {"seqs", ActionRecord::JsonNumbers(report->seqs)},
                                        {"event_ids", ActionRecord::JsonTexts(event_ids)}});
  WriteSet writes;
  writes.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(report->action_id), storage::EncodeAction(record));
  for (const std::string& subject : report->released_subjects) {
    writes.Delete(db_->cf(storage::Cf::kCheckpoints),
                  storage::CheckpointKey(id, storage::CheckpointField::kParked, subject));
  }
  if (kind == DeadLetterAction::kPurge) {
    for (uint64_t seq : report->seqs) {
      writes.Delete(db_->cf(storage::Cf::kDeadLetters), storage::SubscriberSeqKey(id, seq));
    }
  }
  return CommitAction(&writes);
}

Result<ActionReport> OperatorActionsImpl::RedriveDeadLetters(const DeadLetterSelection& selection,
                                                             const OperatorAction& action) {
  ActionReport report;
  if (Status s = ActOnDeadLetters(DeadLetterAction::kRedrive, selection, action, &report); !s.ok()) return s;
  if (!action.dry_run) dispatcher_->Redrive(selection.subscriber, report.seqs, report.released_subjects, true);
  return report;
}

Result<ActionReport> OperatorActionsImpl::SkipDeadLetters(const DeadLetterSelection& selection,
                                                          const OperatorAction& action) {
  ActionReport report;
  if (Status s = ActOnDeadLetters(DeadLetterAction::kSkip, selection, action, &report); !s.ok()) return s;
  if (!action.dry_run) dispatcher_->Redrive(selection.subscriber, {}, report.released_subjects, false);
  return report;
}

Result<ActionReport> OperatorActionsImpl::PurgeDeadLetters(const DeadLetterSelection& selection,
                                                           const OperatorAction& action) {
  ActionReport report;
  if (Status s = ActOnDeadLetters(DeadLetterAction::kPurge, selection, action, &report); !s.ok()) return s;
  return report;
}

// Removing a subscriber.

Status OperatorActionsImpl::SelectForRemoval(uint32_t id, ActionReport* report) {
  std::string prefix;
  storage::PutBe32(&prefix, id);
  Status s = db_->Scan(storage::Cf::kDeadLetters, prefix, SIZE_MAX, [&](std::string_view key, std::string_view) {
    uint32_t sub_id = 0;
    uint64_t seq = 0;
    if (storage::ParseSubscriberSeqKey(key, &sub_id, &seq)) report->seqs.push_back(seq);
    return true;
  });
  if (!s.ok()) return s;
  const std::string parked = storage::CheckpointKey(id, storage::CheckpointField::kParked);
  return db_->Scan(storage::Cf::kCheckpoints, parked, SIZE_MAX, [&](std::string_view key, std::string_view) {
    report->released_subjects.emplace_back(key.substr(parked.size()));
    return true;
  });
}

Result<ActionReport> OperatorActionsImpl::RemoveSubscriber(std::string_view removed, const OperatorAction& action) {
  const std::string name(removed);
  if (Status s = NeedsOperatorAndReason(action, "removing a subscriber"); !s.ok()) return s;
  CallGate::Call call(gate_);
  if (!call.admitted()) return ClosedStatus();
  ActionReport report;
  uint32_t id = 0;
  {
    MutexLock actions_lock(&actions_mu_);
    // Held to the commit: the subscriber cannot become active (Subscribe
    // takes it) between the check and the removal.
    MutexLock lock(&registry_.mu);
    auto it = registry_.by_name.find(name);
    if (it == registry_.by_name.end()) return Status::InvalidArgument("no subscriber named " + name);
    if (it->second.active != nullptr) {
      return Status::Busy("subscriber " + name +
                          " is active in this process; remove it where it is not subscribed (before Subscribe, or "
                          "with the walbus tool on the stopped database)");
    }
    id = it->second.id;
    Result<bool> replaying = ReplayRunning(id);
    if (!replaying.ok()) return replaying.status();
    if (*replaying) return Status::Busy("subscriber " + name + " has a replay running; cancel it first");
    if (Status s = SelectForRemoval(id, &report); !s.ok()) return s;
    if (action.dry_run) return report;
    if (Status s = NextActionId(&report.action_id); !s.ok()) return s;
    WriteSet writes;
    AddRemovalWrites(name, it->second, action, report, &writes);
    if (Status s = CommitAction(&writes); !s.ok()) return s;
    registry_.by_name.erase(it);
  }
  log_->logger().info(
      "walbus: subscriber {} removed by {} ({}): action {}, {} dead letters and {} parked subjects "
      "dropped",
      name, action.operator_name, action.reason, report.action_id, report.seqs.size(), report.released_subjects.size());
  if (inbox_window_ != nullptr) inbox_window_->Forget(id);
  // The removal stands either way; an open finishes what is left.
  if (Status s = DeleteRemovedInbox(id); !s.ok()) {
    log_->logger().warn(
        "walbus: deleting the inbox records of removed subscriber {} stopped (the next open goes "
        "on): {}",
        name, s.ToString());
  }
  return report;
}

void OperatorActionsImpl::AddRemovalWrites(const std::string& name, const Registry::Entry& entry,
                                           const OperatorAction& action, const ActionReport& report, WriteSet* writes) {
  using storage::ActionRecord;
  const ActionRecord record = RecordOf("subscriber-remove", action,
                                       {{"subscriber", ActionRecord::JsonText(name)},
                                        {"subscriber_id", std::to_string(entry.id)},
                                        {"checkpoint", std::to_string(entry.durable.checkpoint)},
                                        {"seqs", ActionRecord::JsonNumbers(report.seqs)}});
  writes->Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(report.action_id), storage::EncodeAction(record));
  std::string tombstone;
  storage::PutBe64(&tombstone, report.action_id);
  tombstone.push_back('\0');  // its inbox records are still there
  writes->Delete(db_->cf(storage::Cf::kMeta), storage::SubscriberMetaKey(name));
  writes->Put(db_->cf(storage::Cf::kMeta), storage::RemovedSubscriberKey(entry.id), tombstone);
  const auto [from, to] = SubscriberRange(entry.id);
  for (storage::Cf cf : {storage::Cf::kCheckpoints, storage::Cf::kRetries, storage::Cf::kDeadLetters}) {
    writes->DeleteRange(db_->cf(cf), from, to);
  }
}

Status OperatorActionsImpl::DeleteRemovedInbox(uint32_t id) {
  assert([&] {
    MutexLock lock(&registry_.mu);
    return std::none_of(registry_.by_name.begin(), registry_.by_name.end(),
                        [id](const auto& named) { return named.second.id == id; });
  }());
  const storage::InboxLayout layout = db_->inbox_layout();
  WriteSet batch;
  Status commit;
  Status scan = db_->Scan(storage::Cf::kInbox, {}, SIZE_MAX, [&](std::string_view key, std::string_view) {
    uint32_t sub_id = 0;
    if (!storage::ParseInboxKey(layout, key, &sub_id) || sub_id != id) return true;
    batch.Delete(db_->cf(storage::Cf::kInbox), std::string(key));
    if (batch.ops.size() < kInboxDeletesPerCommit) return true;
    commit = committer_->CommitOne(&batch, /*sync=*/false);
    batch = WriteSet{};
    return commit.ok();
  });
  if (!scan.ok()) return scan;
  if (!commit.ok()) return commit;
  std::string value;
  bool found = false;
  if (Status s = db_->Get(db_->cf(storage::Cf::kMeta), storage::RemovedSubscriberKey(id), &value, &found); !s.ok()) {
    return s;
  }
  if (!found || value.size() != 9) return Status::Corruption("removed-subscriber record " + std::to_string(id));
  value[8] = 1;
  batch.Put(db_->cf(storage::Cf::kMeta), storage::RemovedSubscriberKey(id), value);
  return committer_->CommitOne(&batch, /*sync=*/false);
}

// Replays.

Result<bool> OperatorActionsImpl::ReplayRunning(uint32_t sub_id) {
  bool running = false;
  Status s = LoadReplays(
      *db_, [&](uint64_t, storage::ReplayRecord& r) { running |= r.subscriber_id == sub_id && IsRunning(r); });
  if (!s.ok()) return s;
  return running;
}

Result<bool> OperatorActionsImpl::SideEffectSafe(uint32_t sub_id, const Subscriber* active) {
  if (active != nullptr) return active->side_effect_safe;
  // Not active here (a tool on a stopped database): as it was last
  // subscribed. A database from before registrations were kept records
  // the replay, and the next Subscribe decides.
  std::string value;
  bool found = false;
  storage::RegistrationRecord registration;
  Status s = db_->Get(db_->cf(storage::Cf::kCheckpoints),
                      storage::CheckpointKey(sub_id, storage::CheckpointField::kRegistration), &value, &found);
  if (!s.ok()) return s;
  if (found && storage::DecodeRegistration(value, &registration)) return registration.side_effect_safe;
  return true;
}

// What `request` would run, with nothing changed: the report of a finished
// look (`record` is the request's, checked).
Result<ReplayReport> OperatorActionsImpl::DryRunReplay(const ReplayRequest& request, storage::ReplayRecord record,
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

Status OperatorActionsImpl::AddRebuildWrites(const ReplayRequest& request, uint32_t sub_id, uint64_t checkpoint,
                                             WriteSet* writes) {
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

Result<ReplayReport> OperatorActionsImpl::StartReplay(const ReplayRequest& request) {
  CallGate::Call call(gate_);
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
    Result<bool> safe = SideEffectSafe(sub_id, active.get());
    if (!safe.ok()) return safe.status();
    if (!*safe) {
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
  Result<uint64_t> id = RecordReplay(request, sub_id, record);
  if (!id.ok()) return id.status();
  ReplayReport report = ReportFromRecord(*id, record);
  log_->logger().info("walbus: {} {} of {} recorded by {} ({}): {}, {}", rebuild ? "rebuild" : "replay", *id,
                      request.subscriber, request.action.operator_name, request.action.reason,
                      request.mode == ReplayMode::kSameInbox ? "same-inbox" : "fresh-scope", report.selection);
  if (active != nullptr) dispatcher_->StartReplay(*id, std::move(record));
  return report;
}

Result<uint64_t> OperatorActionsImpl::RecordReplay(const ReplayRequest& request, uint32_t sub_id,
                                                   const storage::ReplayRecord& record) {
  MutexLock lock(&actions_mu_);
  Result<bool> running = ReplayRunning(sub_id);
  if (!running.ok()) return running.status();
  if (*running) return Status::Busy("subscriber " + request.subscriber + " has a replay running; cancel it or wait");
  uint64_t id = 0;
  if (Status s = NextActionId(&id); !s.ok()) return s;
  WriteSet writes;
  writes.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(id), storage::EncodeReplay(record));
  if (request.clear_column_families.empty()) {
    if (Status s = CommitAction(&writes); !s.ok()) return s;
    return id;
  }
  // A rebuild. Held to the commit: the subscriber cannot become active
  // (Subscribe takes it) between the check and the clear.
  MutexLock registry_lock(&registry_.mu);
  auto it = registry_.by_name.find(request.subscriber);
  if (it->second.active != nullptr) return Status::Busy("replay: subscriber " + request.subscriber + " became active");
  if (Status s = AddRebuildWrites(request, sub_id, it->second.durable.checkpoint, &writes); !s.ok()) return s;
  if (Status s = CommitAction(&writes); !s.ok()) return s;
  return id;
}

Status OperatorActionsImpl::ResumeReplays(const std::shared_ptr<Subscriber>& sub) {
  MutexLock lock(&actions_mu_);
  std::vector<std::pair<uint64_t, storage::ReplayRecord>> resume;
  if (Status s = LoadReplays(*db_,
                             [&](uint64_t id, storage::ReplayRecord& r) {
                               if (r.subscriber_id == sub->id && IsRunning(r)) resume.emplace_back(id, std::move(r));
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
      WriteSet writes;
      writes.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(id), storage::EncodeReplay(record));
      if (Status s = CommitAction(&writes); !s.ok()) return s;
      log_->logger().warn("walbus: replay {} of {} refused: {}", id, sub->name, record.error);
      continue;
    }
    if (record.handler_version.empty()) record.handler_version = sub->handler_version;
    log_->logger().info("walbus: replay {} of {} resumes at seq {}", id, sub->name, record.next_seq);
    dispatcher_->StartReplay(id, std::move(record));
  }
  return Status::OK();
}

Result<ReplayReport> OperatorActionsImpl::Replay(uint64_t replay_id) {
  CallGate::Call call(gate_);
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

Status OperatorActionsImpl::CancelReplay(uint64_t replay_id, const OperatorAction& action) {
  if (Status s = NeedsOperatorAndReason(action, "cancelling a replay"); !s.ok()) return s;
  CallGate::Call call(gate_);
  if (!call.admitted()) return ClosedStatus();
  Result<ReplayReport> current = Replay(replay_id);
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
  if (!IsRunning(record)) return Status::OK();
  record.state = static_cast<uint8_t>(ReplayState::kCancelled);
  record.ended_ms = ToUnixMillisUnsigned(options_.clock->WallNow());
  record.cancelled_by = action.operator_name;
  record.cancel_reason = action.reason;
  WriteSet writes;
  writes.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(replay_id), storage::EncodeReplay(record));
  return CommitAction(&writes);
}

// Actions through a unit of work.

Result<uint64_t> OperatorActionsImpl::CancelScheduled(const EventId& id, const OperatorAction& action) {
  CallGate::Call call(gate_);
  if (!call.admitted()) return ClosedStatus();
  if (Status s = NeedsOperatorAndReason(action, "an operator action"); !s.ok()) return s;
  Transaction tx = ScopeAccess::NewTransaction(std::make_unique<ScopeRep>(scopes_));
  if (Status s = tx.CancelScheduled(id); !s.ok()) return s;
  if (action.dry_run) return uint64_t{0};
  MutexLock lock(&actions_mu_);
  uint64_t action_id = 0;
  if (Status s = NextActionId(&action_id); !s.ok()) return s;
  const storage::ActionRecord record =
      RecordOf("scheduled-cancel", action, {{"event_id", storage::ActionRecord::JsonText(id.ToString())}});
  WriteSet& writes = ScopeAccess::Rep(tx)->writes;
  writes.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(action_id), storage::EncodeAction(record));
  if (Status s = CommitAction(&writes); !s.ok()) return s;
  return action_id;
}

Result<uint64_t> OperatorActionsImpl::AbandonProcess(std::string_view process, std::string_view key,
                                                     const OperatorAction& action) {
  CallGate::Call call(gate_);
  if (!call.admitted()) return ClosedStatus();
  if (Status s = NeedsOperatorAndReason(action, "an operator action"); !s.ok()) return s;
  if (Status s = ValidateProcessName(process); !s.ok()) return s;
  Transaction tx = ScopeAccess::NewTransaction(std::make_unique<ScopeRep>(scopes_));
  ScopeRep* rep = ScopeAccess::Rep(tx);
  auto stored = rep->reader.Get(db_, db_->cf(storage::Cf::kProcesses), storage::ProcessKey(process, key), nullptr);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) {
    return Status::NotFound("no instance of process " + std::string(process) + " runs under key " + std::string(key));
  }
  if (action.dry_run) return uint64_t{0};
  MutexLock lock(&actions_mu_);
  uint64_t action_id = 0;
  if (Status s = NextActionId(&action_id); !s.ok()) return s;
  EventSpec abandon;
  abandon.type = ProcessAbandonType(process);
  abandon.subject = std::string(key);
  abandon.data = std::to_string(action_id);
  if (Status s = tx.Publish(abandon).status(); !s.ok()) return s;
  using storage::ActionRecord;
  const ActionRecord record = RecordOf(
      "process-abandon", action, {{"process", ActionRecord::JsonText(process)}, {"key", ActionRecord::JsonText(key)}});
  rep->writes.Put(db_->cf(storage::Cf::kReplays), storage::ActionKey(action_id), storage::EncodeAction(record));
  if (Status s = CommitAction(&rep->writes); !s.ok()) return s;
  return action_id;
}

}  // namespace walbus::internal
