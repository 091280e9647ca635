#include "bus/api/bus_metrics.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <map>
#include <optional>
#include <string>

#include "bus/core/envelope.h"
#include "bus/dispatch/replay.h"

namespace walbus::internal {
namespace {

// A durable count less its value at open; 0 should it have gone down.
double CountedSince(uint64_t now, uint64_t at_open) { return now >= at_open ? double(now - at_open) : 0; }

}  // namespace

BusMetrics::BusMetrics(Parts parts) : parts_(parts) {
  assert(parts_.db != nullptr && parts_.committer != nullptr && parts_.tail != nullptr);
  assert(parts_.registry != nullptr && parts_.quarantine != nullptr && parts_.scheduler != nullptr);
  assert(parts_.timeline != nullptr && parts_.options != nullptr && parts_.disk_budget != nullptr &&
         parts_.dispatcher != nullptr);
}

std::vector<MetricFamily> BusMetrics::Families(const BusStats& stats, bool read_storage) {
  MetricsWriter w;
  WriteCommitMetrics(w, stats);
  WriteProgress(w, stats, read_storage);
  WriteProcessSubscriberMetrics(w, stats);
  if (read_storage) WriteReplayMetrics(w);
  WriteQuarantineMetrics(w);
  WriteScheduledMetrics(w, read_storage);
  if (read_storage) WriteStorageMetrics(w);
  std::vector<MetricFamily> families = w.TakeFamilies();
  for (const auto& source : LiveSources()) source->CollectMetrics(&families);
  return families;
}

void BusMetrics::WriteProgress(MetricsWriter& w, const BusStats& stats, bool read_storage) {
  std::vector<SubscriberProgress> progress;
  uint64_t min_checkpoint = stats.last_seq;
  for (const auto& s : stats.subscribers) {
    progress.push_back({s.name, s.checkpoint, s.handled, s.duplicates, s.dead_lettered, s.stale_skipped,
                        read_storage && s.checkpoint < stats.last_seq ? AgeOfSeconds(s.checkpoint + 1) : 0});
    min_checkpoint = std::min(min_checkpoint, s.checkpoint);
  }
  WriteProgressMetrics(w, stats.last_seq,
                       read_storage && min_checkpoint < stats.last_seq ? AgeOfSeconds(min_checkpoint + 1) : 0,
                       progress);
}

Status BusMetrics::AddSource(std::weak_ptr<const MetricsSource> source) {
  const std::shared_ptr<const MetricsSource> added = source.lock();
  if (added == nullptr) return Status::InvalidArgument("AddMetricsSource: no source (null or destroyed)");
  for (const auto& live : LiveSources()) {
    if (live == added) return Status::InvalidArgument("AddMetricsSource: the source was added already");
  }
  MutexLock lock(&sources_mu_);
  sources_.push_back(std::move(source));
  return Status::OK();
}

double BusMetrics::AgeOfSeconds(uint64_t seq) {
  std::vector<std::shared_ptr<const Event>> cached;
  std::optional<std::chrono::system_clock::time_point> time;
  if (parts_.tail->Read(seq, 1, &cached) == 1) {
    time = cached[0]->time;
  } else {
    Status s = parts_.db->ScanOutbox(seq, 1, [&](uint64_t found, std::string_view bytes) {
      Event e;
      if (found == seq && DecodeEnvelope(bytes, parts_.options->max_payload_bytes, &e).ok()) time = e.time;
      return false;
    });
    s.IgnoreError();  // a metric, not an operation: unknown reads as 0
  }
  if (!time) return 0;
  return std::max(0.0, std::chrono::duration<double>(parts_.options->clock->WallNow() - *time).count());
}

std::vector<std::shared_ptr<const MetricsSource>> BusMetrics::LiveSources() {
  std::vector<std::shared_ptr<const MetricsSource>> live;
  MutexLock lock(&sources_mu_);
  std::erase_if(sources_, [&](const std::weak_ptr<const MetricsSource>& weak) {
    std::shared_ptr<const MetricsSource> source = weak.lock();
    if (source == nullptr) return true;
    live.push_back(std::move(source));
    return false;
  });
  return live;
}

void BusMetrics::WriteCommitMetrics(MetricsWriter& w, const BusStats& stats) {
  w.Family("walbus_events_published_total", MetricType::kCounter, "Events committed to the outbox, by type.");
  for (const auto& [type, n] : parts_.committer->PublishedByType()) {
    w.Sample("walbus_events_published_total", MetricsWriter::Label("type", type), static_cast<double>(n));
  }
  w.Family("walbus_tail_cache_bytes", MetricType::kGauge,
           "Bytes of recent events held in memory for the subscribers (Options::tail_cache_bytes); "
           "none while the bus has no subscriber.");
  w.Sample("walbus_tail_cache_bytes", {}, static_cast<double>(parts_.tail->bytes()));
  w.Family("walbus_commits_total", MetricType::kCounter,
           "Commits (transactions, handler completions, checkpoints) written.");
  w.Sample("walbus_commits_total", {}, static_cast<double>(stats.commits));
  w.Family("walbus_storage_write_failures_total", MetricType::kCounter,
           "Writes storage refused: no_space (a full disk) or other (I/O errors).");
  w.Sample("walbus_storage_write_failures_total", MetricsWriter::Label("reason", "no_space"),
           static_cast<double>(stats.write_failures_no_space));
  w.Sample("walbus_storage_write_failures_total", MetricsWriter::Label("reason", "other"),
           static_cast<double>(stats.write_failures_other));
  w.Family("walbus_storage_writes_failing", MetricType::kGauge,
           "1 while the newest write failed: commits fail until storage recovers.");
  w.Sample("walbus_storage_writes_failing", {}, stats.writes_failing ? 1 : 0);
  w.Family("walbus_commit_batch_size", MetricType::kHistogram,
           "Commits written together in one group (one write, one fsync).");
  w.HistogramSamples("walbus_commit_batch_size", {}, parts_.committer->group_sizes().Read());
  w.Family("walbus_commit_write_duration_seconds", MetricType::kHistogram,
           "Time to write one commit group to storage.");
  w.HistogramSamples("walbus_commit_write_duration_seconds", {}, parts_.committer->write_seconds().Read());
}

void BusMetrics::WriteProcessSubscriberMetrics(MetricsWriter& w, const BusStats& stats) {
  // The durable counts less what they were when this process opened the
  // database: counters that start from zero here.
  std::map<std::string, DurableCounters> at_open;
  {
    MutexLock lock(&parts_.registry->mu);
    for (const auto& [name, e] : parts_.registry->by_name) at_open[name] = e.durable;
  }
  struct PerSubscriber {
    const char* name;
    MetricType type;
    const char* help;
    double (*value)(const SubscriberStats&, const DurableCounters& at_open);
  };
  static const PerSubscriber kPerSubscriber[] = {
      {"walbus_subscriber_handled_total", MetricType::kCounter, "Events whose handler effects committed.",
       [](const SubscriberStats& s, const DurableCounters& o) { return CountedSince(s.handled, o.handled); }},
      {"walbus_subscriber_duplicates_total", MetricType::kCounter, "Redeliveries the inbox recognised and skipped.",
       [](const SubscriberStats& s, const DurableCounters& o) { return CountedSince(s.duplicates, o.duplicates); }},
      {"walbus_subscriber_dead_lettered_total", MetricType::kCounter, "Events sent to the dead-letter store.",
       [](const SubscriberStats& s, const DurableCounters& o) {
         return CountedSince(s.dead_lettered, o.dead_lettered);
       }},
      {"walbus_subscriber_stale_skipped_total", MetricType::kCounter,
       "Events skipped as older than the applied version.",
       [](const SubscriberStats& s, const DurableCounters& o) {
         return CountedSince(s.stale_skipped, o.stale_skipped);
       }},
      {"walbus_subscriber_dropped_total", MetricType::kCounter,
       "Events of drop-oldest types deleted for the disk budget before the subscriber took them.",
       [](const SubscriberStats& s, const DurableCounters& o) { return CountedSince(s.dropped, o.dropped); }},
      {"walbus_subscriber_retries_total", MetricType::kCounter, "Handler attempts that failed and were retried.",
       [](const SubscriberStats& s, const DurableCounters&) { return double(s.retries); }},
      {"walbus_subscriber_waits_total", MetricType::kCounter,
       "Handler runs that answered Outcome::Wait: not ready, not a failure.",
       [](const SubscriberStats& s, const DurableCounters&) { return double(s.waits); }},
      {"walbus_subscriber_conflicts_total", MetricType::kCounter,
       "Outcomes that met a concurrent update and ran again.",
       [](const SubscriberStats& s, const DurableCounters&) { return double(s.conflicts); }},
      {"walbus_subscriber_pauses_total", MetricType::kCounter, "Times the subscriber paused on an unknown version.",
       [](const SubscriberStats& s, const DurableCounters&) { return double(s.pauses); }},
      {"walbus_subscriber_paused", MetricType::kGauge, "1 while the subscriber waits for an upcaster.",
       [](const SubscriberStats& s, const DurableCounters&) { return s.paused ? 1.0 : 0.0; }},
      {"walbus_subscriber_in_flight_events", MetricType::kGauge, "Events fetched into memory and not completed.",
       [](const SubscriberStats& s, const DurableCounters&) { return double(s.in_flight); }},
  };
  for (const PerSubscriber& m : kPerSubscriber) {
    w.Family(m.name, m.type, m.help);
    for (const auto& s : stats.subscribers) {
      w.Sample(m.name, MetricsWriter::Label("subscriber", s.name), m.value(s, at_open[s.name]));
    }
  }
  w.Family("walbus_subscriber_paused_on_info", MetricType::kGauge,
           "1 for the type a paused subscriber waits at (no upcaster brings it to a type it takes).");
  for (const auto& s : stats.subscribers) {
    if (!s.paused || s.paused_on.empty()) continue;
    MetricsWriter::Labels labels = MetricsWriter::Label("subscriber", s.name);
    labels.push_back({"type", s.paused_on});
    w.Sample("walbus_subscriber_paused_on_info", std::move(labels), 1);
  }
  w.Family("walbus_subscriber_handler_duration_seconds", MetricType::kHistogram, "Time one handler call took.");
  MutexLock lock(&parts_.registry->mu);
  for (const auto& [name, e] : parts_.registry->by_name) {
    if (e.active == nullptr) continue;
    w.HistogramSamples("walbus_subscriber_handler_duration_seconds", MetricsWriter::Label("subscriber", name),
                       e.active->handler_seconds.Read());
  }
}

void BusMetrics::WriteReplayMetrics(MetricsWriter& w) {
  // From the replays' records (as current as the last checkpoint).
  std::vector<std::pair<uint64_t, storage::ReplayRecord>> replays;
  LoadReplays(*parts_.db, [&](uint64_t id, storage::ReplayRecord& r) {
    replays.emplace_back(id, std::move(r));
  }).IgnoreError();
  w.Family("walbus_replays_running", MetricType::kGauge, "Replays recorded and not ended, by subscriber.");
  std::map<std::string, int> running;
  for (const auto& [id, r] : replays) running[r.subscriber] += IsRunning(r);
  for (const auto& [name, n] : running) w.Sample("walbus_replays_running", MetricsWriter::Label("subscriber", name), n);
  w.Family("walbus_replay_events_persisted", MetricType::kGauge,
           "Events of replays, ended or running, by subscriber and outcome (selected, delivered, skipped, failed).");
  std::map<std::string, std::array<uint64_t, 4>> events;
  for (const auto& [id, r] : replays) {
    auto& e = events[r.subscriber];
    e[0] += r.selected, e[1] += r.delivered, e[2] += r.skipped, e[3] += r.failed;
  }
  static const char* const kOutcomes[] = {"selected", "delivered", "skipped", "failed"};
  for (const auto& [name, e] : events) {
    for (size_t i = 0; i < 4; ++i) {
      MetricsWriter::Labels labels = MetricsWriter::Label("subscriber", name);
      labels.push_back({"outcome", kOutcomes[i]});
      w.Sample("walbus_replay_events_persisted", std::move(labels), static_cast<double>(e[i]));
    }
  }
}

void BusMetrics::WriteQuarantineMetrics(MetricsWriter& w) {
  const uint64_t added = parts_.quarantine->added();
  const uint64_t evicted = parts_.quarantine->evicted();
  w.Family("walbus_quarantined_total", MetricType::kCounter, "Inputs refused into the quarantine.");
  w.Sample("walbus_quarantined_total", {}, static_cast<double>(added - parts_.quarantine->added_at_open()));
  w.Family("walbus_quarantine_evicted_total", MetricType::kCounter, "Quarantine entries dropped to keep its bounds.");
  w.Sample("walbus_quarantine_evicted_total", {}, static_cast<double>(evicted - parts_.quarantine->evicted_at_open()));
  w.Family("walbus_quarantined_persisted", MetricType::kGauge,
           "Inputs refused into the quarantine, over the database's life.");
  w.Sample("walbus_quarantined_persisted", {}, static_cast<double>(added));
  w.Family("walbus_quarantine_evicted_persisted", MetricType::kGauge,
           "Quarantine entries dropped to keep its bounds, over the database's life.");
  w.Sample("walbus_quarantine_evicted_persisted", {}, static_cast<double>(evicted));
}

void BusMetrics::WriteScheduledMetrics(MetricsWriter& w, bool read_storage) {
  // Counted up to this many overdue timers: a scrape reads no more.
  constexpr uint64_t kOverdueCountCap = 100000;
  const Scheduler::Counts counts = parts_.scheduler->counts();
  const Scheduler::Counts at_open = parts_.scheduler->counts_at_open();
  w.Family("walbus_scheduled_pending", MetricType::kGauge,
           "Scheduled events waiting for their time (not in the outbox, not backlog).");
  w.Sample("walbus_scheduled_pending", {}, static_cast<double>(counts.pending));
  if (const auto next = read_storage ? parts_.scheduler->next_due_ms() : std::nullopt) {
    w.Family("walbus_scheduled_next_due_seconds", MetricType::kGauge,
             "Seconds until the next scheduled event falls due; negative when it is overdue.");
    const double now_ms = static_cast<double>(parts_.timeline->NowMs());
    w.Sample("walbus_scheduled_next_due_seconds", {}, (static_cast<double>(*next) - now_ms) / 1000.0);
  }
  if (read_storage) {
    w.Family("walbus_scheduled_overdue", MetricType::kGauge,
             "Scheduled events past their time and not fired yet (counted up to 100000).");
    w.Sample("walbus_scheduled_overdue", {}, static_cast<double>(parts_.scheduler->CountOverdue(kOverdueCountCap)));
  }
  w.Family("walbus_scheduled_fired_total", MetricType::kCounter, "Scheduled events that entered the outbox.");
  w.Sample("walbus_scheduled_fired_total", {}, CountedSince(counts.fired, at_open.fired));
  w.Family("walbus_scheduled_cancelled_total", MetricType::kCounter, "Scheduled events cancelled before they fired.");
  w.Sample("walbus_scheduled_cancelled_total", {}, CountedSince(counts.cancelled, at_open.cancelled));
  w.Family("walbus_scheduled_lateness_seconds", MetricType::kHistogram,
           "How long after its due time a scheduled event entered the outbox.");
  w.HistogramSamples("walbus_scheduled_lateness_seconds", {}, parts_.scheduler->lateness().Read());
}

void BusMetrics::WriteStorageMetrics(MetricsWriter& w) {
  w.Family("walbus_storage_sst_bytes", MetricType::kGauge, "Bytes of table files on disk, all column families.");
  w.Sample("walbus_storage_sst_bytes", {}, static_cast<double>(parts_.db->SumProperty("rocksdb.total-sst-files-size")));
  w.Family("walbus_storage_memtable_bytes", MetricType::kGauge, "Bytes of memtables, all column families.");
  w.Sample("walbus_storage_memtable_bytes", {},
           static_cast<double>(parts_.db->SumProperty("rocksdb.cur-size-all-mem-tables")));
  w.Family("walbus_storage_cache_bytes", MetricType::kGauge,
           "Bytes held in storage's block cache, the memtables' charge included (Options::memory_budget).");
  w.Sample("walbus_storage_cache_bytes", {}, static_cast<double>(parts_.db->DbProperty("rocksdb.block-cache-usage")));
  w.Family("walbus_storage_table_readers_bytes", MetricType::kGauge,
           "Bytes of open table files' readers outside the block cache.");
  w.Sample("walbus_storage_table_readers_bytes", {},
           static_cast<double>(parts_.db->SumProperty("rocksdb.estimate-table-readers-mem")));
  const storage::Db::Written written = parts_.db->written();
  w.Family("walbus_storage_written_bytes_total", MetricType::kCounter,
           "Bytes storage wrote since the bus opened, to: log (the write-ahead log), flush (table files from "
           "memtables), compaction (table files compactions rewrote).");
  w.Sample("walbus_storage_written_bytes_total", MetricsWriter::Label("to", "log"),
           static_cast<double>(written.log_bytes));
  w.Sample("walbus_storage_written_bytes_total", MetricsWriter::Label("to", "flush"),
           static_cast<double>(written.flush_bytes));
  w.Sample("walbus_storage_written_bytes_total", MetricsWriter::Label("to", "compaction"),
           static_cast<double>(written.compaction_bytes));
  w.Family("walbus_storage_write_stopped", MetricType::kGauge, "1 while storage stops writes (a write stall).");
  w.Sample("walbus_storage_write_stopped", {}, parts_.db->DbProperty("rocksdb.is-write-stopped") > 0 ? 1 : 0);
  w.Family("walbus_storage_delayed_write_rate_bytes_per_second", MetricType::kGauge,
           "Write rate storage throttles to; 0 when not delayed.");
  w.Sample("walbus_storage_delayed_write_rate_bytes_per_second", {},
           static_cast<double>(parts_.db->DbProperty("rocksdb.actual-delayed-write-rate")));
  WriteDiskBudgetMetrics(w);
}

void BusMetrics::WriteDiskBudgetMetrics(MetricsWriter& w) {
  const DiskUse use = parts_.disk_budget->Measure();
  WriteDiskUseMetrics(w, use);
  w.Family("walbus_disk_budget_seconds_to_full", MetricType::kGauge,
           "Seconds until the disk budget is reached at the rate use grew over the last 10 s or more: 0 once "
           "reached, +Inf without a budget or while use is not growing.");
  w.Sample("walbus_disk_budget_seconds_to_full", {},
           parts_.disk_budget->SecondsToFull(use, parts_.options->clock->Now()));
  w.Family("walbus_disk_budget_bytes", MetricType::kGauge, "Options::disk_budget; 0 when there is none.");
  w.Sample("walbus_disk_budget_bytes", {}, static_cast<double>(parts_.disk_budget->budget()));
  w.Family("walbus_disk_budget_refusals_total", MetricType::kCounter,
           "Commits of events refused with ResourceExhausted because the disk budget was reached.");
  w.Sample("walbus_disk_budget_refusals_total", {}, static_cast<double>(parts_.disk_budget->refusals()));
  w.Family("walbus_disk_budget_dropped_total", MetricType::kCounter,
           "Events of Options::drop_oldest_types deleted to make room in the disk budget, by type.");
  for (const auto& [type, n] : parts_.dispatcher->DroppedSinceOpen()) {
    w.Sample("walbus_disk_budget_dropped_total", MetricsWriter::Label("type", type), static_cast<double>(n));
  }
}

}  // namespace walbus::internal
