#include "tests/prometheus_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace walbus::testing {
namespace {

std::string UrlEncode(const std::string& text) {
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

}  // namespace

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

bool HavePrometheus() { return std::system("command -v prometheus >/dev/null 2>&1") == 0; }

PrometheusServer::PrometheusServer(const std::string& dir, int target_port) : port_(FreePort()) {
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

PrometheusServer::~PrometheusServer() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
}

std::string PrometheusServer::Api(const std::string& what) const {
  const std::string response = Exchange(port_, "GET /api/v1/" + what + " HTTP/1.0\r\n\r\n");
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

std::string PrometheusServer::Query(const std::string& promql) const {
  const std::string body = Api("query?query=" + UrlEncode(promql));
  const size_t value = body.find("\"value\":[");
  if (value == std::string::npos) return "";
  const size_t open = body.find('"', body.find(',', value) + 1);
  return body.substr(open + 1, body.find('"', open + 1) - open - 1);
}

}  // namespace walbus::testing
