// bus/metrics_http.cc: the optional /metrics endpoint (Options::metrics_http).
#include "bus/metrics_http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

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

}  // namespace
}  // namespace walbus
