#include "bus/process/process_run.h"

#include <algorithm>
#include <cassert>

#include "bus/core/payload_contract.h"
#include "bus/core/schema_registry.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

constexpr size_t kMaxTimeoutNameBytes = 200;

Status CheckTimeoutName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTimeoutNameBytes) {
    return Status::InvalidArgument("a timeout name is 1.." + std::to_string(kMaxTimeoutNameBytes) + " bytes");
  }
  if (name.find('\0') != std::string_view::npos) return Status::InvalidArgument("a timeout name holds a NUL byte");
  return Status::OK();
}

}  // namespace

std::string ProcessTimeoutType(std::string_view process) {
  return "walbus.process-timeout." + std::string(process) + ".v1";
}

std::string ProcessAbandonType(std::string_view process) {
  return "walbus.process-abandon." + std::string(process) + ".v1";
}

Result<std::optional<uint32_t>> ProcessSubscriberId(storage::Db* db, std::string_view name) {
  std::string registered;
  bool found = false;
  if (Status s = db->Get(db->cf(storage::Cf::kMeta), storage::SubscriberMetaKey("process." + std::string(name)),
                         &registered, &found);
      !s.ok()) {
    return s;
  }
  if (!found) return std::optional<uint32_t>();
  if (registered.size() < 4) return Status::Corruption("the registration of process " + std::string(name));
  return std::optional<uint32_t>(storage::GetBe32(registered));
}

std::string EncodeTimeoutPayload(std::string_view name, std::string_view data) {
  std::string out;
  storage::PutBe32(&out, static_cast<uint32_t>(name.size()));
  out.append(name).append(data);
  return out;
}

bool DecodeTimeoutPayload(std::string_view payload, std::string* name, std::string* data) {
  if (payload.size() < 4) return false;
  const uint32_t n = storage::GetBe32(payload);
  if (n == 0 || n > kMaxTimeoutNameBytes || n > payload.size() - 4) return false;
  name->assign(payload.substr(4, n));
  data->assign(payload.substr(4 + n));
  return true;
}

Result<bool> ProcessRun::Load(bool serialize) {
  storage::Db* db = rep->host->db();
  storage::CfHandle* cf = db->cf(storage::Cf::kProcesses);
  record_key = storage::ProcessKey(shape.name, key);
  if (serialize) {
    auto version = rep->reader.Version(db, cf, "walbus.processes", record_key);
    if (!version.ok()) return version.status();
    rep->writes.expects.push_back(Expectation{storage::VersionKey(storage::Db::CfId(cf), record_key), *version,
                                              "instance " + key + " of process " + shape.name});
  }
  auto stored = rep->reader.Get(db, cf, record_key, &rep->writes);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return false;
  if (!storage::DecodeProcess(**stored, &record)) {
    return Status::Corruption("the record of instance " + key + " of process " + shape.name + " is malformed");
  }
  RefreshTimeouts();
  return true;
}

void ProcessRun::Start(uint64_t now_wall_ms) {
  is_new = true;
  record = storage::ProcessRecord{};
  record.definition_version = shape.version;
  record.started_wall_ms = now_wall_ms;
  RefreshTimeouts();
}

bool ProcessRun::TakeFiredTimeout(const std::string& name, const EventId& id) {
  auto it = std::find_if(record.timeouts.begin(), record.timeouts.end(),
                         [&](const storage::ProcessTimeoutRecord& t) { return t.name == name && t.id == id; });
  if (it == record.timeouts.end()) return false;
  record.timeouts.erase(it);
  RefreshTimeouts();
  return true;
}

Status ProcessRun::UpgradeState(const StateUpgrade& upgrade) {
  if (shape.state_type.empty() || !upgrade || record.state.empty()) return Status::OK();
  auto contract = rep->host->schemas().Contract(shape.state_type);
  if (contract == nullptr || record.state_version >= contract->version()) return Status::OK();
  Result<std::string> upgraded = upgrade(record.state_version, record.state);
  if (!upgraded.ok()) return upgraded.status();
  uint32_t version = 0;
  if (Status s = rep->host->schemas().Verify(shape.state_type, *upgraded, &version); !s.ok()) {
    return Status::InvalidArgument("the upgraded state of instance " + key + " does not verify: " + s.message());
  }
  record.state = std::move(*upgraded);
  record.state_version = version;
  record.state_type = shape.state_type;
  return Status::OK();
}

