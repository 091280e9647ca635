// What the bridge's crash tests and their node process (bridge_node.cc)
// share: the stream, the options of each side, and how to start a node.
#ifndef WALBUS_TESTS_BRIDGE_BRIDGE_NODE_H_
#define WALBUS_TESTS_BRIDGE_BRIDGE_NODE_H_

#include <sys/types.h>

#include <chrono>
#include <string>

#include "walbus/jetstream.h"

namespace walbus::bridge_node {

inline constexpr char kStream[] = "NODES";
inline constexpr char kEventType[] = "orders.order-placed.v1";
inline constexpr char kDeviceSource[] = "device-a";

inline std::string SubjectOf(int i) { return "order-" + std::to_string(i % 10); }

inline jetstream::RelayOptions DeviceRelayOptions(const std::string& url) {
  jetstream::RelayOptions o;
  o.connection.url = url;
  o.connection.request_timeout = std::chrono::milliseconds(1000);
  o.connection.reconnect_wait = std::chrono::milliseconds(100);
  o.stream.name = kStream;
  o.stream.subjects = {"walbus.>"};
  o.only_source = kDeviceSource;
  o.retry.cap = std::chrono::milliseconds(500);
  return o;
}

inline jetstream::InboundOptions ReceiverInboundOptions(const std::string& url) {
  jetstream::InboundOptions o;
  o.connection.url = url;
  o.connection.reconnect_wait = std::chrono::milliseconds(100);
  o.stream = kStream;
  o.durable = "cloud-in";
  o.filter_subject = "walbus.>";
  o.fetch_wait = std::chrono::milliseconds(200);
  o.fetch_batch = 16;
  o.ack_wait = std::chrono::seconds(1);
  return o;
}

// Starts `bridge_node mode dir url events` (fork + exec); its pid, or -1.
pid_t StartNode(const std::string& mode, const std::string& dir, const std::string& url, int events);
// Waits for the node; its exit status, or -1 when it did not exit normally.
int WaitNode(pid_t pid);

}  // namespace walbus::bridge_node

#endif  // WALBUS_TESTS_BRIDGE_BRIDGE_NODE_H_
