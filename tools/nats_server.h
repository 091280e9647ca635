// NatsServer: a nats-server with JetStream run as a child process, for the
// bridge's tests, walbus-stress --bridge local and the fleet demo: loopback
// only, a free port, its store in a directory of the caller's, stopped (or
// killed, as a crash) by PID. The binary is $WALBUS_NATS_SERVER, else
// nats-server from the system. It runs with the most durable settings its
// version offers (2.10+: `sync_interval: always`; 2.9 has none), or with
// the server's defaults when $WALBUS_NATS_SETTINGS is "defaults".
//
// Threading: not thread-safe; one owner starts and stops it.
#ifndef WALBUS_TOOLS_NATS_SERVER_H_
#define WALBUS_TOOLS_NATS_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace walbus::tools {

class NatsServer {
 public:
  // Picks a free loopback port; does not start the server. `dir` holds the
  // store and the server's log (nats-server.log).
  explicit NatsServer(std::string dir);
  ~NatsServer();  // Stop()
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  // Starts nats-server -js on the port and waits until JetStream answers
  // (at most 20 s). The store survives Kill() and a new Start(). False,
  // with the reason on stderr, when it does not come up.
  bool Start();
  // SIGKILL (no flush, like a crash), and wait for the process.
  void Kill();
  // SIGTERM, and wait for the process.
  void Stop();
  bool running() const { return pid_ > 0; }
  // What a crash can do to a server that acknowledged writes it had not
  // yet written out (nats-server 2.9 acknowledges before its files have
  // them): cuts up to `max_bytes` off the end of the newest message block
  // of `stream`, never more than was written to it since the last Start()
  // (what a server showed after a restart it had on disk), and removes
  // that block's index files, so that the next Start() rebuilds the stream
  // without its tail. The consumers' state is left as it was (it may then
  // be ahead of the stream). Returns the bytes cut. REQUIRES: !running().
  uint64_t DropStreamTail(const std::string& stream, uint64_t max_bytes);
  // The positions of consumer `durable` of `stream` as the server last
  // wrote them to its store; nullopt while it wrote none (or in a form this
  // does not know). The server writes them at most every 100 ms after a
  // change, and 2.9 does not write the newest on a graceful stop: a test
  // whose next step needs them on disk waits for them here first.
  struct SavedConsumer {
    uint64_t ack_floor = 0;  // stream sequence
    uint64_t delivered = 0;  // stream sequence
    uint64_t pending = 0;    // delivered, not yet acknowledged
  };
  std::optional<SavedConsumer> SavedConsumerState(const std::string& stream, const std::string& durable) const;
  // Stop(), keeping consumer `durable`'s state as it was on disk before
  // the stop. 2.9 writes that state in place (truncate, then write), even
  // when it did not change, and exits on SIGTERM without waiting for the
  // write: a stop at the wrong moment leaves the file empty, and the
  // consumer then comes back from its stream's start. Tests of a server
  // that lost its stream's tail need the consumers' state kept, as the
  // crash they mimic keeps it. False when there was no state to keep or it
  // could not be written back. REQUIRES: the consumer's state no longer
  // changes (nothing delivered or acknowledged meanwhile).
  bool StopKeepingConsumerState(const std::string& stream, const std::string& durable);
  // A server that forgot a whole stream (reported of 2.10 after a crash):
  // removes its files. REQUIRES: !running().
  void ForgetStream(const std::string& stream);
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

 private:
  void Signal(int sig);
  void NoteBlockSizes();
  // Where the store keeps `stream`'s messages and consumers.
  std::string StreamDir(const std::string& stream) const;
  std::string ConsumerStateFile(const std::string& stream, const std::string& durable) const;
  // The size of every message block when the server last started.
  std::map<std::string, uint64_t> block_sizes_at_start_;
  const std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace walbus::tools

#endif  // WALBUS_TOOLS_NATS_SERVER_H_
