// relay: commit a few events and relay them to NATS JetStream.
//
//   relay DIR NATS_URL     e.g. relay /tmp/device nats://127.0.0.1:4222
//
// Each order is one transaction (row + event); the relay publishes every
// event to the stream ORDERS as fleet.<source>.<type>, with the event id as
// Nats-Msg-Id. Exits 0 once JetStream acknowledged all of them, 1 when that
// takes more than 30 s (say, no server), 2 on bad usage.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "walbus/bus.h"
#include "walbus/jetstream.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: relay DIR NATS_URL\n");
    return 2;
  }
  walbus::Options options;
  options.dir = argv[1];
  options.source = "device-1";
  options.column_families = {"orders", "jetstream"};  // the bridge keeps its records in the last
  std::unique_ptr<walbus::Bus> bus;
  if (walbus::Status s = walbus::Bus::Open(options, &bus); !s.ok()) {
    std::fprintf(stderr, "relay: %s\n", s.ToString().c_str());
    return 1;
  }
  walbus::jetstream::RelayOptions relay_options;
  relay_options.connection.url = argv[2];
  relay_options.stream.name = "ORDERS";
  relay_options.stream.subjects = {"fleet.>"};
  relay_options.subject_prefix = "fleet";
  std::unique_ptr<walbus::jetstream::Relay> relay;
  if (walbus::Status s = walbus::jetstream::Relay::Attach(bus.get(), relay_options, &relay); !s.ok()) {
    std::fprintf(stderr, "relay: %s\n", s.ToString().c_str());
    return 1;
  }
  if (!bus->Start().ok()) return 1;
  for (int i = 0; i < 10; ++i) {
    walbus::Transaction tx = bus->Begin();
    const std::string id = "order-" + std::to_string(i);
    walbus::EventSpec placed;
    placed.type = "orders.order-placed.v1";
    placed.subject = id;
    placed.content_type = "application/json";
    placed.data = "{\"amount\":" + std::to_string(10 * i) + "}";
    if (!tx.Put("orders", id, "placed").ok() || !tx.Publish(placed).ok() || !tx.Commit().ok()) return 1;
  }
  const bool relayed = bus->WaitIdle(std::chrono::seconds(30)).ok();
  const walbus::jetstream::RelayStats stats = relay->Stats();
  std::printf("relayed %llu events (%llu republished), connected: %s\n",
              static_cast<unsigned long long>(stats.published), static_cast<unsigned long long>(stats.duplicates),
              stats.connected ? "yes" : "no");
  return relayed && bus->Close().ok() ? 0 : 1;
}
