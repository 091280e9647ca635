// bus/ops/metrics_http.cc: the optional /metrics endpoint (Options::metrics_http).
#include "bus/ops/metrics_http.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/prometheus_server.h"
#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using testing::Exchange;
using testing::FreePort;
using testing::PrometheusServer;
using testing::TempDir;

TEST(MetricsHttpTest, ServesMetricsToScrapersAndNothingElse) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  const int port = FreePort();
  o.metrics_http = ":" + std::to_string(port);
  auto bus = testing::OpenBus(o);
  ASSERT_NE(bus, nullptr);
  Transaction tx = bus->Begin();
  EventSpec e;
  e.type = "orders.order-placed.v1";
  e.subject = "order-1";
  ASSERT_TRUE(tx.Publish(e).ok());
  ASSERT_TRUE(tx.Commit().ok());

  const std::string ok = Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(ok.starts_with("HTTP/1.1 200 OK\r\n")) << ok;
  EXPECT_NE(ok.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(ok.find("walbus_events_published_total{type=\"orders.order-placed.v1\"} 1"), std::string::npos) << ok;
  const std::string body = ok.substr(ok.find("\r\n\r\n") + 4);
  EXPECT_NE(ok.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos);

  EXPECT_TRUE(Exchange(port, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 ")) << "only /metrics";
  EXPECT_TRUE(Exchange(port, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
  EXPECT_TRUE(Exchange(port, "nonsense\r\n\r\n").starts_with("HTTP/1.1 400 "));
  const std::string head = Exchange(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK")) << head;
  EXPECT_TRUE(head.ends_with("\r\n\r\n")) << "no body for HEAD";

  ASSERT_TRUE(bus->Close().ok());
  EXPECT_TRUE(Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n").empty()) << "the endpoint closes with the bus";
}

TEST(MetricsHttpTest, BadOrTakenAddressesFailOpen) {
  TempDir dir;
  Options o = testing::TestOptions(dir);
  std::unique_ptr<Bus> bus;
  for (const char* bad : {"9464", "127.0.0.1:", "127.0.0.1:99999", "not-an-ip:9464", ":x"}) {
    o.metrics_http = bad;
    EXPECT_EQ(Bus::Open(o, &bus).code(), Status::Code::kInvalidArgument) << bad;
  }
  const int port = FreePort();
  o.metrics_http = "127.0.0.1:" + std::to_string(port);
  std::unique_ptr<Bus> first;
  ASSERT_TRUE(Bus::Open(o, &first).ok());
  TempDir other;
  Options o2 = testing::TestOptions(other);
  o2.metrics_http = o.metrics_http;
  Status taken = Bus::Open(o2, &bus);
  EXPECT_EQ(taken.code(), Status::Code::kIOError) << taken.ToString();
  EXPECT_NE(taken.message().find("metrics endpoint"), std::string::npos) << taken.ToString();
}

void PublishSome(Bus& bus, int events) {
  for (int i = 0; i < events; ++i) {
    Transaction tx = bus.Begin();
    EventSpec e;
    e.type = "orders.order-placed.v1";
    e.subject = "order-" + std::to_string(i);
    ASSERT_TRUE(tx.Publish(e).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
}

// What a dashboard sees: a real Prometheus scrapes the endpoint through a
// restart of the bus. Counters count each process from zero (resets()
// sees the restart); the *_persisted gauges carry on; types, bucket
// bounds and names come through as written.
TEST(MetricsHttpTest, PrometheusScrapesThroughARestart) {
  if (!testing::HavePrometheus()) {
    GTEST_SKIP() << "prometheus is not installed (Debian package prometheus; tools/dev deps installs it)";
  }
  TempDir dir;
  Options o = testing::TestOptions(dir);
  const int port = FreePort();
  o.metrics_http = "127.0.0.1:" + std::to_string(port);
  PrometheusServer prometheus(dir.root(), port);
  const auto subscribe = [](Bus& bus) {
    SubscriberOptions s;
    s.name = "billing";
    s.handler = [](const Event&, HandlerContext&) { return Outcome::Done(); };
    ASSERT_TRUE(bus.Subscribe(std::move(s)).ok());
    ASSERT_TRUE(bus.Start().ok());
  };
  const std::string handled = "walbus_subscriber_handled_total{subscriber=\"billing\"}";
  const std::string persisted = "walbus_subscriber_handled_persisted{subscriber=\"billing\"}";
  const auto scraped = [&](const std::string& series, const std::string& value) {
    return testing::Eventually([&] { return prometheus.Query(series) == value; }, std::chrono::seconds(60));
  };
  {
    auto bus = testing::OpenBus(o);
    subscribe(*bus);
    PublishSome(*bus, 6);
    ASSERT_TRUE(bus->WaitIdle(std::chrono::seconds(10)).ok());
    ASSERT_TRUE(scraped(handled, "6")) << prometheus.Query(handled);
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = testing::OpenBus(o);
  subscribe(*bus);
  PublishSome(*bus, 2);
  ASSERT_TRUE(bus->WaitIdle(std::chrono::seconds(10)).ok());
  ASSERT_TRUE(scraped(handled, "2")) << prometheus.Query(handled);
  ASSERT_TRUE(scraped(persisted, "8")) << prometheus.Query(persisted);

  EXPECT_EQ(prometheus.Query("resets(" + handled + "[10m])"), "1");
  EXPECT_EQ(prometheus.Query("resets(walbus_events_published_total[10m])"), "1");
  EXPECT_EQ(prometheus.Query("resets(walbus_commits_total[10m])"), "1");
  EXPECT_EQ(prometheus.Query("resets(" + persisted + "[10m])"), "0");

  for (const auto& [metric, type] : {std::pair{"walbus_subscriber_handled_total", "counter"},
                                     {"walbus_subscriber_handled_persisted", "gauge"},
                                     {"walbus_commit_batch_size", "histogram"},
                                     {"walbus_storage_delayed_write_rate_bytes_per_second", "gauge"}}) {
    const std::string metadata = prometheus.Api(std::string("metadata?metric=") + metric);
    EXPECT_NE(metadata.find(std::string("\"type\":\"") + type + "\""), std::string::npos) << metric << ": " << metadata;
  }
  const std::string le = prometheus.Api("label/le/values");
  for (const char* bound : {"\"5e-05\"", "\"0.00025\"", "\"0.999\"", "\"1\"", "\"2.5\"", "\"+Inf\""}) {
    EXPECT_NE(le.find(bound), std::string::npos) << bound << " in " << le;
  }
  EXPECT_EQ(le.find("0000000"), std::string::npos) << "bounds printed in their shortest form: " << le;
  // Most groups hold one commit here: the quantiles say one, not less.
  const double p50 = std::stod("0" + prometheus.Query("histogram_quantile(0.5, walbus_commit_batch_size_bucket)"));
  EXPECT_GE(p50, 0.999);
}

}  // namespace
}  // namespace walbus
