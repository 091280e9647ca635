#include "bus/api/bus_impl.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <string_view>

#include "bus/api/memory_budget.h"
#include "bus/core/envelope.h"
#include "bus/core/fault_point.h"
#include "bus/dispatch/recovery.h"
#include "bus/util/bounds.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"
#include "storage/records.h"

namespace walbus {

Status Bus::Open(const Options& options, std::unique_ptr<Bus>* bus) { return internal::BusImpl::Open(options, bus); }

namespace internal {
namespace {

// Every count, size and duration of Options against its range
// (bus/util/bounds.h): InvalidArgument naming the option, its value and
// the range.
Status ValidateBounds(const Options& o) {
  using std::chrono::milliseconds;
  return CheckBounds(
      "Options",
      {
          {"worker_threads", CountValue(o.worker_threads), 1, 256},
          {"memory_budget", CountValue(o.memory_budget), CountValue(kMinMemoryBudget), kNoMax},
          {"max_in_flight_per_subscriber", CountValue(o.max_in_flight_per_subscriber), 16, int64_t{1} << 22},
          {"tail_cache_events", CountValue(o.tail_cache_events), 16, int64_t{1} << 24},
          {"tail_cache_bytes", CountValue(o.tail_cache_bytes), int64_t{64} << 10, kNoMax},
          {"max_payload_bytes", CountValue(o.max_payload_bytes), 1, int64_t{64} << 20},
          {"max_group_commits", CountValue(o.max_group_commits), 1, kNoMax},
          {"max_group_bytes", CountValue(o.max_group_bytes), 1, kNoMax},
          {"trim_every_events", CountValue(o.trim_every_events), 1, kNoMax},
          {"quarantine_max_entries", CountValue(o.quarantine_max_entries), 1, kNoMax},
          {"quarantine_max_bytes", CountValue(o.quarantine_max_bytes), 1, kNoMax},
      },
      {
          {"buffered_sync_interval", o.buffered_sync_interval, milliseconds(1), kDay},
          {"trim_interval", o.trim_interval, milliseconds(1), kDay},
          {"checkpoint_interval", o.checkpoint_interval, milliseconds(1), kDay},
          {"retain_for", o.retain_for, milliseconds(0), kNoLongest},
          {"inbox_window", o.inbox_window, milliseconds(0), kNoLongest},
      });
}

// The names: the directory, the source, and the column families (each
// valid, as storage checks, and each listed once).
Status ValidateNames(const Options& o) {
  if (o.dir.empty()) return Status::InvalidArgument("Options::dir is empty");
  if (o.source.empty() || o.source.size() > kMaxSourceBytes)
    return Status::InvalidArgument("Options::source must be 1..256 bytes");
  if (Status s = ValidateUriReference("Options::source", o.source); !s.ok()) return s;
  std::set<std::string_view> listed;
  for (const std::string& name : o.column_families) {
    if (!listed.insert(name).second) {
      return Status::InvalidArgument("Options::column_families lists '" + name + "' twice");
    }
  }
  return Status::OK();
}

Status ValidateOptions(const Options& o) {
  if (Status s = ValidateNames(o); !s.ok()) return s;
  if (o.disk_budget != 0 && o.disk_budget < kMinDiskBudget) {
    return Status::InvalidArgument("Options::disk_budget is " + std::to_string(o.disk_budget) +
                                   " bytes; it must be 0 (none) or at least " + std::to_string(kMinDiskBudget));
  }
  if (!o.drop_oldest_types.empty() && o.disk_budget == 0) {
    return Status::InvalidArgument(
        "Options::drop_oldest_types needs Options::disk_budget: without a budget nothing "
        "is ever dropped");
  }
  for (const std::string& type : o.drop_oldest_types) {
    // A type, or a base name (every version of it).
    if (Status s = ValidateEventType(type); !s.ok() && !ValidateEventType(type + ".v1").ok()) {
      return Status::InvalidArgument("Options::drop_oldest_types: " + s.message());
    }
  }
  return ValidateBounds(o);
}

// The timeline as last stored (a fresh one in a new database).
Result<std::unique_ptr<Timeline>> LoadTimeline(storage::Db& db, const Clock* clock) {
  std::string value;
  bool found = false;
  if (Status s = db.Get(db.cf(storage::Cf::kMeta), storage::kMetaTimeline, &value, &found); !s.ok()) return s;
  Timeline::State state;
  if (found && !Timeline::Decode(value, &state)) return Status::Corruption("the stored timeline is malformed");
  return std::make_unique<Timeline>(clock, state);
}

// The dispatcher's bounds and rhythm from `options`; the parts it works
// with are the caller's to add.
DispatcherConfig DispatcherConfigOf(const Options& options, uint64_t trimmed_below) {
  DispatcherConfig dc;
  dc.worker_threads = options.worker_threads;
  dc.max_in_flight_per_subscriber = options.max_in_flight_per_subscriber;
  // Subscribers catching up share their reads of the outbox within a
  // quarter of the tail cache's bound
  // (docs/decisions/0003-subscribers-catching-up-share-their-reads-of-the-outbox.md).
  dc.backlog_window_bytes = options.tail_cache_bytes / 4;
  dc.max_payload_bytes = options.max_payload_bytes;
  dc.trim_every_events = options.trim_every_events;
  dc.trim_interval = options.trim_interval;
  dc.retention = RetentionPolicy::From(options);
  dc.checkpoint_interval = options.checkpoint_interval;
  dc.trimmed_below = trimmed_below;
  dc.sync_follow_ups = options.durability == Durability::kSync;
  dc.clock = options.clock.get();
  return dc;
}

}  // namespace

Status BusImpl::Open(const Options& options, std::unique_ptr<Bus>* out) { return OpenWithEnv(options, nullptr, out); }

Status BusImpl::OpenWithEnv(const Options& requested, rocksdb::Env* env, std::unique_ptr<Bus>* out) {
  out->reset();
  if (Status s = ValidateOptions(requested); !s.ok()) return s;
  std::unique_ptr<BusImpl> bus(new BusImpl(WithinMemoryBudget(requested)));
  RecoveredState recovered;
  if (Status s = bus->OpenStorage(env, &recovered); !s.ok()) return s;
  WALBUS_FAULT_POINT("recovery.after_open");
  if (Status s = bus->MakeCommitPath(recovered.last_seq); !s.ok()) return s;
  if (Status s = bus->MakeDelivery(recovered); !s.ok()) return s;
  if (Status s = bus->StartServers(); !s.ok()) return s;
  *out = std::move(bus);
  return Status::OK();
}

Status BusImpl::OpenStorage(rocksdb::Env* env, RecoveredState* recovered) {
  storage::OpenOptions so;
  so.memory_bytes = StorageShare(options_.memory_budget);
  so.max_log_bytes = MaxLogBytes(options_.disk_budget);
  so.dir = options_.dir;
  so.create_if_missing = options_.create_if_missing;
  so.share_with_group = options_.share_with_group;
  so.app_column_families = options_.column_families;
  so.env = env;
  if (options_.inbox_window.count() > 0) {
    inbox_window_ = std::make_shared<InboxWindow>(options_.inbox_window, options_.clock.get());
    so.inbox_retention = inbox_window_;
  }
  if (Status s = storage::Db::Open(so, &db_); !s.ok()) return s;
  app_cfs_ = AppColumnFamilies(*db_, options_.column_families);
  if (Status s = ReadRecoveredState(*db_, recovered); !s.ok()) return s;
  disk_budget_ =
      std::make_unique<DiskBudget>(db_.get(), options_.disk_budget, recovered->trimmed_below, recovered->last_seq);
  MutexLock lock(&registry_.mu);
  registry_.by_name = std::move(recovered->subscribers);
  registry_.next_id = recovered->next_subscriber_id;
  if (inbox_window_ != nullptr) {
    for (const auto& [name, entry] : registry_.by_name)
      inbox_window_->SetCheckpoint(entry.id, entry.durable.checkpoint);
    for (uint32_t id : recovered->removed_subscriber_ids) inbox_window_->Forget(id);
  }
  return Status::OK();
}

Status BusImpl::MakeCommitPath(uint64_t last_seq) {
  tail_ = std::make_unique<TailCache>(options_.tail_cache_events, options_.tail_cache_bytes);
  log_ = std::make_unique<BusLog>(options_.logger, options_.hash_subjects_in_logs);
  if (options_.durability == Durability::kBuffered) {
    wal_syncer_ = std::make_unique<WalSyncer>(db_.get(), log_.get(), options_.buffered_sync_interval);
  }
  committer_ =
      std::make_unique<Committer>(db_.get(), CommitLimits{options_.max_group_commits, options_.max_group_bytes},
                                  last_seq, this, wal_syncer_.get(), disk_budget_.get());
  registrations_ = std::make_unique<Registrations>(db_.get(), committer_.get(), &registry_);
  contracts_ = std::make_unique<EventContractsImpl>(EventContractsImpl::Parts{
      &gate_, db_.get(), committer_.get(), &schemas_, &options_, log_.get(), [this] { dispatcher_->ResumePaused(); }});
  if (Status s = contracts_->Load(); !s.ok()) return s;
  if (db_->open_to_others()) {
    log_->logger().warn(
        "walbus: {} lets other users in (a permission bit for others): they can read every "
        "payload; chmod o= {} (a new database is created 0700)",
        options_.dir, options_.dir);
  }
  quarantine_ = std::make_unique<internal::Quarantine>(db_.get(), committer_.get(), options_.clock.get(), log_.get(),
                                                       options_.quarantine_max_entries, options_.quarantine_max_bytes);
  if (Status s = quarantine_->Load(); !s.ok()) return s;
  Result<std::unique_ptr<Timeline>> timeline = LoadTimeline(*db_, options_.clock.get());
  if (!timeline.ok()) return timeline.status();
  timeline_ = std::move(*timeline);
  units_ = std::make_unique<UnitHost>(UnitHost::Parts{&gate_, db_.get(), committer_.get(), &options_, &schemas_,
                                                      &app_cfs_, timeline_.get(), disk_budget_.get()});
  scheduler_ = std::make_unique<Scheduler>(db_.get(), committer_.get(), timeline_.get(), quarantine_.get(), log_.get(),
                                           options_.max_payload_bytes);
  return scheduler_->Load();
}

Status BusImpl::MakeDelivery(const RecoveredState& recovered) {
  DispatcherConfig dc = DispatcherConfigOf(options_, recovered.trimmed_below);
  dc.inbox_window = inbox_window_.get();
  dc.disk_budget = disk_budget_.get();
  dc.schemas = &schemas_;
  dc.quarantine = quarantine_.get();
  dc.scheduler = scheduler_.get();
  dc.log = log_.get();
  dc.drop_oldest_types = options_.drop_oldest_types;
  dispatcher_ = std::make_unique<Dispatcher>(units_.get(), db_.get(), committer_.get(), tail_.get(), &registry_, dc);
  if (Status s = dispatcher_->LoadDropCounts(); !s.ok()) return s;
  if (!options_.drop_oldest_types.empty()) {
    units_->SetRoomMaker([dispatcher = dispatcher_.get()](uint64_t bytes) { return dispatcher->MakeRoom(bytes); });
  }
  metrics_ = std::make_unique<BusMetrics>(BusMetrics::Parts{db_.get(), committer_.get(), tail_.get(), &registry_,
                                                            quarantine_.get(), scheduler_.get(), timeline_.get(),
                                                            &options_, disk_budget_.get(), dispatcher_.get()});
  ingestion_ = std::make_unique<Ingestion>(db_.get(), &schemas_, quarantine_.get(), options_.max_payload_bytes,
                                           [this](WriteSet* writes) { return units_->CommitWrites(writes); });
  states_ = std::make_unique<DeliveryStates>(db_.get(), options_.max_payload_bytes);
  operator_ = std::make_unique<OperatorActionsImpl>(
      OperatorActionsImpl::Parts{&gate_, db_.get(), committer_.get(), &registry_, dispatcher_.get(), units_.get(),
                                 &app_cfs_, &options_, log_.get(), inbox_window_.get()});
  // A removal a crash cut short: its inbox records go before anything runs.
  for (uint32_t id : recovered.removed_with_inbox_left) {
    if (Status s = operator_->DeleteRemovedInbox(id); !s.ok()) return s;
  }
  return Status::OK();
}

Status BusImpl::StartServers() {
  if (!options_.metrics_http.empty()) {
    Status s = MetricsHttpServer::Start(
        options_.metrics_http, [this] { return MetricsText(); }, &metrics_http_);
    if (!s.ok()) return s;
  }
  if (options_.admin_socket) return AdminServer::Start(options_.dir, this, &admin_);
  return Status::OK();
}

BusImpl::~BusImpl() {
  Close().IgnoreError();
  dispatcher_.reset();  // before the registry and committer it points into
}

Transaction BusImpl::Begin() { return ScopeAccess::NewTransaction(std::make_unique<ScopeRep>(units_.get())); }

ReadView BusImpl::Read() {
  auto rep = std::make_unique<ViewRep>(units_.get());
  InCall call(this);
  // After Close there is no snapshot to take: the view's reads say Closed.
  if (call.admitted()) rep->reader.TakeSnapshot(db_.get());
  return ScopeAccess::NewView(std::move(rep));
}

void BusImpl::OnCommitted(std::vector<std::shared_ptr<const Event>>& events) { dispatcher_->NotifyCommitted(events); }

void BusImpl::OnTimersChanged(const std::vector<TimerChange>& changes) {
  if (scheduler_->OnTimersChanged(changes) && dispatcher_ != nullptr) dispatcher_->Wake();
}

Status BusImpl::Subscribe(SubscriberOptions subscriber) {
  if (Status s = Registrations::Check(subscriber); !s.ok()) return s;
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  Result<std::shared_ptr<Subscriber>> active = registrations_->Activate(std::move(subscriber));
  if (!active.ok()) return active.status();
  dispatcher_->Add(*active);
  // The subscriber runs either way; a replay not resumed now stays
  // recorded as running and resumes at the next open.
  if (Status s = operator_->ResumeReplays(*active); !s.ok()) {
    log_->logger().error("walbus: resuming the replays of {} failed: {}", (*active)->name, s.ToString());
  }
  return Status::OK();
}

Status BusImpl::Start() {
  // A handler runs only once started; taking the lock could wait for a
  // Close() that waits for this very handler.
  if (dispatcher_->OnWorkerThread()) return Status::OK();
  MutexLock lock(&lifecycle_mu_);
  if (gate_.closed()) return ClosedStatus();
  if (options_.require_schemas) contracts_->WarnUnpublishable(registry_);
  if (!dispatcher_->started()) dispatcher_->Start();
  return Status::OK();
}

Result<IngestResult> BusImpl::IngestEnvelope(std::string_view envelope, const IngestOptions& options) {
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  return ingestion_->FromEnvelope(envelope, options);
}

Result<IngestResult> BusImpl::IngestEvent(const Event& event, const IngestOptions& options) {
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  return ingestion_->FromEvent(event, options);
}

Status BusImpl::Quarantine(std::string_view input, std::string_view source, std::string_view reason) {
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  return quarantine_->Add(input, source, reason);
}

Result<std::vector<DeliveryState>> BusImpl::Pending(std::string_view subscriber, uint64_t limit) {
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  Registry::Entry entry;  // a copy: the scan runs without the registry's lock
  {
    MutexLock lock(&registry_.mu);
    auto it = registry_.by_name.find(subscriber);
    if (it == registry_.by_name.end()) {
      return Status::InvalidArgument("no subscriber named " + std::string(subscriber));
    }
    entry = it->second;
  }
  return states_->Pending(subscriber, entry, limit);
}

Status BusImpl::WaitHandled(const Receipt& receipt, const std::vector<std::string>& subscribers,
                            std::chrono::milliseconds timeout, std::vector<DeliveryState>* states) {
  states->clear();
  if (Status s = RefusedInHandler("WaitHandled"); !s.ok()) return s;
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  std::vector<std::string> names = subscribers;
  {
    MutexLock lock(&registry_.mu);
    for (const std::string& n : subscribers) {
      auto it = registry_.by_name.find(n);
      if (it == registry_.by_name.end() || it->second.active == nullptr) {
        return Status::InvalidArgument("no active subscriber named " + n + " in this process");
      }
    }
    if (names.empty()) {
      for (const auto& [n, e] : registry_.by_name)
        if (e.active != nullptr) names.push_back(n);
    }
  }
  Status waited =
      receipt.event_ids.empty() ? Status::OK() : dispatcher_->progress().WaitFor(receipt.last_seq(), timeout, names);
  MutexLock lock(&registry_.mu);
  for (size_t i = 0; i < receipt.event_ids.size(); ++i) {
    for (const std::string& n : names) {
      DeliveryState st;
      if (Status s = states_->StateOf(n, registry_.by_name.at(n), receipt.event_ids[i], receipt.first_seq + i, &st);
          !s.ok()) {
        return s;
      }
      states->push_back(std::move(st));
    }
  }
  return waited;
}

Status BusImpl::WaitQuiescent(const Receipt& receipt, std::chrono::milliseconds timeout) {
  if (Status s = RefusedInHandler("WaitQuiescent"); !s.ok()) return s;
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  if (receipt.event_ids.empty()) return Status::OK();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // The flow: each root's correlation id, or its own id when it has none
  // (a root already trimmed from the outbox counts by its id).
  std::set<EventId> flows(receipt.event_ids.begin(), receipt.event_ids.end());
  Status read = db_->ScanOutbox(receipt.first_seq, receipt.event_ids.size(), [&](uint64_t, std::string_view bytes) {
    Event e;
    if (DecodeEnvelope(bytes, options_.max_payload_bytes, &e).ok() && e.correlation_id) flows.insert(*e.correlation_id);
    return true;
  });
  if (!read.ok()) return read;
  uint64_t target = receipt.last_seq();
  for (;;) {
    // A cascade that keeps growing would keep this loop going past Close().
    if (gate_.closed()) return ClosedStatus();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::TimedOut("the cascade of the receipt is not complete");
    if (Status s = dispatcher_->progress().WaitFor(target, left); !s.ok()) return s;
    // Everything up to target is complete, so every follow-up of it is
    // committed: look for more of the flow above target.
    uint64_t newest = target;
    const uint64_t last = committer_->last_seq();
    Status scan = db_->ScanOutbox(target + 1, last - target, [&](uint64_t seq, std::string_view bytes) {
      Event e;
      if (DecodeEnvelope(bytes, options_.max_payload_bytes, &e).ok() && e.correlation_id &&
          flows.count(*e.correlation_id) > 0) {
        newest = seq;
      }
      return seq < last;
    });
    if (!scan.ok()) return scan;
    if (newest == target) return Status::OK();
    target = newest;
  }
}

Result<std::vector<DeliveryState>> BusImpl::EventStatus(const EventId& id) {
  std::vector<DeliveryState> states;
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  MutexLock lock(&registry_.mu);
  for (const auto& [name, entry] : registry_.by_name) {
    DeliveryState st;
    if (Status s = states_->StateOf(name, entry, id, 0, &st); !s.ok()) return s;
    states.push_back(std::move(st));
  }
  return states;
}

std::string BusImpl::MetricsText() { return PrometheusText(Metrics()); }

std::vector<MetricFamily> BusImpl::Metrics() {
  // Closed (or closing): the figures held in memory, without storage's.
  InCall call(this);
  return metrics_->Families(Stats(), call.admitted());
}

void BusImpl::Log(LogLevel level, std::string_view line) { log_->Log(level, line); }

Status BusImpl::AddMetricsSource(std::weak_ptr<const MetricsSource> source) {
  InCall call(this);
  if (!call.admitted()) return ClosedStatus();
  return metrics_->AddSource(std::move(source));
}

Status BusImpl::WaitCaughtUp(std::chrono::milliseconds timeout) {
  if (Status s = RefusedInHandler("WaitCaughtUp"); !s.ok()) return s;
  if (!options_.clock->PassesByItself() && dispatcher_->started()) {
    if (gate_.closed()) return ClosedStatus();
    return dispatcher_->progress().WaitSettled(timeout, [this] { dispatcher_->Wake(); });
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (uint64_t target = committer_->last_seq();;) {
    if (gate_.closed()) return ClosedStatus();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::TimedOut("subscribers have not caught up with the outbox");
    if (Status s = dispatcher_->progress().WaitFor(target, left); !s.ok()) return s;
    // Complete up to target: every follow-up of those events is committed
    // by now, so anything new shows in the last seq.
    const uint64_t last = committer_->last_seq();
    if (last == target) return Status::OK();
    target = last;
  }
}

Status BusImpl::WaitIdle(std::chrono::milliseconds timeout) {
  if (Status s = RefusedInHandler("WaitIdle"); !s.ok()) return s;
  if (gate_.closed()) return ClosedStatus();
  return dispatcher_->progress().WaitFor(committer_->last_seq(), timeout);
}

BusStats BusImpl::Stats() {
  BusStats stats;
  stats.last_seq = committer_->last_seq();
  stats.commits = committer_->commits();
  stats.commit_groups = committer_->groups();
  stats.write_failures_no_space = committer_->no_space_failures();
  stats.write_failures_other = committer_->other_write_failures();
  stats.writes_failing = committer_->writes_failing();
  stats.quarantined = quarantine_->added();
  stats.quarantine_evicted = quarantine_->evicted();
  const Scheduler::Counts scheduled = scheduler_->counts();
  stats.scheduled_pending = scheduled.pending;
  stats.scheduled_fired = scheduled.fired;
  stats.scheduled_cancelled = scheduled.cancelled;
  for (const auto& [type, n] : dispatcher_->DroppedByType()) stats.dropped += n;
  MutexLock lock(&registry_.mu);
  for (const auto& [name, e] : registry_.by_name) {
    SubscriberStats s;
    s.name = name;
    if (e.active != nullptr) {
      s.checkpoint = e.active->watermark.load();
      s.handled = e.active->handled.load();
      s.duplicates = e.active->duplicates.load();
      s.retries = e.active->retries.load();
      s.waits = e.active->waits.load();
      s.conflicts = e.active->conflicts.load();
      s.dead_lettered = e.active->dead_lettered.load();
      s.stale_skipped = e.active->stale_skipped.load();
      s.dropped = e.active->dropped.load();
      s.in_flight = e.active->in_flight.load();
      s.paused = e.active->paused_now.load();
      {
        MutexLock paused_lock(&e.active->paused_mu);
        s.paused_on = e.active->paused_on_type;
      }
      s.pauses = e.active->pauses.load();
    } else {
      s.checkpoint = e.durable.checkpoint;
      s.handled = e.durable.handled;
      s.duplicates = e.durable.duplicates;
      s.dead_lettered = e.durable.dead_lettered;
      s.stale_skipped = e.durable.stale_skipped;
      s.dropped = e.durable.dropped;
    }
    stats.subscribers.push_back(std::move(s));
  }
  return stats;
}

Status BusImpl::RefusedInHandler(std::string_view call) const {
  // No dispatcher: an Open that failed, closing what it had opened.
  if (dispatcher_ == nullptr || !dispatcher_->OnWorkerThread()) return Status::OK();
  return Status::InvalidArgument(std::string(call) +
                                 "() was called from a handler, which it would wait for; call it from an "
                                 "application thread");
}

Status BusImpl::Close() {
  // Checked before the lock: a Close() running on another thread holds it
  // while it waits for this very handler or call to finish.
  if (Status s = RefusedInHandler("Close"); !s.ok()) return s;
  if (gate_.InsideCall()) {
    return Status::InvalidArgument("Close() was called from inside a call of this bus (a verifier or an upcaster)");
  }
  MutexLock lock(&lifecycle_mu_);
  if (db_ == nullptr) return Status::OK();
  admin_.reset();         // its thread runs operator actions on the bus
  metrics_http_.reset();  // its thread reads the database
  gate_.Shut();
  dispatcher_->progress().Cancel();
  gate_.WaitForCallsToLeave();
  dispatcher_->Stop();
  // Whether it ran or not: timers scheduled here fall due by it.
  if (scheduler_ != nullptr) scheduler_->StoreTimeline();
  // The last writes are in: a clean Close leaves nothing unsynced.
  if (wal_syncer_ != nullptr) wal_syncer_->Stop();
  // The committer, dispatcher and registry stay (stopped) until destruction
  // so that a Stats() or WaitIdle() racing with Close() reads valid state.
  db_.reset();
  return Status::OK();
}

}  // namespace internal
}  // namespace walbus
