// A real Prometheus server for the metrics tests, and the little HTTP they
// need: loopback only, a free port, the store in a caller's directory.
#ifndef WALBUS_TESTS_PROMETHEUS_SERVER_H_
#define WALBUS_TESTS_PROMETHEUS_SERVER_H_

#include <sys/types.h>

#include <string>

namespace walbus::testing {

// A free TCP port on 127.0.0.1 (free when asked; 0 when none was found).
int FreePort();

// Sends `request` to 127.0.0.1:port and returns the whole response; empty
// when nothing listens.
std::string Exchange(int port, const std::string& request);

// Whether the `prometheus` binary (Debian package prometheus) is on PATH.
bool HavePrometheus();

// The Debian package's prometheus, scraping 127.0.0.1:target_port every
// second, its config, log and store under `dir`; stopped on destruction.
class PrometheusServer {
 public:
  PrometheusServer(const std::string& dir, int target_port);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // The body of GET /api/v1/<what>; empty while the server is not up.
  std::string Api(const std::string& what) const;
  // The value of an instant query that yields one series, as Prometheus
  // prints it; empty when it yields none.
  std::string Query(const std::string& promql) const;

 private:
  const int port_;
  pid_t pid_ = -1;
};

}  // namespace walbus::testing

#endif  // WALBUS_TESTS_PROMETHEUS_SERVER_H_
