#include "bus/ops/socket_server.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace walbus::internal {

Status ErrnoStatus(const std::string& what) { return Status::IOError(what + ": " + std::strerror(errno)); }

bool UnixSocketAddress(const std::string& path, sockaddr_un* addr) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof addr->sun_path) return false;
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away or stalled past the timeout
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

Status SocketServer::Start(int listen_fd, std::string terminator, size_t max_request_bytes, Respond respond,
                           std::unique_ptr<SocketServer>* out) {
  out->reset();
  const int wake = ::eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    Status s = ErrnoStatus("server eventfd");
    ::close(listen_fd);
    return s;
  }
  out->reset(new SocketServer(listen_fd, wake, std::move(terminator), max_request_bytes, std::move(respond)));
  return Status::OK();
}

SocketServer::SocketServer(int listen_fd, int wake_fd, std::string terminator, size_t max_request_bytes,
                           Respond respond)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      terminator_(std::move(terminator)),
      max_request_bytes_(max_request_bytes),
      respond_(std::move(respond)),
      thread_([this] {
        pthread_setname_np(pthread_self(), "walbus-socket");
        Run();
      }) {}

SocketServer::~SocketServer() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void SocketServer::Run() {
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

void SocketServer::Serve(int fd) {
  timeval timeout{static_cast<time_t>(kIoTimeout.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string request;
  char buf[4096];
  Read how = Read::kCut;
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    // Only the new bytes (and the end of the old ones) can complete the
    // terminator: no rescan of what was read before.
    const size_t from = request.size() >= terminator_.size() ? request.size() - terminator_.size() + 1 : 0;
    request.append(buf, static_cast<size_t>(n));
    if (request.find(terminator_, from) != std::string::npos) {
      how = Read::kComplete;
      break;
    }
    if (request.size() > max_request_bytes_) {
      how = Read::kTooLarge;
      break;
    }
  }
  const std::string response = respond_(request, how);
  if (!response.empty()) SendAll(fd, response);
}

}  // namespace walbus::internal
