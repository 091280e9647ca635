// BusImpl: the Bus behind walbus::Bus::Open. Owns storage, the committer,
// the tail cache, the registry, the dispatcher and the parts the public
// calls go to (contracts, operator actions, ingestion, delivery states,
// metrics), and their lifecycle.
#ifndef WALBUS_BUS_API_BUS_IMPL_H_
#define WALBUS_BUS_API_BUS_IMPL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "bus/api/bus_metrics.h"
#include "bus/api/delivery_states.h"
#include "bus/api/event_contracts.h"
#include "bus/api/ingestion.h"
#include "bus/api/operator_actions.h"
#include "bus/api/registrations.h"
#include "bus/api/unit_host.h"
#include "bus/core/committer.h"
#include "bus/core/disk_budget.h"
#include "bus/core/quarantine.h"
#include "bus/core/schema_registry.h"
#include "bus/core/scope.h"
#include "bus/dispatch/dispatcher.h"
#include "bus/dispatch/recovery.h"
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

class BusImpl final : public Bus, public CommitListener {
 public:
  static Status Open(const Options& options, std::unique_ptr<Bus>* bus);
  // Test seam: opens storage through `env` (fault injection), which must
  // outlive the bus. Not part of the public API.
  static Status OpenWithEnv(const Options& options, rocksdb::Env* env, std::unique_ptr<Bus>* bus);
  ~BusImpl() override;

  Transaction Begin() override;
  ReadView Read() override;
  Status Subscribe(SubscriberOptions subscriber) override;
  Status Start() override;
  Result<IngestResult> IngestEvent(const Event& event, const IngestOptions& options) override;
  Result<IngestResult> IngestEnvelope(std::string_view envelope, const IngestOptions& options) override;
  Status Quarantine(std::string_view input, std::string_view source, std::string_view reason) override;
  EventContracts& Contracts() override { return *contracts_; }
  OperatorActions& Operator() override { return *operator_; }
  Status WaitHandled(const Receipt& receipt, const std::vector<std::string>& subscribers,
                     std::chrono::milliseconds timeout, std::vector<DeliveryState>* states) override;
  Status WaitQuiescent(const Receipt& receipt, std::chrono::milliseconds timeout) override;
  Result<std::vector<DeliveryState>> Pending(std::string_view subscriber, uint64_t limit) override;
  Status WaitCaughtUp(std::chrono::milliseconds timeout) override;
  Result<std::vector<DeliveryState>> EventStatus(const EventId& id) override;
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
  // starts (ProgressBoard::Cancel), so Close() never waits out their
  // timeouts.
  class InCall : public CallGate::Call {
   public:
    explicit InCall(BusImpl* bus) : CallGate::Call(&bus->gate_) {}
  };
  // InvalidArgument, naming `call`, on one of this bus's handler threads:
  // the calls that wait for handlers (Close and the waits) would wait for
  // the handler that called them. OK elsewhere.
  Status RefusedInHandler(std::string_view call) const;

 private:
  explicit BusImpl(const Options& options) : options_(options), schemas_(options.require_schemas) {
    if (options_.clock == nullptr) options_.clock = Clock::System();
  }
  // Open's steps, in order.
  // @{
  // Opens storage and reads the registry into registry_; *recovered gets
  // the outbox's bounds and the removals an earlier run left unfinished.
  Status OpenStorage(rocksdb::Env* env, RecoveredState* recovered);
  // Everything a commit passes through: the committer and what it writes
  // beside (contracts, quarantine, timeline, scheduled events).
  Status MakeCommitPath(uint64_t last_seq);
  // The dispatcher and the parts that read delivery or act on it; ends
  // the removals `recovered` lists.
  Status MakeDelivery(const RecoveredState& recovered);
  // The metrics and admin endpoints Options ask for.
  Status StartServers();
  // @}

  Options options_;                            // as given, with the clock resolved; not changed after Open
  std::shared_ptr<InboxWindow> inbox_window_;  // Options::inbox_window; shared with storage
  std::unique_ptr<storage::Db> db_;
  AppColumnFamilies app_cfs_;  // set once db_ is open
  std::unique_ptr<TailCache> tail_;
  std::unique_ptr<Committer> committer_;
  Registry registry_;
  std::unique_ptr<Registrations> registrations_;
  SchemaRegistry schemas_;
  std::unique_ptr<BusLog> log_;
  // kBuffered only; after db_ and log_, which it uses until it stops.
  std::unique_ptr<WalSyncer> wal_syncer_;
  std::unique_ptr<internal::Quarantine> quarantine_;
  std::unique_ptr<DiskBudget> disk_budget_;  // made once storage is open
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<UnitHost> units_;  // once timeline_ is loaded
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;  // Options::metrics_http; stopped first by Close()
  std::unique_ptr<AdminServer> admin_;               // Options::admin_socket; stopped first by Close()
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<BusMetrics> metrics_;  // reads the parts above
  std::unique_ptr<DeliveryStates> states_;
  std::unique_ptr<Ingestion> ingestion_;  // reads storage
  std::unique_ptr<EventContractsImpl> contracts_;
  std::unique_ptr<OperatorActionsImpl> operator_;  // acts on the dispatcher and storage

  Mutex lifecycle_mu_;  // serializes Start and Close
  CallGate gate_;       // admitted calls inside storage (InCall); Close shuts it
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_BUS_IMPL_H_
