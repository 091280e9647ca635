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
#include "bus/util/closest.h"
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
  return ValidateBounds(o);
}

}  // namespace

Status BusImpl::Open(const Options& options, std::unique_ptr<Bus>* out) { return OpenWithEnv(options, nullptr, out); }

Status BusImpl::OpenWithEnv(const Options& requested, rocksdb::Env* env, std::unique_ptr<Bus>* out) {
  out->reset();
  if (Status s = ValidateOptions(requested); !s.ok()) return s;
  const Options options = WithinMemoryBudget(requested);
  std::unique_ptr<BusImpl> bus(new BusImpl(options));
  storage::OpenOptions so;
  so.memory_bytes = StorageShare(options.memory_budget);
  so.dir = options.dir;
  so.create_if_missing = options.create_if_missing;
  so.share_with_group = options.share_with_group;
  so.app_column_families = options.column_families;
  so.env = env;
  if (options.inbox_window.count() > 0) {
    bus->inbox_window_ = std::make_shared<InboxWindow>(options.inbox_window, bus->options_.clock.get());
    so.inbox_retention = bus->inbox_window_;
  }
  if (Status s = storage::Db::Open(so, &bus->db_); !s.ok()) return s;
  bus->app_cfs_ = AppColumnFamilies(*bus->db_, options.column_families);
  uint64_t last_seq = 0, trimmed_below = 0;
  std::vector<uint32_t> removals_left;
  if (Status s = bus->Recover(&last_seq, &trimmed_below, &removals_left); !s.ok()) return s;
  WALBUS_FAULT_POINT("recovery.after_open");
  bus->tail_ = std::make_unique<TailCache>(options.tail_cache_events, options.tail_cache_bytes);
  bus->log_ = std::make_unique<BusLog>(options.logger, options.hash_subjects_in_logs);
  if (options.durability == Durability::kBuffered) {
    bus->wal_syncer_ = std::make_unique<WalSyncer>(bus->db_.get(), bus->log_.get(), options.buffered_sync_interval);
  }
  bus->committer_ =
      std::make_unique<Committer>(bus->db_.get(), CommitLimits{options.max_group_commits, options.max_group_bytes},
                                  last_seq, bus.get(), bus->wal_syncer_.get());
  bus->registrations_ = std::make_unique<Registrations>(bus->db_.get(), bus->committer_.get(), &bus->registry_);
  bus->contracts_ = std::make_unique<EventContractsImpl>(
      EventContractsImpl::Parts{&bus->gate_, bus->db_.get(), bus->committer_.get(), &bus->schemas_, &bus->options_,
                                bus->log_.get(), [self = bus.get()] { self->dispatcher_->ResumePaused(); }});
  if (Status s = bus->contracts_->Load(); !s.ok()) return s;
  if (bus->db_->open_to_others()) {
    bus->log_->logger().warn(
        "walbus: {} lets other users in (a permission bit for others): they can read every "
        "payload; chmod o= {} (a new database is created 0700)",
        options.dir, options.dir);
  }
  bus->quarantine_ = std::make_unique<internal::Quarantine>(
      bus->db_.get(), bus->committer_.get(), bus->options_.clock.get(), bus->log_.get(), options.quarantine_max_entries,
      options.quarantine_max_bytes);
  if (Status s = bus->quarantine_->Load(); !s.ok()) return s;
  if (Status s = bus->LoadTimeline(); !s.ok()) return s;
  bus->scheduler_ = std::make_unique<Scheduler>(bus->db_.get(), bus->committer_.get(), bus->timeline_.get(),
                                                bus->quarantine_.get(), bus->log_.get(), options.max_payload_bytes);
  if (Status s = bus->scheduler_->Load(); !s.ok()) return s;
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
  dc.inbox_window = bus->inbox_window_.get();
  dc.checkpoint_interval = options.checkpoint_interval;
  dc.trimmed_below = trimmed_below;
  dc.sync_follow_ups = options.durability == Durability::kSync;
  dc.clock = bus->options_.clock.get();
  dc.schemas = &bus->schemas_;
  dc.quarantine = bus->quarantine_.get();
  dc.scheduler = bus->scheduler_.get();
  dc.log = bus->log_.get();
  bus->dispatcher_ = std::make_unique<Dispatcher>(bus.get(), bus->db_.get(), bus->committer_.get(), bus->tail_.get(),
                                                  &bus->registry_, dc);
  bus->metrics_ = std::make_unique<BusMetrics>(
      BusMetrics::Parts{bus->db_.get(), bus->committer_.get(), bus->tail_.get(), &bus->registry_,
                        bus->quarantine_.get(), bus->scheduler_.get(), bus->timeline_.get(), &bus->options_});
  bus->ingestion_ =
      std::make_unique<Ingestion>(bus->db_.get(), &bus->schemas_, bus->quarantine_.get(), options.max_payload_bytes,
                                  [self = bus.get()](WriteSet* writes) { return self->CommitWrites(writes); });
  bus->states_ = std::make_unique<DeliveryStates>(bus->db_.get(), options.max_payload_bytes);
  bus->operator_ = std::make_unique<OperatorActionsImpl>(OperatorActionsImpl::Parts{
      &bus->gate_, bus->db_.get(), bus->committer_.get(), &bus->registry_, bus->dispatcher_.get(), bus.get(),
      &bus->app_cfs_, &bus->options_, bus->log_.get(), bus->inbox_window_.get()});
  // A removal a crash cut short: its inbox records go before anything runs.
  for (uint32_t id : removals_left) {
    if (Status s = bus->operator_->DeleteRemovedInbox(id); !s.ok()) return s;
  }
  if (!options.metrics_http.empty()) {
    BusImpl* self = bus.get();
    Status s = MetricsHttpServer::Start(
        options.metrics_http, [self] { return self->MetricsText(); }, &bus->metrics_http_);
    if (!s.ok()) return s;
  }
  if (options.admin_socket) {
    if (Status s = AdminServer::Start(options.dir, bus.get(), &bus->admin_); !s.ok()) return s;
  }
  *out = std::move(bus);
  return Status::OK();
}

