// NatsLink: one NATS connection and its JetStream context, with the
// connection state the bridge needs (connected, disconnects, time offline).
// Offline-first: when the server is unreachable at Open, the client keeps
// trying in the background and connected() turns true once it got through.
//
// Threading: thread-safe (the NATS client is); the state is atomics and a
// mutex taken by the client's callback thread. The client calls back on a
// thread of its own, also while the connection closes: the destructor
// closes the connection and waits for the closed callback (the last one)
// before the object goes away.
#ifndef WALBUS_BRIDGE_NATS_LINK_H_
#define WALBUS_BRIDGE_NATS_LINK_H_

#include <nats/nats.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/cloudevents.h"
#include "bus/util/mutex.h"
#include "walbus/jetstream.h"
#include "walbus/logger.h"
#include "walbus/status.h"

namespace walbus::bridge {

using internal::CondVar;
using internal::Mutex;
using internal::MutexLock;

// A NATS status as a walbus one, with the client's last error text.
Status FromNats(natsStatus s, std::string_view what);

// OK when `urls` is one or more NATS server addresses, comma-separated:
// [nats://|tls://][user[:password]@]host[:port], host a name, an IPv4
// address or a bracketed IPv6 one, port 1..65535. InvalidArgument naming
// ConnectionOptions::url and the address otherwise: the client would take
// "not a url" and try it forever.
Status CheckNatsUrls(std::string_view urls);
// CheckNatsUrls, and every duration of `options` in its range: what can be
// known wrong before connecting. InvalidArgument names the option.
Status CheckConnection(const jetstream::ConnectionOptions& options);

// A change of a link's connection as a line for the log: no server yet,
// lost, made, made again after so long offline.
struct LinkChange {
  LogLevel level;
  std::string line;
};

class NatsLink {
 public:
  [[nodiscard]] static Status Open(const jetstream::ConnectionOptions& options, std::unique_ptr<NatsLink>* out);
  ~NatsLink();
  NatsLink(const NatsLink&) = delete;
  NatsLink& operator=(const NatsLink&) = delete;

  bool connected() const { return connected_.load(std::memory_order_acquire); }
  // Counts the connections made: a change means the link was lost and
  // made again (the server may have restarted in between).
  uint64_t connection_epoch() const { return epoch_.load(std::memory_order_acquire); }
  // The id of the server connected to, as the client knows it now; empty
  // when not connected. A server takes a new id each time it starts, and
  // the client learns it before any reply of that server arrives.
  // Thread-safe.
  std::string server_id() const;
  // Called on the client's thread after each change of the connection
  // (true: connected), not concurrently with itself. Must not block. Once
  // SetChangeListener(nullptr) returns, the old listener runs no more.
  void SetChangeListener(std::function<void(bool connected)> listener);
  // The changes of the connection since the last call, oldest first. The
  // client reports them on a thread of its own, which may outlive the bus
  // the bridge logs to; so the bridge takes them on its own threads (the
  // relay's checker, woken by the change listener; the inbound consumer's
  // loop) and logs them there.
  // At most kMaxChanges are kept; older ones are dropped and counted.
  std::vector<LinkChange> TakeChanges();
  static constexpr size_t kMaxChanges = 16;
  uint64_t disconnects() const { return disconnects_.load(std::memory_order_relaxed); }
  double offline_seconds() const;
  jsCtx* js() const { return js_; }
  const jetstream::ConnectionOptions& options() const { return options_; }

  // Creates the stream when missing (with the duplicate window asked for);
  // an existing one is used as it is; *created (when given) tells which,
  // and *subjects (when given) gets the stream's subject filters.
  // REQUIRES: connected().
  [[nodiscard]] Status EnsureStream(const jetstream::StreamOptions& stream, bool* created = nullptr,
                                    std::vector<std::string>* subjects = nullptr);

 private:
  explicit NatsLink(jetstream::ConnectionOptions options);
  // `nc`: the connection, when it is up (for the server's address).
  void SetConnected(bool up, natsConnection* nc);
  // Queues the line for a change of the connection.
  void NoteChange(bool up, natsConnection* nc, std::chrono::steady_clock::time_point now) REQUIRES(mu_);
  void QueueChange(LinkChange change) REQUIRES(mu_);
  static void OnConnected(natsConnection*, void* self);
  static void OnDisconnected(natsConnection*, void* self);
  // The client's last callback for a connection: after it, none of the
  // others can run, so the destructor waits for it before freeing this.
  static void OnClosed(natsConnection*, void* self);

  const jetstream::ConnectionOptions options_;
  natsOptions* nats_options_ = nullptr;
  natsConnection* conn_ = nullptr;
  jsCtx* js_ = nullptr;
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> disconnects_{0};
  std::atomic<uint64_t> epoch_{0};
  mutable Mutex mu_;
  std::chrono::steady_clock::time_point offline_since_ GUARDED_BY(mu_);  // valid while !connected_
  std::chrono::steady_clock::duration offline_total_ GUARDED_BY(mu_){};
  bool closed_ GUARDED_BY(mu_) = false;
  bool ever_connected_ GUARDED_BY(mu_) = false;
  std::string server_ GUARDED_BY(mu_);  // the last server connected to
  std::vector<LinkChange> changes_ GUARDED_BY(mu_);
  std::atomic<bool> has_changes_{false};  // changes_ is not empty: TakeChanges' lock-free look
  uint64_t changes_dropped_ GUARDED_BY(mu_) = 0;
  // Held while the listener runs, so that replacing it waits for a call
  // in progress (the relay frees what its listener reaches).
  Mutex listener_mu_;
  std::function<void(bool)> listener_ GUARDED_BY(listener_mu_);
  CondVar closed_cv_;
};

// Reads every header of a message (the last value of repeated ones).
Headers ReadHeaders(natsMsg* msg);

}  // namespace walbus::bridge

#endif  // WALBUS_BRIDGE_NATS_LINK_H_
