// SocketServer: the accept loop the bus's small servers share (the /metrics
// endpoint, the admin socket). One thread, owned by the server, serves one
// connection at a time: it reads one request (bounded in size, within
// kIoTimeout per read; a client that stalls is cut off), writes the
// response and closes the connection. It stops when the server is
// destroyed.
#ifndef WALBUS_BUS_OPS_SOCKET_SERVER_H_
#define WALBUS_BUS_OPS_SOCKET_SERVER_H_

#include <sys/un.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "walbus/status.h"

namespace walbus::internal {

// IOError "<what>: <strerror(errno)>".
Status ErrnoStatus(const std::string& what);

// Fills *addr with the Unix socket address of `path`; false when the path
// is too long for one (sun_path).
bool UnixSocketAddress(const std::string& path, sockaddr_un* addr);

// Sends every byte, or as many as the peer takes before it goes away or
// stalls past its send timeout. Never raises SIGPIPE.
void SendAll(int fd, std::string_view bytes);

class SocketServer {
 public:
  // Send and receive timeout on every connection.
  static constexpr std::chrono::seconds kIoTimeout{2};

  // How a request was read.
  enum class Read : uint8_t {
    kComplete,  // it holds the terminator (bytes past it may follow)
    kTooLarge,  // more than max_request_bytes came without the terminator
    kCut,       // the peer closed or stalled before the terminator
  };
  // Makes the response to one request (the bytes read so far); an empty
  // response writes nothing. Called on the server's thread, one request at
  // a time.
  using Respond = std::function<std::string(std::string_view request, Read how)>;

  // Serves connections on `listen_fd` (bound and listening), which the
  // server owns from now on and closes, on failure too. A request is read
  // until it holds `terminator` or has passed `max_request_bytes`.
  // IOError when the thread's wake-up descriptor cannot be made.
  [[nodiscard]] static Status Start(int listen_fd, std::string terminator, size_t max_request_bytes, Respond respond,
                                    std::unique_ptr<SocketServer>* out);
  ~SocketServer();  // Stops and joins the thread, then closes the socket.
  SocketServer(const SocketServer&) = delete;
  SocketServer& operator=(const SocketServer&) = delete;

 private:
  SocketServer(int listen_fd, int wake_fd, std::string terminator, size_t max_request_bytes, Respond respond);
  void Run();
  void Serve(int fd);

  const int listen_fd_;
  const int wake_fd_;  // an eventfd: written once to stop the thread
  const std::string terminator_;
  const size_t max_request_bytes_;
  const Respond respond_;
  std::thread thread_;  // last: starts once the rest is set
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_OPS_SOCKET_SERVER_H_
