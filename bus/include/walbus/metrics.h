// walbus/metrics.h: metrics as values, for any exposition.
//
// Bus::Metrics() returns every metric of a bus (and of the metrics sources
// added to it, such as the JetStream bridge's) as MetricFamily values;
// PrometheusText() renders them in the Prometheus text exposition format,
// which is what Options::metrics_http serves and Bus::MetricsText returns.
// An application that serves its metrics with a library of its own turns
// the same values into that library's types (walbus/prometheus.h does it
// for prometheus-cpp).
//
// One rule for every counter (a name ending in _total): it counts what
// happened in this process and starts from zero at each Open, as
// Prometheus expects of a counter (rate() and resets() see a restart as a
// reset). What the database counts over its whole life is a gauge whose
// name ends in _persisted; it carries on across restarts.
#ifndef WALBUS_METRICS_H_
#define WALBUS_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "walbus/export.h"

namespace walbus {

// What a family measures, as Prometheus types it.
enum class MetricType : uint8_t {
  kCounter,    // only goes up, from zero at each Open
  kGauge,      // a value now
  kHistogram,  // observations in cumulative buckets, with their sum and count
};

// One label of a series: name="value".
struct MetricLabel {
  std::string name;   // e.g. "subscriber"
  std::string value;  // any UTF-8; rendering escapes it
};

// One bucket of a histogram series.
struct MetricBucket {
  double upper_bound = 0;         // the bucket's `le`
  uint64_t cumulative_count = 0;  // observations at or below upper_bound
};

// One series of a family.
struct MetricSample {
  std::vector<MetricLabel> labels;  // in the order they print
  double value = 0;                 // counters and gauges
  // Histograms: buckets in ascending order without the +Inf one (whose
  // count is `count`), the sum of the observations and their count.
  // @{
  std::vector<MetricBucket> buckets;
  double sum = 0;
  uint64_t count = 0;
  // @}
};

// A metric: its name, type and help, and its series.
struct MetricFamily {
  std::string name;                      // walbus_*, units spelled out
  MetricType type = MetricType::kGauge;  // counter, gauge or histogram
  std::string help;                      // one line
  std::vector<MetricSample> samples;     // one per label set
};

// Something that adds families to a bus's metrics (Bus::AddMetricsSource).
//
// Threading: CollectMetrics is called from the thread that asks the bus
// for its metrics (a scraper's), concurrently with anything else the
// source does; it must not call back into the bus.
class WALBUS_EXPORT MetricsSource {
 public:
  virtual ~MetricsSource() = default;  // a source is destroyed through its interface
  // Appends this source's families to `out`.
  virtual void CollectMetrics(std::vector<MetricFamily>* out) const = 0;
};

// The Prometheus text exposition (format 0.0.4) of `families`: HELP and
// TYPE lines, label values escaped, every number in the shortest form that
// reads back as the same double (le="0.00025", not 0.00025000000000000001).
WALBUS_EXPORT std::string PrometheusText(const std::vector<MetricFamily>& families);

}  // namespace walbus

#endif  // WALBUS_METRICS_H_
