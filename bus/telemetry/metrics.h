// Histogram: a fixed-bucket distribution for metrics, cheap enough for the
// commit and handler paths.
//
// Threading: Observe() is thread-safe and lock-free; Read() may run
// concurrently and sees each counter at some recent value.
#ifndef WALBUS_BUS_TELEMETRY_METRICS_H_
#define WALBUS_BUS_TELEMETRY_METRICS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "walbus/metrics.h"

namespace walbus::internal {

class Histogram {
 public:
  // REQUIRES: bounds ascending; at most 32 of them.
  explicit Histogram(std::vector<double> bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

  // Bucket bounds for durations (seconds) and for counts of one or more.
  static std::vector<double> SecondsBounds();
  static std::vector<double> SizeBounds();

 private:
  const std::vector<double> bounds_;
  std::atomic<uint64_t> counts_[33] = {};
  std::atomic<uint64_t> sum_nanos_{0};  // sum in units of 1e-9
};

// Collects metric families (walbus/metrics.h), one family at a time: each
// Sample or HistogramSamples call adds a series to the family named last.
class MetricsWriter {
 public:
  using Labels = std::vector<MetricLabel>;

  void Family(const std::string& name, MetricType type, const std::string& help);
  // REQUIRES: `name` is the family named last.
  // @{
  void Sample(const std::string& name, Labels labels, double value);
  void HistogramSamples(const std::string& name, Labels labels, const Histogram::Snapshot& h);
  // @}
  const std::vector<MetricFamily>& families() const { return families_; }
  std::vector<MetricFamily> TakeFamilies() { return std::move(families_); }
  std::string text() const { return PrometheusText(families_); }

  // One label, e.g. Label("subscriber", name).
  static Labels Label(std::string key, std::string value);

 private:
  MetricSample& NewSample(const std::string& name, Labels labels);

  std::vector<MetricFamily> families_;
};

// A number as PrometheusText prints it (0.00025, 5e-05, +Inf), for other
// renderings of the same values.
std::string MetricNumber(double v);

// What the database itself records of a subscriber's progress: the part of
// the metrics that a live bus and the command-line tool (reading a stopped
// or live database) render alike, under the same names.
struct SubscriberProgress {
  std::string name;
  uint64_t checkpoint = 0;
  uint64_t handled = 0;
  uint64_t duplicates = 0;
  uint64_t dead_lettered = 0;
  uint64_t stale_skipped = 0;
  double lag_seconds = 0;  // age of the oldest event it has not completed
};
void WriteProgressMetrics(MetricsWriter& w, uint64_t last_seq, double oldest_backlog_age_seconds,
                          const std::vector<SubscriberProgress>& subscribers);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_TELEMETRY_METRICS_H_
