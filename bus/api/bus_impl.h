// BusImpl: the Bus behind walbus::Bus::Open. Owns storage, the committer,
// the tail cache, the registry and the dispatcher, and their lifecycle.
#ifndef WALBUS_BUS_API_BUS_IMPL_H_
#define WALBUS_BUS_API_BUS_IMPL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "bus/api/bus_metrics.h"
#include "bus/api/delivery_states.h"
#include "bus/api/ingestion.h"
#include "bus/core/committer.h"
#include "bus/core/quarantine.h"
#include "bus/core/schema_registry.h"
#include "bus/core/scope.h"
#include "bus/dispatch/dispatcher.h"
#include "bus/dispatch/retention.h"
#include "bus/dispatch/subscriber.h"
#include "bus/dispatch/tail_cache.h"
#include "bus/ops/admin_server.h"
#include "bus/ops/metrics_http.h"
#include "bus/telemetry/log.h"
#include "bus/telemetry/metrics.h"
#include "bus/util/mutex.h"
#include "storage/db.h"
#include "walbus/bus.h"

namespace walbus::internal {

class BusImpl final : public Bus, public CommitListener, public ScopeHost {
 public:
  static Status Open(const Options& options, std::unique_ptr<Bus>* bus);
  // Test seam: opens storage through `env` (fault injection), which must
  // outlive the bus. Not part of the public API.
  static Status OpenWithEnv(const Options& options, rocksdb::Env* env, std::unique_ptr<Bus>* bus);
  ~BusImpl() override;

