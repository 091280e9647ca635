#include "bus/ops/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <string_view>

namespace walbus::internal {
namespace {

constexpr size_t kMaxRequestBytes = 8 << 10;

bool ParseAddress(const std::string& address, sockaddr_in* out) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  const std::string_view port_text = std::string_view(address).substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
    return false;
  }
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  *out = sockaddr_in{};
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  return ::inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1;
}

std::string Response(std::string_view status, std::string_view content_type, std::string_view body) {
  std::string r = "HTTP/1.1 ";
  r += status;
  r += "\r\nContent-Type: ";
  r += content_type;
  r += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  r += body;
  return r;
}

// The response to one request; empty (nothing sent) when the scraper went
// away or stalled before its request was whole.
std::string Answer(std::string_view request, SocketServer::Read how, const std::function<std::string()>& render) {
  if (how == SocketServer::Read::kCut) return {};
  const std::string_view line = request.substr(0, request.find("\r\n"));
  const size_t first_space = line.find(' ');
  const size_t second_space = line.find(' ', first_space + 1);
  if (first_space == std::string_view::npos || second_space == std::string_view::npos) {
    return Response("400 Bad Request", "text/plain", "bad request\n");
  }
  const std::string_view method = line.substr(0, first_space);
  std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  target = target.substr(0, target.find('?'));
  if (target != "/metrics") return Response("404 Not Found", "text/plain", "try /metrics\n");
  if (method != "GET" && method != "HEAD") return Response("405 Method Not Allowed", "text/plain", "GET /metrics\n");
  std::string response = Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render());
  if (method == "HEAD") response.resize(response.find("\r\n\r\n") + 4);
  return response;
}

}  // namespace

Status MetricsHttpServer::Start(const std::string& address, std::function<std::string()> render,
                                std::unique_ptr<MetricsHttpServer>* out) {
  out->reset();
  sockaddr_in addr;
  if (!ParseAddress(address, &addr)) {
    return Status::InvalidArgument("Options::metrics_http '" + address + "' is not HOST:PORT or :PORT (IPv4)");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("metrics endpoint socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    Status s = ErrnoStatus("metrics endpoint on " + address);
    ::close(fd);
    return s;
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  Status s = SocketServer::Start(
      fd, "\r\n\r\n", kMaxRequestBytes,
      [render = std::move(render)](std::string_view request, SocketServer::Read how) {
        return Answer(request, how, render);
      },
      &server->server_);
  if (!s.ok()) return s;
  *out = std::move(server);
  return Status::OK();
}

}  // namespace walbus::internal
