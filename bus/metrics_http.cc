#include "bus/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

namespace walbus::internal {
namespace {

constexpr size_t kMaxRequestBytes = 8 << 10;
constexpr int kIoTimeoutSeconds = 2;

Status Errno(const std::string& what) { return Status::IOError(what + ": " + std::strerror(errno)); }

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

void WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the scraper went away or stalled past the timeout
    bytes.remove_prefix(static_cast<size_t>(n));
  }
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

}  // namespace

Status MetricsHttpServer::Start(const std::string& address, std::function<std::string()> render,
                                std::unique_ptr<MetricsHttpServer>* out) {
  out->reset();
  sockaddr_in addr;
  if (!ParseAddress(address, &addr)) {
    return Status::InvalidArgument("Options::metrics_http '" + address + "' is not HOST:PORT or :PORT (IPv4)");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("metrics endpoint socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    Status s = Errno("metrics endpoint on " + address);
    ::close(fd);
    return s;
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    Status s = Errno("metrics endpoint eventfd");
    ::close(fd);
    return s;
  }
  out->reset(new MetricsHttpServer(fd, wake, std::move(render)));
  return Status::OK();
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_fd, std::function<std::string()> render)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), render_(std::move(render)), thread_([this] { Run(); }) {}

MetricsHttpServer::~MetricsHttpServer() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void MetricsHttpServer::Run() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Serve(fd);
    ::close(fd);
  }
}

void MetricsHttpServer::Serve(int fd) {
  timeval timeout{kIoTimeoutSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  const std::string_view line = std::string_view(request).substr(0, request.find("\r\n"));
  const size_t first_space = line.find(' ');
  const size_t second_space = line.find(' ', first_space + 1);
  if (first_space == std::string_view::npos || second_space == std::string_view::npos) {
    WriteAll(fd, Response("400 Bad Request", "text/plain", "bad request\n"));
    return;
  }
  const std::string_view method = line.substr(0, first_space);
  std::string_view target = line.substr(first_space + 1, second_space - first_space - 1);
  target = target.substr(0, target.find('?'));
  if (target != "/metrics") {
    WriteAll(fd, Response("404 Not Found", "text/plain", "try /metrics\n"));
  } else if (method != "GET" && method != "HEAD") {
    WriteAll(fd, Response("405 Method Not Allowed", "text/plain", "GET /metrics\n"));
  } else {
    std::string response = Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render_());
    if (method == "HEAD") response.resize(response.find("\r\n\r\n") + 4);
    WriteAll(fd, response);
  }
}

}  // namespace walbus::internal