  Transaction Begin() override;
  ReadView Read() override;
  Status Subscribe(SubscriberOptions subscriber) override;
  Result<ActionReport> RemoveSubscriber(const std::string& name, const OperatorAction& action) override;
  Status Start() override;
  Status RegisterVerifier(const std::string& type, PayloadVerifier verifier) override;
  Status RegisterUpcaster(const std::string& from_type, const std::string& to_type, Upcaster upcaster) override;
  Result<SchemaVersion> RegisterSchema(const std::string& type, std::string_view binary_schema) override;
  Result<SchemaVersion> Schema(const std::string& type, uint32_t version) const override;
  Result<SchemaVersion> LatestSchema(const std::string& type) const override;
  Result<Receipt> Ingest(std::string_view envelope, std::string_view source) override;
  Result<IngestResult> IngestEvent(const Event& event, const IngestOptions& options) override;
  Result<IngestResult> IngestEnvelope(std::string_view envelope, const IngestOptions& options) override;
  Status Quarantine(std::string_view input, std::string_view source, std::string_view reason) override;
  Status WaitHandled(const Receipt& receipt, const std::vector<std::string>& subscribers,
                     std::chrono::milliseconds timeout, std::vector<DeliveryState>* states) override;
  Status WaitQuiescent(const Receipt& receipt, std::chrono::milliseconds timeout) override;
  Result<std::vector<DeliveryState>> Pending(const std::string& subscriber, size_t limit) override;
  Status WaitCaughtUp(std::chrono::milliseconds timeout) override;
  Result<std::vector<DeliveryState>> EventStatus(const EventId& id) override;
  Result<ActionReport> RedriveDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action) override;
  Result<ActionReport> SkipDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action) override;
  Result<ActionReport> PurgeDeadLetters(const DeadLetterSelection& selection, const OperatorAction& action) override;
  Result<ReplayReport> Replay(const ReplayRequest& request) override;
  Status CancelReplay(uint64_t replay_id, const OperatorAction& action) override;
  Result<ReplayReport> GetReplay(uint64_t replay_id) override;
  Result<uint64_t> CancelScheduled(const EventId& id, const OperatorAction& action) override;
  // AbandonProcessInstance (walbus/process.h; bus_processes.cc).
  Result<uint64_t> AbandonProcessInstance(std::string_view name, std::string_view key, const OperatorAction& action);
  Status WaitIdle(std::chrono::milliseconds timeout) override;
  BusStats Stats() override;
  std::string MetricsText() override;
  std::vector<MetricFamily> Metrics() override;
  Status AddMetricsSource(std::weak_ptr<const MetricsSource> source) override;
  void Log(LogLevel level, std::string_view line) override;
  Status Close() override;

  // CommitListener: the leader hands over each group's events.
  void OnCommitted(std::vector<std::shared_ptr<const Event>>& events) override;
  void OnTimersChanged(const std::vector<TimerChange>& changes) override;

  // Held by a public call for as long as it may use storage (CallGate).
  // Calls that wait for the dispatcher give up with Closed when Close()
  // starts (Dispatcher::CancelWaits), so Close() never waits out their
  // timeouts.
  class InCall : public CallGate::Call {
   public:
    explicit InCall(BusImpl* bus) : CallGate::Call(&bus->gate_) {}
  };
  static Status ClosedStatus() { return internal::ClosedStatus(); }
  // InvalidArgument, naming `call`, on one of this bus's handler threads:
  // the calls that wait for handlers (Close and the waits) would wait for
  // the handler that called them. OK elsewhere.
  Status RefusedInHandler(std::string_view call) const;

  // ScopeHost: for WriteScope, inside an admitted InCall (or a handler's
  // context).
  CallGate& gate() override { return gate_; }
  storage::Db* db() const override { return db_.get(); }
  const Options& options() const override { return options_; }
  const SchemaRegistry& schemas() const override { return schemas_; }
  const AppColumnFamilies& app_column_families() const override { return app_cfs_; }
  Timeline& timeline() override { return *timeline_; }
  Result<Receipt> CommitTransaction(ScopeRep* scope) override;
  // Commits `writes` inside an admitted call, with the durability of
  // Options (a Transaction's, an ingested event's).
  Result<Receipt> CommitWrites(WriteSet* writes);

 private:
  explicit BusImpl(const Options& options) : options_(options), schemas_(options.require_schemas) {
    if (options_.clock == nullptr) options_.clock = Clock::System();
  }
  // Reads the registry and the outbox's bounds; *removals_left gets the
  // removed subscribers whose inbox records may not all be deleted yet.
  Status Recover(uint64_t* last_seq, uint64_t* trimmed_below, std::vector<uint32_t>* removals_left);
  // Makes each type's latest accepted schema its payloads' contract.
  Status LoadContracts();
  // The timeline as last stored.
  Status LoadTimeline();
  // Subscriber registrations (bus_subscribers.cc).
  // @{
  // Where a subscriber registered now with `start` starts: the checkpoint
  // its first event follows. InvalidArgument for a seq the outbox does
  // not hold.
  Status StartCheckpoint(const std::string& name, const StartPosition& start, uint64_t* checkpoint)
      REQUIRES(registry_.mu);
  Status Register(const std::string& name, const StartPosition& start, Registry::Entry* entry) REQUIRES(registry_.mu);
  // The dead letters and parked subjects a removal of subscriber `id` drops.
  Status SelectForRemoval(uint32_t id, ActionReport* report);
  // A removal's one commit: its record, the tombstone, and the ranges of
  // every record of the subscriber.
  void AddRemovalWrites(const std::string& name, const Registry::Entry& entry, const OperatorAction& action,
                        const ActionReport& report, WriteSet* writes);
  // Deletes removed subscriber `id`'s inbox records, then marks its
  // tombstone done. REQUIRES: `id` is removed.
  Status DeleteRemovedInbox(uint32_t id);
  // @}
  enum class ActionKind : uint8_t { kRedrive, kSkip, kPurge };
  // A rebuild's writes beside its record (ReplayRequest::
  // clear_column_families): the clears, and the deletion of the inbox
  // records of what the subscriber handled above its checkpoint, so those
  // events run again, live, on the cleared state. InvalidArgument for an
  // unknown column family; NotSupported when part of the history is gone or
  // dead letters wait. REQUIRES: the subscriber is not active, and cannot
  // become so before the commit.
  Status AddRebuildWrites(const ReplayRequest& request, uint32_t sub_id, uint64_t checkpoint, WriteSet* writes)
      REQUIRES(registry_.mu);
  // What the replay `record` would select and do, read from the outbox and
  // the inbox, with nothing recorded (OperatorAction::dry_run).
  Result<ReplayReport> DryRunReplay(const ReplayRequest& request, storage::ReplayRecord record,
                                    const Subscriber* active, uint32_t sub_id, uint64_t now_ms);
  // The shared part of the dead-letter actions: checks, selects, records
  // the action with its unparking and deletions in the same commit, and
  // fills the report. *id gets the subscriber's id.
  Status ActOnDeadLetters(ActionKind kind, const DeadLetterSelection& selection, const OperatorAction& action,
                          ActionReport* report, uint32_t* id);
  // The id of the next operator action (every kind shares the sequence).
  Status NextActionId(uint64_t* id) REQUIRES(actions_mu_);
  // Restarts the running replays of a subscriber that became active.
  Status ResumeReplays(const std::shared_ptr<Subscriber>& sub);
  // Writes `sub`'s RegistrationRecord.
  Status StoreRegistration(const Subscriber& sub) REQUIRES(registry_.mu);
  // Reads the subjects a dead letter of `sub` holds (PoisonPolicy::kParkKey).
  Status LoadParked(Subscriber* sub);
  // Under require_schemas, warns once about each type a subscriber takes
  // that nothing can publish (no schema, no upcaster from one).
  void WarnUnpublishableTypes() REQUIRES(lifecycle_mu_);

  Options options_;                            // as given, with the clock resolved; not changed after Open
  std::shared_ptr<InboxWindow> inbox_window_;  // Options::inbox_window; shared with storage
  std::unique_ptr<storage::Db> db_;
  AppColumnFamilies app_cfs_;  // set once db_ is open
  std::unique_ptr<TailCache> tail_;
  std::unique_ptr<Committer> committer_;
  Registry registry_;
  SchemaRegistry schemas_;
  std::unique_ptr<BusLog> log_;
  // kBuffered only; after db_ and log_, which it uses until it stops.
  std::unique_ptr<WalSyncer> wal_syncer_;
  std::unique_ptr<internal::Quarantine> quarantine_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;  // Options::metrics_http; stopped first by Close()
  std::unique_ptr<AdminServer> admin_;               // Options::admin_socket; stopped first by Close()
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<BusMetrics> metrics_;  // reads the parts above
  std::unique_ptr<DeliveryStates> states_;
  std::unique_ptr<Ingestion> ingestion_;  // reads storage

  Mutex lifecycle_mu_;  // serializes Start and Close
  // Types subscribed to that no event can arrive as under require_schemas,
  // warned about once each.
  std::set<std::string> unpublishable_warned_ GUARDED_BY(lifecycle_mu_);
  Mutex actions_mu_;  // serializes operator actions (their ids)
  Mutex schemas_mu_;  // serializes schema registrations (bus_schemas.cc)
  CallGate gate_;     // admitted calls inside storage (InCall); Close shuts it
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_BUS_IMPL_H_
