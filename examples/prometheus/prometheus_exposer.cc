// prometheus_exposer: a bus's metrics in the application's own
// prometheus-cpp endpoint, beside its own metrics (walbus::prometheus).
//   prometheus_exposer [DIR]   (default ./prometheus-bus)
// Serves 127.0.0.1 on a free port for as long as it runs (a second here),
// and says how many families and series it serves.
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "walbus/bus.h"
#include "walbus/prometheus.h"

static int Fail(const walbus::Status& s) {
  std::fprintf(stderr, "prometheus_exposer: %s\n", s.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  walbus::Options opt;
  opt.dir = argc > 1 ? argv[1] : "prometheus-bus";
  std::unique_ptr<walbus::Bus> bus;
  if (walbus::Status s = walbus::Bus::Open(opt, &bus); !s.ok()) return Fail(s);
  walbus::SubscriberOptions counter;
  counter.name = "counter";
  counter.handler = [](const walbus::Event&, walbus::HandlerContext&) { return walbus::Outcome::Done(); };
  if (walbus::Status s = bus->Subscribe(std::move(counter)); !s.ok()) return Fail(s);
  if (walbus::Status s = bus->Start(); !s.ok()) return Fail(s);

  // The application's endpoint and its own metrics...
  prometheus::Exposer exposer("127.0.0.1:0");
  auto registry = std::make_shared<prometheus::Registry>();
  auto& orders = prometheus::BuildCounter().Name("app_orders_total").Help("Orders taken.").Register(*registry).Add({});
  exposer.RegisterCollectable(registry);
  // ... and the bus's, on the same endpoint.
  auto walbus_metrics = walbus::MakePrometheusCollectable(bus.get());
  exposer.RegisterCollectable(walbus_metrics);

  walbus::Transaction tx = bus->Begin();
  walbus::EventSpec placed;
  placed.type = "orders.order-placed.v1";
  placed.subject = "order-1";
  if (walbus::Result<walbus::EventId> id = tx.Publish(placed); !id.ok()) return Fail(id.status());
  if (walbus::Result<walbus::Receipt> r = tx.Commit(); !r.ok()) return Fail(r.status());
  orders.Increment();
  if (walbus::Status s = bus->WaitIdle(std::chrono::seconds(10)); !s.ok()) return Fail(s);
  std::this_thread::sleep_for(std::chrono::seconds(1));

  size_t series = 0;
  const auto families = walbus_metrics->Collect();
  for (const auto& family : families) series += family.metric.size();
  std::printf("prometheus_exposer: %zu walbus families (%zu series) on http://127.0.0.1:%d/metrics\n", families.size(),
              series, exposer.GetListeningPorts().at(0));
  walbus_metrics.reset();  // before the bus: the exposer stops collecting it
  return families.empty() ? 1 : 0;
}
