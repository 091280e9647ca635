// A real nats-server with JetStream for the bridge tests: loopback only, a
// free port, its store in a temp dir, stopped (or killed) by PID; plus a
// plain NATS client to publish raw messages and read a stream back.
#ifndef WALBUS_TESTS_NATS_SERVER_H_
#define WALBUS_TESTS_NATS_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace walbus::testing {

class NatsServer {
 public:
  // Picks a free loopback port; does not start the server.
  NatsServer();
  ~NatsServer();
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  // Starts nats-server -js on the port and waits until it accepts
  // connections. The store survives Kill() and a new Start().
  bool Start();
  // SIGKILL (no flush, like a crash) or SIGTERM, and wait for the process.
  void Kill();
  void Stop();
  bool running() const { return pid_ > 0; }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

 private:
  void Signal(int sig);
  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// One message of a stream, as read back.
struct StoredMessage {
  std::string subject;
  std::map<std::string, std::string> headers;
  std::string data;
};

// Publishes one message with `headers` to JetStream at `url` (the stream
// must exist) and returns whether a PubAck came.
bool PublishRaw(const std::string& url, const std::string& subject, const std::map<std::string, std::string>& headers,
                const std::string& data);
// Every message of `stream`, in stream order (through a fresh ephemeral
// consumer); empty on failure.
std::vector<StoredMessage> ReadStream(const std::string& url, const std::string& stream,
                                      const std::string& filter_subject);
// Creates `stream` on `subjects` when missing; true on success.
bool CreateStream(const std::string& url, const std::string& stream, const std::vector<std::string>& subjects);

}  // namespace walbus::testing

#endif  // WALBUS_TESTS_NATS_SERVER_H_