Status ProcessRun::SetTimeout(std::string_view name, const EventSpec& delivery, std::string_view data) {
  if (Status s = CheckTimeoutName(name); !s.ok()) {
    rep->Fail(s);
    return s;
  }
  if (Status s = DropTimeout(name); !s.ok()) return s;  // replaced in the same commit
  EventSpec spec = delivery;
  spec.type = shape.timeout_type;
  spec.subject = key;
  spec.data = EncodeTimeoutPayload(name, data);
  spec.content_type = "application/vnd.walbus.process-timeout";
  Result<EventId> id = ctx.Publish(spec);
  if (!id.ok()) return id.status();
  auto due = ctx.GetScheduled(*id);
  if (!due.ok()) return due.status();
  record.timeouts.push_back(
      storage::ProcessTimeoutRecord{std::string(name), *id, internal::ToUnixMillisUnsigned(due->at)});
  RefreshTimeouts();
  return Status::OK();
}

Status ProcessRun::CancelTimeout(std::string_view name) {
  if (Status s = CheckTimeoutName(name); !s.ok()) {
    rep->Fail(s);
    return s;
  }
  return DropTimeout(name);
}

Status ProcessRun::DropTimeout(std::string_view name) {
  auto it = std::find_if(record.timeouts.begin(), record.timeouts.end(),
                         [&](const storage::ProcessTimeoutRecord& t) { return t.name == name; });
  if (it == record.timeouts.end()) return Status::OK();
  const EventId id = it->id;
  record.timeouts.erase(it);
  RefreshTimeouts();
  return CancelIfPending(id);
}

Status ProcessRun::CancelIfPending(const EventId& id) {
  // Steps of one instance run one at a time, so only the firing races
  // this cancel: the commit decides it (a Conflict runs the step again,
  // which then finds it fired). One that fired already arrives after this
  // step and, no longer recorded, is ignored as stale.
  auto where = ctx.GetScheduled(id);
  if (!where.ok()) return where.status();
  if (where->state != ScheduledStatus::State::kPending) return Status::OK();
  return ctx.CancelScheduled(id);
}

void ProcessRun::RefreshTimeouts() {
  timeouts.clear();
  for (const storage::ProcessTimeoutRecord& t : record.timeouts) {
    timeouts.push_back(ProcessTimeout{t.name, t.id, internal::WallTime(t.due_wall_ms)});
  }
}

void ProcessRun::Count(storage::CheckpointField field) {
  assert(rep->subscriber_id != 0);
  storage::Db* db = rep->host->db();
  rep->writes.AddCounter(db->cf(storage::Cf::kCheckpoints), storage::CheckpointKey(rep->subscriber_id, field), 1);
}

Status ProcessRun::Abandon() {
  for (const storage::ProcessTimeoutRecord& t : record.timeouts) {
    if (Status s = CancelIfPending(t.id); !s.ok()) return s;
  }
  rep->writes.Delete(rep->host->db()->cf(storage::Cf::kProcesses), record_key);
  Count(storage::CheckpointField::kProcessAbandoned);
  return Status::OK();
}

Status ProcessRun::Finish(const Event& event, uint64_t now_wall_ms) {
  storage::CfHandle* cf = rep->host->db()->cf(storage::Cf::kProcesses);
  if (is_new) Count(storage::CheckpointField::kProcessStarted);
  if (completed) {
    Count(storage::CheckpointField::kProcessCompleted);
    for (const storage::ProcessTimeoutRecord& t : record.timeouts) {
      if (Status s = CancelIfPending(t.id); !s.ok()) return s;
    }
    rep->writes.Delete(cf, record_key);
    return Status::OK();
  }
  record.updated_wall_ms = now_wall_ms;
  ++record.events_handled;
  if (record.last_handled.size() == storage::kProcessHandledKept)
    record.last_handled.erase(record.last_handled.begin());
  record.last_handled.push_back(storage::ProcessHandledRecord{event.id, event.seq, event.type, now_wall_ms});
  rep->writes.Put(cf, record_key, storage::EncodeProcess(record));
  return Status::OK();
}

}  // namespace walbus::internal