Status BusImpl::LoadTimeline() {
  std::string value;
  bool found = false;
  if (Status s = db_->Get(db_->cf(storage::Cf::kMeta), storage::kMetaTimeline, &value, &found); !s.ok()) return s;
  Timeline::State state;
  if (found && !Timeline::Decode(value, &state)) return Status::Corruption("the stored timeline is malformed");
  timeline_ = std::make_unique<Timeline>(options_.clock.get(), state);
  return Status::OK();
}

Status BusImpl::Recover(uint64_t* last_seq, uint64_t* trimmed_below, std::vector<uint32_t>* removals_left) {
  RecoveredState state;
  if (Status s = ReadRecoveredState(*db_, &state); !s.ok()) return s;
  *last_seq = state.last_seq;
  *trimmed_below = state.trimmed_below;
  MutexLock lock(&registry_.mu);
  registry_.by_name = std::move(state.subscribers);
  registry_.next_id = state.next_subscriber_id;
  if (inbox_window_ != nullptr) {
    for (const auto& [name, entry] : registry_.by_name)
      inbox_window_->SetCheckpoint(entry.id, entry.durable.checkpoint);
    for (uint32_t id : state.removed_subscriber_ids) inbox_window_->Forget(id);
  }
  *removals_left = std::move(state.removed_with_inbox_left);
  return Status::OK();
}

BusImpl::~BusImpl() {
  Close().IgnoreError();
  dispatcher_.reset();  // before the registry and committer it points into
}

Transaction BusImpl::Begin() { return ScopeAccess::NewTransaction(std::make_unique<ScopeRep>(this)); }

ReadView BusImpl::Read() {
  auto rep = std::make_unique<ViewRep>(this);
  InCall call(this);
  // After Close there is no snapshot to take: the view's reads say Closed.
  if (call.admitted()) rep->reader.TakeSnapshot(db_.get());
  return ScopeAccess::NewView(std::move(rep));
}

Result<Receipt> BusImpl::CommitTransaction(ScopeRep* scope, bool sync) {
  if (scope->committed) return ScopeRep::AlreadyCommitted();
  scope->committed = true;
  scope->reader.Release();  // a committed transaction reads no more
  if (!scope->error.ok()) return scope->error;
  return CommitWrites(&scope->writes, sync);
}

Result<Receipt> BusImpl::CommitWrites(WriteSet* writes, bool sync) {
  Receipt receipt;
  if (writes->empty()) return receipt;
  Status s;
  {
    InCall call(this);
    if (!call.admitted()) return ClosedStatus();
    s = committer_->CommitOne(writes, sync || options_.durability == Durability::kSync, &receipt.first_seq);
  }
  if (!s.ok()) return s;
  receipt.event_ids.reserve(writes->events.size());
  for (const auto& e : writes->events) receipt.event_ids.push_back(e->id);
  return receipt;
}

void BusImpl::OnCommitted(std::vector<std::shared_ptr<const Event>>& events) { dispatcher_->NotifyCommitted(events); }

void BusImpl::OnTimersChanged(const std::vector<TimerChange>& changes) {
  if (scheduler_->OnTimersChanged(changes) && dispatcher_ != nullptr) dispatcher_->NotifyTimers();
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
  if (options_.require_schemas) WarnUnpublishableTypes();
  if (!dispatcher_->started()) dispatcher_->Start();
  return Status::OK();
}

void BusImpl::WarnUnpublishableTypes() {
  std::vector<std::pair<std::string, std::string>> silent;  // (type, subscriber)
  {
    MutexLock lock(&registry_.mu);
    for (const auto& [name, entry] : registry_.by_name) {
      if (entry.active == nullptr) continue;
      for (const std::string& type : entry.active->types) {
        if (!schemas_.CanArrive(type) && unpublishable_warned_.insert(type).second) silent.emplace_back(type, name);
      }
    }
  }
  if (silent.empty()) return;
  const std::vector<std::string> registered = schemas_.ContractTypes();
  for (const auto& [type, subscriber] : silent) {
    std::string nearest;
    for (const std::string& near : ClosestNames(type, registered, 3)) nearest += (nearest.empty() ? "" : ", ") + near;
    log_->logger().warn(
        "walbus: subscriber {} takes {}, which has no schema: under require_schemas no event of it can be published "
        "or ingested{}",
        subscriber, type, nearest.empty() ? std::string() : "; types with a schema near it: " + nearest);
  }
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
  Status waited = receipt.event_ids.empty() ? Status::OK() : dispatcher_->WaitFor(receipt.last_seq(), timeout, names);
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
    if (Status s = dispatcher_->WaitFor(target, left); !s.ok()) return s;
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
    return dispatcher_->WaitSettled(timeout);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (uint64_t target = committer_->last_seq();;) {
    if (gate_.closed()) return ClosedStatus();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status::TimedOut("subscribers have not caught up with the outbox");
    if (Status s = dispatcher_->WaitFor(target, left); !s.ok()) return s;
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
  return dispatcher_->WaitFor(committer_->last_seq(), timeout);
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
  dispatcher_->CancelWaits();
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
