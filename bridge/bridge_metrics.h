// The bridge's metrics, as families of the bus's metrics (walbus/metrics.h):
// each relay and inbound consumer adds one series per family, labelled with
// its name.
#ifndef WALBUS_BRIDGE_BRIDGE_METRICS_H_
#define WALBUS_BRIDGE_BRIDGE_METRICS_H_

#include <string>
#include <utility>
#include <vector>

#include "walbus/metrics.h"

namespace walbus::bridge {

// Appends a family `name` holding one series, labelled `label`.
inline void AddSeries(std::vector<MetricFamily>* out, std::string name, MetricType type, std::string help,
                      const MetricLabel& label, double value) {
  MetricSample sample;
  sample.labels = {label};
  sample.value = value;
  out->push_back(MetricFamily{std::move(name), type, std::move(help), {std::move(sample)}});
}

// What MetricsText() of a relay or an inbound consumer returns: its part of
// the bus's metrics alone.
inline std::string TextOf(const MetricsSource& source) {
  std::vector<MetricFamily> families;
  source.CollectMetrics(&families);
  return PrometheusText(families);
}

}  // namespace walbus::bridge

#endif  // WALBUS_BRIDGE_BRIDGE_METRICS_H_
