// prometheus/collectable.cc: the bus's metrics in an application's own
// prometheus-cpp registry and endpoint (its Exposer), scraped by a real
// Prometheus beside the application's own metrics.
#include "walbus/prometheus.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <chrono>
#include <set>
#include <sstream>
#include <string>

#include "tests/prometheus_server.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using testing::TempDir;

// The series (name and labels) of a text exposition, without values.
std::set<std::string> Series(const std::string& text) {
  std::set<std::string> series;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    series.insert(line.substr(0, line.rfind(' ')));
  }
  return series;
}

std::string Body(const std::string& response) {
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

TEST(PrometheusCollectableTest, OneEndpointServesTheBusAndTheApplication) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  SubscriberOptions s;
  s.name = "billing";
  s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
  ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
  ASSERT_TRUE(bus->Start().ok());
  for (int i = 0; i < 4; ++i) {
    Transaction tx = bus->Begin();
    EventSpec e;
    e.type = "orders.order-placed.v1";
    e.subject = "order-" + std::to_string(i);
    ASSERT_TRUE(tx.Publish(e).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  ASSERT_TRUE(bus->WaitIdle(std::chrono::seconds(10)).ok());

  const int port = testing::FreePort();
  prometheus::Exposer exposer("127.0.0.1:" + std::to_string(port));
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("app_orders_total")
      .Help("Orders the application took.")
      .Register(*registry)
      .Add({})
      .Increment(3);
  exposer.RegisterCollectable(registry);
  std::shared_ptr<prometheus::Collectable> walbus_metrics = MakePrometheusCollectable(bus.get());
  exposer.RegisterCollectable(walbus_metrics);

  // Every series of the bus's own exposition, under the same name and labels.
  const std::string served = Body(testing::Exchange(port, "GET /metrics HTTP/1.0\r\n\r\n"));
  ASSERT_NE(served.find("app_orders_total 3"), std::string::npos) << served;
  const std::set<std::string> theirs = Series(served);
  for (const std::string& series : Series(bus->MetricsText())) {
    EXPECT_EQ(theirs.count(series), 1u) << series << " is not served by the exposer";
  }
  EXPECT_NE(served.find("# TYPE walbus_commit_batch_size histogram"), std::string::npos) << served;

  if (!testing::HavePrometheus()) {
    GTEST_SKIP() << "prometheus is not installed (Debian package prometheus; tools/dev deps installs it)";
  }
  testing::PrometheusServer server(dir.root(), port);
  ASSERT_TRUE(testing::Eventually(
      [&] { return server.Query("walbus_subscriber_handled_total{subscriber=\"billing\"}") == "4"; },
      std::chrono::seconds(60)))
      << server.Query("walbus_subscriber_handled_total");
  EXPECT_EQ(server.Query("app_orders_total"), "3");
  EXPECT_EQ(server.Query("walbus_last_sequence"), "4");
  const std::string metadata = server.Api("metadata?metric=walbus_commit_write_duration_seconds");
  EXPECT_NE(metadata.find("\"type\":\"histogram\""), std::string::npos) << metadata;

  // Destroyed, the collectable is no longer collected.
  walbus_metrics.reset();
  EXPECT_EQ(Body(testing::Exchange(port, "GET /metrics HTTP/1.0\r\n\r\n")).find("walbus_"), std::string::npos);
}

}  // namespace
}  // namespace walbus
