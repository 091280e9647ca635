// Process managers (walbus/process.h): a definition checked once, the
// subscriber that runs it, each step a ProcessRun (process_run.cc), and
// the reads of instances.
#include <cassert>
#include <map>

#include "bus/core/envelope.h"
#include "bus/core/schema_registry.h"
#include "bus/core/scope.h"
#include "bus/process/process_run.h"
#include "storage/keys.h"
#include "walbus/bus.h"
#include "walbus/process.h"

namespace walbus {
namespace {

using internal::ProcessRun;

Status CheckDefinition(const ProcessDefinition& d) {
  if (Status s = internal::ValidateProcessName(d.name); !s.ok()) return s;
  if (d.version == 0) return Status::InvalidArgument("process " + d.name + ": version is at least 1");
  if (!d.handler) return Status::InvalidArgument("process " + d.name + " has no handler");
  if (d.steps.empty()) return Status::InvalidArgument("process " + d.name + " takes no event type");
  bool starts = false;
  std::map<std::string_view, int> seen;
  for (const ProcessStep& step : d.steps) {
    if (Status s = internal::ValidateEventType(step.type); !s.ok()) return s;
    if (++seen[step.type] > 1) return Status::InvalidArgument("process " + d.name + " lists " + step.type + " twice");
    starts |= step.starts;
  }
  if (!starts) return Status::InvalidArgument("process " + d.name + ": no step starts an instance");
  if (!d.state_type.empty()) {
    if (Status s = internal::ValidateEventType(d.state_type); !s.ok()) return s;
  }
  return Status::OK();
}

ProcessInstance ToPublic(std::string key, storage::ProcessRecord r) {
  ProcessInstance out;
  out.key = std::move(key);
  out.definition_version = r.definition_version;
  out.state_version = r.state_version;
  out.state = std::move(r.state);
  out.started = internal::WallTime(r.started_wall_ms);
  out.updated = internal::WallTime(r.updated_wall_ms);
  out.events_handled = r.events_handled;
  for (storage::ProcessTimeoutRecord& t : r.timeouts) {
    out.timeouts.push_back(ProcessTimeout{std::move(t.name), t.id, internal::WallTime(t.due_wall_ms)});
  }
  for (storage::ProcessHandledRecord& h : r.last_handled) {
    out.recent.push_back(ProcessEventHandled{h.id, h.seq, std::move(h.type), internal::WallTime(h.handled_wall_ms)});
  }
  return out;
}

}  // namespace

struct Process::Rep {
  ProcessDefinition definition;
  internal::ProcessShape shape;
  std::map<std::string, const ProcessStep*, std::less<>> steps;  // by type
  bool serialize = false;                                        // a step correlates otherwise than by subject
  SubscriberOptions subscriber;                                  // without its handler (Process::subscriber)

