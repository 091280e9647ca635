// bus/metrics_http.cc: the optional /metrics endpoint (Options::metrics_http).
#include "bus/metrics_http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <signal.h>
#include <sys/wait.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "tests/test_util.h"
#include "walbus/bus.h"

namespace walbus {
namespace {

using testing::TempDir;

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// Sends `request` to 127.0.0.1:port and returns the whole response; empty
// when nothing listens.
std::string Exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) response.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return response;
}

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

// A Prometheus server (the Debian package's binary) on loopback, scraping
// one target every second, its store in `dir`; stopped on destruction.
class PrometheusServer {
 public:
  PrometheusServer(const std::string& dir, int target_port) : port_(FreePort()) {
    const std::string config = dir + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: walbus\n"
                             "    static_configs:\n      - targets: ['127.0.0.1:"
                          << target_port << "']\n";
    const std::string log = dir + "/prometheus.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen(log.c_str(), "w", stdout);
      std::freopen(log.c_str(), "a", stderr);
      const std::string config_flag = "--config.file=" + config;
      const std::string store_flag = "--storage.tsdb.path=" + dir + "/tsdb";
      const std::string listen_flag = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
      ::execlp("prometheus", "prometheus", config_flag.c_str(), store_flag.c_str(), listen_flag.c_str(),
               "--log.level=warn", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~PrometheusServer() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }

  // The body of GET /api/v1/<what>; empty while the server is not up.
  std::string Api(const std::string& what) const {
    const std::string response = Exchange(port_, "GET /api/v1/" + what + " HTTP/1.0\r\n\r\n");
    const size_t body = response.find("\r\n\r\n");
    return body == std::string::npos ? "" : response.substr(body + 4);
  }
  // The value of an instant query that yields one series, as Prometheus
  // prints it; empty when it yields none.
  std::string Query(const std::string& promql) const {
    const std::string body = Api("query?query=" + UrlEncode(promql));
    const size_t value = body.find("\"value\":[");
    if (value == std::string::npos) return "";
    const size_t open = body.find('"', body.find(',', value) + 1);
    return body.substr(open + 1, body.find('"', open + 1) - open - 1);
  }

 private:
  static std::string UrlEncode(const std::string& text) {
    std::string out;
    char buf[4];
    for (unsigned char c : text) {
      if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
        out.push_back(static_cast<char>(c));
      } else {
        std::snprintf(buf, sizeof buf, "%%%02X", c);
        out += buf;
      }
    }
    return out;
  }

  const int port_;
  pid_t pid_ = -1;
};

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
  if (std::system("command -v prometheus >/dev/null 2>&1") != 0) {
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
