// walbus/prometheus.h: a bus's metrics in an application's prometheus-cpp
// registry (find_package(walbus COMPONENTS prometheus), target
// walbus::prometheus), for applications that already serve their metrics
// with prometheus-cpp and want one endpoint, not a second port:
//
//   prometheus::Exposer exposer("127.0.0.1:9464");
//   auto walbus_metrics = walbus::MakePrometheusCollectable(bus.get());
//   exposer.RegisterCollectable(walbus_metrics);
//
// Every family of Bus::Metrics() comes through, the bridge's included,
// under the same names, types, labels and values as Bus::MetricsText.
// The core library does not depend on prometheus-cpp; this component does.
#ifndef WALBUS_PROMETHEUS_H_
#define WALBUS_PROMETHEUS_H_

#include <memory>

namespace prometheus {
class Collectable;
}  // namespace prometheus

namespace walbus {

class Bus;

// A prometheus-cpp Collectable whose Collect() is bus->Metrics().
// Threading: Collect may run on any thread, as Bus::Metrics may.
// REQUIRES: `bus` is not null and outlives the returned object. Registries
// and exposers hold collectables weakly: destroy the returned pointer
// before the bus, and they stop collecting it.
std::shared_ptr<prometheus::Collectable> MakePrometheusCollectable(Bus* bus);

}  // namespace walbus

#endif  // WALBUS_PROMETHEUS_H_
