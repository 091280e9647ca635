#include "walbus/prometheus.h"

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cassert>
#include <limits>
#include <vector>

#include "walbus/bus.h"
#include "walbus/metrics.h"

namespace walbus {
namespace {

prometheus::MetricType TypeOf(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return prometheus::MetricType::Counter;
    case MetricType::kGauge: return prometheus::MetricType::Gauge;
    case MetricType::kHistogram: return prometheus::MetricType::Histogram;
  }
  return prometheus::MetricType::Untyped;
}

prometheus::ClientMetric ClientMetricOf(MetricType type, const MetricSample& sample) {
  prometheus::ClientMetric m;
  for (const MetricLabel& label : sample.labels) m.label.push_back({label.name, label.value});
  switch (type) {
    case MetricType::kCounter: m.counter.value = sample.value; break;
    case MetricType::kGauge: m.gauge.value = sample.value; break;
    case MetricType::kHistogram:
      m.histogram.sample_count = sample.count;
      m.histogram.sample_sum = sample.sum;
      for (const MetricBucket& b : sample.buckets) m.histogram.bucket.push_back({b.cumulative_count, b.upper_bound});
      // As prometheus-cpp's own histograms: the +Inf bucket last.
      m.histogram.bucket.push_back({sample.count, std::numeric_limits<double>::infinity()});
      break;
  }
  return m;
}

class BusCollectable final : public prometheus::Collectable {
 public:
  explicit BusCollectable(Bus* bus) : bus_(bus) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    for (const MetricFamily& family : bus_->Metrics()) {
      prometheus::MetricFamily& f = out.emplace_back();
      f.name = family.name;
      f.help = family.help;
      f.type = TypeOf(family.type);
      for (const MetricSample& sample : family.samples) f.metric.push_back(ClientMetricOf(family.type, sample));
    }
    return out;
  }

 private:
  Bus* const bus_;
};

}  // namespace

std::shared_ptr<prometheus::Collectable> MakePrometheusCollectable(Bus* bus) {
  assert(bus != nullptr);
  return std::make_shared<BusCollectable>(bus);
}

}  // namespace walbus
