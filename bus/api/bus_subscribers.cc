// BusImpl's subscriber registrations (walbus/bus.h: Subscribe,
// RemoveSubscriber): the records that make a subscriber durable, where a
// new one starts, and what a removal takes away.
#include <algorithm>
#include <cassert>
#include <string>
#include <vector>

#include "bus/api/bus_impl.h"
#include "bus/core/envelope.h"
#include "bus/dispatch/replay.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"
#include "storage/records.h"

namespace walbus::internal {
namespace {

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

}  // namespace

Status BusImpl::StartCheckpoint(const std::string& name, const StartPosition& start, uint64_t* checkpoint) {
  const uint64_t last = committer_->last_seq();
  if (start.kind == StartPosition::Kind::kNow) {
    *checkpoint = last;
    return Status::OK();
  }
  // Trims commit under registry_.mu, as this runs: the floor read here
  // holds until the registration commits.
  std::string value;
  bool found = false;
  if (Status s = db_->Get(db_->cf(storage::Cf::kMeta), storage::kMetaTrimmedBelow, &value, &found); !s.ok()) return s;
  if (found && value.size() != 8) return Status::Corruption("the outbox's trim record is malformed");
  const uint64_t oldest_kept = std::max<uint64_t>(1, found ? storage::GetBe64(value) : 0);
  if (start.kind == StartPosition::Kind::kOldestRetained) {
    *checkpoint = oldest_kept - 1;
    return Status::OK();
  }
  if (start.seq < oldest_kept || start.seq > last + 1) {
    return Status::InvalidArgument("subscriber " + name + ": StartPosition::AtSeq(" + std::to_string(start.seq) +
                                   ") is outside what the outbox holds: seq " + std::to_string(oldest_kept) + " to " +
                                   std::to_string(last + 1) + " (the next one)");
  }
  *checkpoint = start.seq - 1;
  return Status::OK();
}

Status BusImpl::Register(const std::string& name, const StartPosition& start, Registry::Entry* entry) {
  entry->id = registry_.next_id;
  entry->durable = DurableCounters{};
  if (Status s = StartCheckpoint(name, start, &entry->durable.checkpoint); !s.ok()) return s;
  WriteSet scope;
  std::string record, watermark;
  storage::PutBe32(&record, entry->id);
  storage::PutBe64(&record, entry->durable.checkpoint);
  storage::PutBe64(&watermark, entry->durable.checkpoint);
  scope.Put(db_->cf(storage::Cf::kMeta), storage::SubscriberMetaKey(name), record);
  scope.Put(db_->cf(storage::Cf::kCheckpoints), storage::CheckpointKey(entry->id, storage::CheckpointField::kWatermark),
            watermark);
  if (Status s = committer_->CommitOne(&scope, /*sync=*/true); !s.ok()) return s;
  ++registry_.next_id;
  return Status::OK();
}

Status BusImpl::StoreRegistration(const Subscriber& sub) {
  // What a tool acting on the stopped database needs to know of it: a
  // fresh-scope replay of a subscriber that is not side-effect-safe is
  // refused at once, with the reason.
  storage::RegistrationRecord record;
  record.side_effect_safe = sub.side_effect_safe;
  record.handler_version = sub.handler_version;
  record.types = sub.types;
  WriteSet scope;
  scope.Put(db_->cf(storage::Cf::kCheckpoints), storage::CheckpointKey(sub.id, storage::CheckpointField::kRegistration),
            storage::EncodeRegistration(record));
  return committer_->CommitOne(&scope, /*sync=*/false);
}

Status BusImpl::LoadParked(Subscriber* sub) {
  const std::string prefix = storage::CheckpointKey(sub->id, storage::CheckpointField::kParked);
  Status bad;
  Status s = db_->Scan(storage::Cf::kCheckpoints, prefix, SIZE_MAX, [&](std::string_view key, std::string_view value) {
    if (value.size() != 8) {
      bad = Status::Corruption("parked-subject record of " + sub->name + " has a bad size");
      return false;
    }
    sub->holds.Park(std::string(key.substr(prefix.size())), storage::GetBe64(value));
    return true;
  });
  return s.ok() ? bad : s;
}

Status BusImpl::Subscribe(SubscriberOptions subscriber) {
  if (Status s = ValidateSubscriberName(subscriber.name); !s.ok()) return s;
  if (!subscriber.handler) return Status::InvalidArgument("subscriber " + subscriber.name + " has no handler");
  if (subscriber.retry.max_attempts < 1) {
    return Status::InvalidArgument("subscriber " + subscriber.name + ": RetryPolicy::max_attempts must be >= 1");
  }
  for (const auto& t : subscriber.types) {
    if (Status s = ValidateEventType(t); !s.ok()) return s;
  }
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  std::shared_ptr<Subscriber> active;
  {
    MutexLock lock(&registry_.mu);
    auto it = registry_.by_name.find(subscriber.name);
    if (it != registry_.by_name.end() && it->second.active != nullptr) {
      return Status::Busy("subscriber " + subscriber.name + " is already active in this process");
    }
    if (it == registry_.by_name.end()) {
      Registry::Entry entry;
      if (Status s = Register(subscriber.name, subscriber.start, &entry); !s.ok()) return s;
      it = registry_.by_name.emplace(subscriber.name, entry).first;
    }
    const uint32_t id = it->second.id;
    active = std::make_shared<Subscriber>(std::move(subscriber), id, it->second.durable);
    if (Status s = LoadParked(active.get()); !s.ok()) return s;
    if (Status s = StoreRegistration(*active); !s.ok()) return s;
    it->second.active = active;
  }
  dispatcher_->Add(active);
  // The subscriber runs either way; a replay not resumed now stays
  // recorded as running and resumes at the next open.
  if (Status s = ResumeReplays(active); !s.ok()) {
    log_->logger().error("walbus: resuming the replays of {} failed: {}", active->name, s.ToString());
  }
  return Status::OK();
}

Status BusImpl::SelectForRemoval(uint32_t id, ActionReport* report) {
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

Result<ActionReport> BusImpl::RemoveSubscriber(const std::string& name, const OperatorAction& action) {
  if (action.operator_name.empty() || action.reason.empty()) {
    return Status::InvalidArgument("removing a subscriber needs an operator name and a reason");
  }
  InCall call(this);
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
    bool replaying = false;
    if (Status s = LoadReplays(*db_,
                               [&](uint64_t, storage::ReplayRecord& r) {
                                 replaying |=
                                     r.subscriber_id == id && r.state == static_cast<uint8_t>(ReplayState::kRunning);
                               });
        !s.ok()) {
      return s;
    }
    if (replaying) return Status::Busy("subscriber " + name + " has a replay running; cancel it first");
    if (Status s = SelectForRemoval(id, &report); !s.ok()) return s;
    if (action.dry_run) return report;
    if (Status s = NextActionId(&report.action_id); !s.ok()) return s;
    WriteSet writes;
    AddRemovalWrites(name, it->second, action, report, &writes);
    if (Status s = committer_->CommitOne(&writes, /*sync=*/true); !s.ok()) return s;
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

void BusImpl::AddRemovalWrites(const std::string& name, const Registry::Entry& entry, const OperatorAction& action,
                               const ActionReport& report, WriteSet* writes) {
  using storage::ActionRecord;
  const ActionRecord record{"subscriber-remove",
                            action.operator_name,
                            action.reason,
                            ToUnixMillis(options_.clock->WallNow()),
                            {{"subscriber", ActionRecord::JsonText(name)},
                             {"subscriber_id", std::to_string(entry.id)},
                             {"checkpoint", std::to_string(entry.durable.checkpoint)},
                             {"seqs", ActionRecord::JsonNumbers(report.seqs)}}};
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

Status BusImpl::DeleteRemovedInbox(uint32_t id) {
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

}  // namespace walbus::internal
