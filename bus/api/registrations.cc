#include "bus/api/registrations.h"

#include <algorithm>
#include <string>
#include <utility>

#include "bus/core/envelope.h"
#include "storage/keys.h"
#include "storage/records.h"

namespace walbus::internal {

Registrations::Registrations(storage::Db* db, Committer* committer, Registry* registry)
    : db_(db), committer_(committer), registry_(*registry) {}

Status Registrations::StartCheckpoint(const std::string& name, const StartPosition& start, uint64_t* checkpoint) {
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

Status Registrations::Register(const std::string& name, const StartPosition& start, Registry::Entry* entry) {
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

Status Registrations::StoreRegistration(const Subscriber& sub) {
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

Status Registrations::LoadParked(Subscriber* sub) {
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

Status Registrations::Check(const SubscriberOptions& options) {
  if (Status s = ValidateSubscriberName(options.name); !s.ok()) return s;
  if (!options.handler) return Status::InvalidArgument("subscriber " + options.name + " has no handler");
  if (options.retry.max_attempts < 1) {
    return Status::InvalidArgument("subscriber " + options.name + ": RetryPolicy::max_attempts must be >= 1");
  }
  for (const auto& t : options.types) {
    if (Status s = ValidateEventType(t); !s.ok()) return s;
  }
  return Status::OK();
}

Result<std::shared_ptr<Subscriber>> Registrations::Activate(SubscriberOptions options) {
  MutexLock lock(&registry_.mu);
  auto it = registry_.by_name.find(options.name);
  if (it != registry_.by_name.end() && it->second.active != nullptr) {
    return Status::Busy("subscriber " + options.name + " is already active in this process");
  }
  if (it == registry_.by_name.end()) {
    Registry::Entry entry;
    if (Status s = Register(options.name, options.start, &entry); !s.ok()) return s;
    it = registry_.by_name.emplace(options.name, entry).first;
  }
  const uint32_t id = it->second.id;
  auto active = std::make_shared<Subscriber>(std::move(options), id, it->second.durable);
  if (Status s = LoadParked(active.get()); !s.ok()) return s;
  if (Status s = StoreRegistration(*active); !s.ok()) return s;
  it->second.active = active;
  return active;
}

}  // namespace walbus::internal
