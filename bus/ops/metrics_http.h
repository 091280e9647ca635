// MetricsHttpServer: the optional built-in endpoint for scrapers
// (Options::metrics_http). GET /metrics answers with the bus's Prometheus
// text; anything else gets 404 or 405.
//
// One thread, owned by the server (a SocketServer): it serves one
// connection at a time (bounded: a request of at most 8 KiB, read within
// 2 s; a scraper that stalls is cut off), and stops when the server is
// destroyed.
#ifndef WALBUS_BUS_OPS_METRICS_HTTP_H_
#define WALBUS_BUS_OPS_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>

#include "bus/ops/socket_server.h"
#include "walbus/status.h"

namespace walbus::internal {

class MetricsHttpServer {
 public:
  // Listens on `address`: "HOST:PORT" with an IPv4 HOST, or ":PORT" for
  // 127.0.0.1. `render` makes the response body; it is called on the
  // server's thread and must stay valid until the server is destroyed.
  // InvalidArgument for a malformed address; IOError when it cannot listen
  // (the port is taken, say).
  [[nodiscard]] static Status Start(const std::string& address, std::function<std::string()> render,
                                    std::unique_ptr<MetricsHttpServer>* out);
  ~MetricsHttpServer() = default;  // Stops and joins the thread.
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

 private:
  MetricsHttpServer() = default;

  std::unique_ptr<SocketServer> server_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_OPS_METRICS_HTTP_H_