  Outcome Handle(const Event& event, HandlerContext& ctx);
  // The step an event of `type` runs; nullptr for the process's timeouts.
  // REQUIRES: `type` is one the subscriber takes, and not the abandon type.
  const ProcessStep* StepOf(const std::string& type) const;
  // The instance an event of `step` belongs to, loaded or started; an
  // outcome when the step ends here (unmatched, a bad key).
  std::optional<Outcome> Enter(const ProcessStep& step, ProcessRun* run, uint64_t now_ms);
  std::optional<Outcome> EnterTimeout(const Event& event, ProcessRun* run);
  Outcome HandleAbandon(ProcessRun* run);
  Outcome Unmatched(ProcessRun* run);
  static Outcome Failed(ProcessRun* run, Status s);
};

std::optional<Outcome> Process::Rep::EnterTimeout(const Event& event, ProcessRun* run) {
  std::string name, data;
  if (!internal::DecodeTimeoutPayload(event.data, &name, &data)) {
    return Outcome::Reject("a timeout of process " + shape.name + " has a malformed payload");
  }
  Result<bool> found = run->Load(serialize);
  if (!found.ok()) return Failed(run, found.status());
  // Replaced, cancelled or completed after it fired: it no longer counts.
  if (!*found || !run->TakeFiredTimeout(name, event.id)) {
    run->Count(storage::CheckpointField::kProcessStaleTimeouts);
    return Outcome::Done();
  }
  run->fired_timeout = std::move(name);
  run->timeout_data = std::move(data);
  return std::nullopt;
}

// A step that cannot go on: the failed call fails the unit, which makes
// the run a failed attempt (retried, then dead-lettered) with its reason.
Outcome Process::Rep::Failed(ProcessRun* run, Status s) {
  run->rep->Fail(std::move(s));
  return Outcome::Done();
}

Outcome Process::Rep::Unmatched(ProcessRun* run) {
  if (definition.on_unmatched == UnmatchedPolicy::kDeadLetter) {
    return Outcome::Reject("no instance of process " + shape.name + " runs for key " + run->key);
  }
  run->Count(storage::CheckpointField::kProcessUnmatched);
  return Outcome::Done();
}

const ProcessStep* Process::Rep::StepOf(const std::string& type) const {
  assert(type != shape.abandon_type);
  if (type == shape.timeout_type) return nullptr;
  auto step = steps.find(type);
  assert(step != steps.end());  // the subscriber takes only these types
  return step->second;
}

std::optional<Outcome> Process::Rep::Enter(const ProcessStep& step, ProcessRun* run, uint64_t now_ms) {
  if (Status s = internal::ValidateCloudEventString("instance key", run->key);
      !s.ok() || run->key.empty() || run->key.size() > internal::kMaxSubjectBytes) {
    return Outcome::Reject("the instance key of process " + shape.name +
                           " is not a valid subject: " + (s.ok() ? std::string("its size") : s.message()));
  }
  Result<bool> found = run->Load(serialize);
  if (!found.ok()) return Failed(run, found.status());
  if (!*found) {
    if (!step.starts) return Unmatched(run);
    run->Start(now_ms);
  }
  return std::nullopt;
}

// An operator's abandonment: the instance ends without a step (one that
// completed meanwhile is gone already: nothing to do).
Outcome Process::Rep::HandleAbandon(ProcessRun* run) {
  Result<bool> found = run->Load(serialize);
  if (!found.ok()) return Failed(run, found.status());
  if (!*found) return Outcome::Done();
  if (Status s = run->Abandon(); !s.ok()) return Failed(run, s);
  return Outcome::Done();
}

Outcome Process::Rep::Handle(const Event& event, HandlerContext& ctx) {
  if (event.type == shape.abandon_type) {
    ProcessRun run(shape, ctx, event.subject);
    return HandleAbandon(&run);
  }
  // A timeout comes back to its instance under the instance's key.
  const ProcessStep* step = StepOf(event.type);
  ProcessRun run(shape, ctx, step != nullptr && step->correlate ? step->correlate(event) : event.subject);
  const uint64_t now_ms = internal::ToUnixMillisUnsigned(run.rep->host->options().clock->WallNow());
  std::optional<Outcome> ended = step != nullptr ? Enter(*step, &run, now_ms) : EnterTimeout(event, &run);
  if (ended) return *ended;
  if (Status s = run.UpgradeState(definition.upgrade_state); !s.ok()) return Failed(&run, s);
  ProcessContext view = run.View();
  Outcome outcome = definition.handler(event, view);
  if (outcome.kind() != Outcome::Kind::kDone) return outcome;
  if (Status s = run.Finish(event, now_ms); !s.ok()) return Failed(&run, s);
  return outcome;
}

Result<std::shared_ptr<Process>> Process::Define(ProcessDefinition definition) {
  if (Status s = CheckDefinition(definition); !s.ok()) return s;
  auto rep = std::make_shared<Rep>();
  rep->definition = std::move(definition);
  const ProcessDefinition& d = rep->definition;
  rep->shape = internal::ProcessShape{d.name, d.version, internal::ProcessTimeoutType(d.name),
                                      internal::ProcessAbandonType(d.name), d.state_type};
  rep->subscriber.name = "process." + d.name;
  for (const ProcessStep& step : d.steps) {
    rep->steps.emplace(step.type, &step);
    rep->subscriber.types.push_back(step.type);
    rep->serialize |= static_cast<bool>(step.correlate);
  }
  rep->subscriber.types.push_back(rep->shape.timeout_type);
  rep->subscriber.types.push_back(rep->shape.abandon_type);
  rep->subscriber.retry = d.retry;
  rep->subscriber.handler_version = std::to_string(d.version);
  return std::shared_ptr<Process>(new Process(std::move(rep)));
}

Process::Process(std::shared_ptr<Rep> rep) : rep_(std::move(rep)) {}
Process::~Process() = default;

SubscriberOptions Process::subscriber() const {
  SubscriberOptions out = rep_->subscriber;
  // The handler keeps the rep alive for as long as a bus runs it (the rep
  // keeps no handler: no cycle).
  out.handler = [rep = rep_](const Event& e, HandlerContext& ctx) { return rep->Handle(e, ctx); };
  return out;
}
const std::string& Process::name() const { return rep_->shape.name; }

// ProcessContext: a view of the step's ProcessRun.
const std::string& ProcessContext::Key() const { return run_->key; }
bool ProcessContext::IsNew() const { return run_->is_new; }
uint32_t ProcessContext::DefinitionVersion() const { return run_->record.definition_version; }
uint32_t ProcessContext::StateVersion() const { return run_->record.state_version; }
const std::string& ProcessContext::State() const { return run_->record.state; }
const std::optional<std::string>& ProcessContext::FiredTimeout() const { return run_->fired_timeout; }
const std::string& ProcessContext::TimeoutData() const { return run_->timeout_data; }
const std::vector<ProcessTimeout>& ProcessContext::Timeouts() const { return run_->timeouts; }
void ProcessContext::Complete() { run_->completed = true; }
HandlerContext& ProcessContext::Scope() { return run_->ctx; }

Status ProcessContext::SetState(std::string state) {
  internal::ScopeRep* rep = run_->rep;
  Status s = state.size() <= storage::kMaxProcessStateBytes
                 ? Status::OK()
                 : Status::InvalidArgument("a process state is larger than 1 MiB");
  uint32_t version = 0;
  if (s.ok() && !run_->shape.state_type.empty()) {
    s = rep->host->schemas().Verify(run_->shape.state_type, state, &version);
  }
  if (!s.ok()) {
    rep->Fail(s);
    return s;
  }
  run_->record.state = std::move(state);
  run_->record.state_version = version;
  run_->record.state_type = run_->shape.state_type;
  return Status::OK();
}

Status ProcessContext::SetTimeout(std::string_view name, std::chrono::milliseconds after, std::string_view data) {
  EventSpec delivery;
  delivery.deliver_after = after;
  return run_->SetTimeout(name, delivery, data);
}

Status ProcessContext::SetTimeoutAt(std::string_view name, std::chrono::system_clock::time_point at,
                                    std::string_view data) {
  EventSpec delivery;
  delivery.deliver_at = at;
  return run_->SetTimeout(name, delivery, data);
}

Status ProcessContext::CancelTimeout(std::string_view name) { return run_->CancelTimeout(name); }

namespace {

// Runs `read(rep, db)` on a fresh unit's snapshot, for process `name`.
template <typename Read>
auto ReadOf(Bus& bus, std::string_view name, Read read) -> decltype(read(nullptr, nullptr)) {
  if (Status s = internal::ValidateProcessName(name); !s.ok()) return s;
  Transaction tx = bus.Begin();
  internal::ScopeRep* rep = internal::ScopeAccess::Rep(tx);
  internal::ScopeCall call(rep);
  if (!call.admitted()) return internal::ClosedStatus();
  return read(rep, rep->host->db());
}

}  // namespace

Result<std::optional<ProcessInstance>> ReadProcessInstance(Bus& bus, std::string_view name, std::string_view key) {
  return ReadOf(bus, name, [&](internal::ScopeRep* rep, storage::Db* db) -> Result<std::optional<ProcessInstance>> {
    auto stored = rep->reader.Get(db, db->cf(storage::Cf::kProcesses), storage::ProcessKey(name, key), nullptr);
    if (!stored.ok()) return stored.status();
    if (!stored->has_value()) return std::optional<ProcessInstance>();
    storage::ProcessRecord record;
    if (!storage::DecodeProcess(**stored, &record)) {
      return Status::Corruption("the record of instance " + std::string(key) + " of process " + std::string(name) +
                                " is malformed");
    }
    return std::optional<ProcessInstance>(ToPublic(std::string(key), std::move(record)));
  });
}

Result<ProcessStats> ReadProcessStats(Bus& bus, std::string_view name) {
  return ReadOf(bus, name, [&](internal::ScopeRep*, storage::Db* db) -> Result<ProcessStats> {
    auto id = internal::ProcessSubscriberId(db, name);
    if (!id.ok()) return id.status();
    if (!id->has_value()) return ProcessStats{};
    auto count = [&](storage::CheckpointField field) -> Result<uint64_t> {
      std::string value;
      bool present = false;
      if (Status s = db->Get(db->cf(storage::Cf::kCheckpoints), storage::CheckpointKey(**id, field), &value, &present);
          !s.ok()) {
        return s;
      }
      uint64_t n = 0;
      if (present && !storage::DecodeCounter(value, &n)) {
        return Status::Corruption("a counter of process " + std::string(name));
      }
      return n;
    };
    ProcessStats stats;
    const std::pair<storage::CheckpointField, uint64_t*> fields[] = {
        {storage::CheckpointField::kProcessStarted, &stats.started},
        {storage::CheckpointField::kProcessCompleted, &stats.completed},
        {storage::CheckpointField::kProcessAbandoned, &stats.abandoned},
        {storage::CheckpointField::kProcessUnmatched, &stats.unmatched},
        {storage::CheckpointField::kProcessStaleTimeouts, &stats.stale_timeouts}};
    for (const auto& [field, target] : fields) {
      Result<uint64_t> n = count(field);
      if (!n.ok()) return n.status();
      *target = *n;
    }
    const uint64_t ended = stats.completed + stats.abandoned;
    stats.running = stats.started >= ended ? stats.started - ended : 0;
    return stats;
  });
}

Result<ProcessPage> ListProcessInstances(Bus& bus, std::string_view name, const ProcessListOptions& options) {
  if (options.limit == 0 || options.limit > 10000) return Status::InvalidArgument("limit is 1..10000");
  return ReadOf(bus, name, [&](internal::ScopeRep* rep, storage::Db* db) -> Result<ProcessPage> {
    const std::string prefix = storage::ProcessKeyPrefix(name);
    ScanOptions scan;
    scan.prefix = prefix;
    scan.limit = options.limit;
    if (!options.resume_after.empty()) scan.resume_after = prefix + options.resume_after;
    auto page = rep->reader.ScanPageOf(db, db->cf(storage::Cf::kProcesses), scan, nullptr);
    if (!page.ok()) return page.status();
    ProcessPage out;
    for (KeyValue& row : page->rows) {
      storage::ProcessRecord record;
      std::string key = row.key.substr(prefix.size());
      if (!storage::DecodeProcess(row.value, &record)) {
        return Status::Corruption("the record of instance " + key + " of process " + std::string(name) +
                                  " is malformed");
      }
      out.instances.push_back(ToPublic(std::move(key), std::move(record)));
    }
    if (!page->resume_after.empty()) out.resume_after = page->resume_after.substr(prefix.size());
    return out;
  });
}

}  // namespace walbus
