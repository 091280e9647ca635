// BusMetrics: the bus's figures as metric families (Bus::Metrics): commits,
// subscribers, replays, the quarantine, scheduled events and storage, then
// what the application's metric sources add. It reads the parts it is
// given and owns none of them.
//
// Threading: thread-safe (every part it reads is, and the sources are
// guarded by their own lock).
#ifndef WALBUS_BUS_API_BUS_METRICS_H_
#define WALBUS_BUS_API_BUS_METRICS_H_

#include <memory>
#include <vector>

#include "bus/core/committer.h"
#include "bus/core/disk_budget.h"
#include "bus/core/quarantine.h"
#include "bus/core/timeline.h"
#include "bus/dispatch/dispatcher.h"
#include "bus/dispatch/scheduler.h"
#include "bus/dispatch/subscriber.h"
#include "bus/dispatch/tail_cache.h"
#include "bus/telemetry/metrics.h"
#include "bus/util/mutex.h"
#include "storage/db.h"
#include "walbus/bus.h"

namespace walbus::internal {

class BusMetrics {
 public:
  // What the figures are read from. REQUIRES: each outlives the metrics.
  struct Parts {
    storage::Db* db;
    Committer* committer;
    TailCache* tail;
    Registry* registry;
    Quarantine* quarantine;
    Scheduler* scheduler;
    Timeline* timeline;
    const Options* options;  // its clock and max_payload_bytes
    DiskBudget* disk_budget;
    const Dispatcher* dispatcher;  // its drops (Options::drop_oldest_types)
  };

  explicit BusMetrics(Parts parts);
  BusMetrics(const BusMetrics&) = delete;
  BusMetrics& operator=(const BusMetrics&) = delete;

  // The families of `stats`, then those storage holds (with
  // `read_storage`: REQUIRES an admitted call), then the sources'.
  std::vector<MetricFamily> Families(const BusStats& stats, bool read_storage);
  // Adds a source (Bus::AddMetricsSource): InvalidArgument when it is
  // null, destroyed, or added already.
  Status AddSource(std::weak_ptr<const MetricsSource> source);

 private:
  // The added sources not destroyed yet (forgetting the others).
  std::vector<std::shared_ptr<const MetricsSource>> LiveSources();
  // Seconds since the event at `seq` was published; 0 when it is not in
  // the outbox (nothing pending) or unreadable. REQUIRES: an admitted
  // call (it may read the outbox).
  double AgeOfSeconds(uint64_t seq);
  void WriteCommitMetrics(MetricsWriter& w, const BusStats& stats);
  void WriteProgress(MetricsWriter& w, const BusStats& stats, bool read_storage);
  void WriteProcessSubscriberMetrics(MetricsWriter& w, const BusStats& stats);
  void WriteReplayMetrics(MetricsWriter& w);
  void WriteQuarantineMetrics(MetricsWriter& w);
  void WriteScheduledMetrics(MetricsWriter& w, bool read_storage);
  void WriteStorageMetrics(MetricsWriter& w);
  // Options::disk_budget, what fills it by kind, and its refusals.
  void WriteDiskBudgetMetrics(MetricsWriter& w);

  const Parts parts_;
  Mutex sources_mu_;
  std::vector<std::weak_ptr<const MetricsSource>> sources_ GUARDED_BY(sources_mu_);
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_BUS_METRICS_H_
