// bridge_node: one process of the bridge's crash tests (relay_test,
// inbound_test), which start it with fork + exec and kill it with SIGKILL.
// A child forked from the test process itself would inherit the NATS
// client's library state without its threads, and can deadlock in it.
//
//   bridge_node device   DIR URL EVENTS   publish events 0..EVENTS-1 (those
//                                         not committed by an earlier run),
//                                         relay them, exit once relayed
//   bridge_node receiver DIR URL EVENTS   take events in through the inbound
//                                         consumer "cloud-in", count one
//                                         effect per event id, exit once
//                                         EVENTS are in and handled; writes
//                                         the redeliveries it recognised to
//                                         DIR/../duplicates
//   bridge_node stalled-receiver DIR URL EVENTS
//                                         as receiver, with a consumer made
//                                         with ack_wait 30 s, but stops at its
//                                         first message (after writing
//                                         DIR/../fetched) until killed
//   bridge_node default-receiver DIR URL EVENTS
//                                         as receiver, with the default
//                                         ack_wait
//
// Both use the options of the tests (tests/bridge/bridge_node.h). Exit status 0
// when done; another value names the step that failed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "tests/bridge/bridge_node.h"
#include "tests/test_util.h"
#include "walbus/bus.h"
#include "walbus/jetstream.h"

namespace walbus::bridge_node {
namespace {

using namespace std::chrono_literals;

Options NodeOptions(const std::string& dir, const std::string& source) {
  Options o;
  o.dir = dir;
  o.durability = Durability::kBuffered;
  o.column_families = {"orders", "effects", "jetstream"};
  o.checkpoint_interval = 5ms;
  o.source = source;
  return o;
}

// Step `code` failed: says why on stderr, for the test's log.
int Failed(int code, const Status& why) {
  std::fprintf(stderr, "bridge_node: step %d: %s\n", code, why.ToString().c_str());
  return code;
}

int RunDevice(const std::string& dir, const std::string& url, int events) {
  std::unique_ptr<Bus> bus;
  if (Status s = Bus::Open(NodeOptions(dir, kDeviceSource), &bus); !s.ok()) return Failed(2, s);
  std::unique_ptr<jetstream::Relay> relay;
  if (!jetstream::Relay::Attach(bus.get(), DeviceRelayOptions(url), &relay).ok()) return 3;
  if (!bus->Start().ok()) return 4;
  for (int i = 0; i < events; ++i) {
    Transaction tx = bus->Begin();
    const std::string key = "e-" + std::to_string(i);
    auto row = tx.Get("orders", key);
    if (!row.ok()) return 5;
    if (row->has_value()) continue;  // committed by an earlier run
    EventSpec e;
    e.type = kEventType;
    e.subject = SubjectOf(i);
    e.data = std::to_string(i);
    if (!tx.Put("orders", key, "1").ok() || !tx.Publish(e).ok() || !tx.Commit().ok()) return 6;
  }
  if (!bus->WaitIdle(120s).ok()) return 7;
  return bus->Close().ok() ? 0 : 8;
}

// Takes its first message in and then stops there, as a process that
// dies mid-batch: its verifier (which runs at ingest) writes
// DIR/../fetched and waits to be killed.
void StallOnFirstMessage(Bus& bus, const std::string& dir) {
  const std::string marker = (std::filesystem::path(dir).parent_path() / "fetched").string();
  Status s = bus.Contracts().RegisterVerifier(kEventType, [marker](std::string_view) {
    if (FILE* f = std::fopen(marker.c_str(), "w")) std::fclose(f);
    for (;;) std::this_thread::sleep_for(1s);
    return Status::OK();
  });
  if (!s.ok()) std::abort();
}

int RunReceiver(const std::string& dir, int events, const jetstream::InboundOptions& inbound, bool stall) {
  std::unique_ptr<Bus> bus;
  if (Status s = Bus::Open(NodeOptions(dir, "cloud"), &bus); !s.ok()) return Failed(2, s);
  if (stall) StallOnFirstMessage(*bus, dir);
  SubscriberOptions s;
  s.name = "effects";
  s.handler = [](const Event& e, HandlerContext& ctx) {
    auto cur = ctx.Get("effects", e.id.ToString());
    if (!cur.ok()) return Outcome::RetryAfter(1ms);
    const int n = cur->has_value() ? std::stoi(**cur) : 0;
    if (!ctx.Put("effects", e.id.ToString(), std::to_string(n + 1)).ok()) return Outcome::RetryAfter(1ms);
    return Outcome::Done();
  };
  if (!bus->Subscribe(std::move(s)).ok() || !bus->Start().ok()) return 3;
  std::unique_ptr<jetstream::Inbound> in;
  if (!jetstream::Inbound::Start(bus.get(), inbound, &in).ok()) return 4;
  const uint64_t want = static_cast<uint64_t>(events);
  if (!testing::Eventually([&] { return bus->Stats().last_seq >= want; }, 120s)) return 5;
  if (!bus->WaitIdle(60s).ok()) return 6;
  in->Stop();
  const std::string record = (std::filesystem::path(dir).parent_path() / "duplicates").string();
  if (FILE* f = std::fopen(record.c_str(), "w")) {
    std::fprintf(f, "%llu", static_cast<unsigned long long>(in->Stats().duplicates));
    std::fclose(f);
  }
  return bus->Close().ok() ? 0 : 7;
}

}  // namespace
}  // namespace walbus::bridge_node

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: bridge_node device|receiver|stalled-receiver|default-receiver DIR URL EVENTS\n");
    return 64;
  }
  const std::string mode = argv[1];
  const int events = std::atoi(argv[4]);
  if (mode == "device") return walbus::bridge_node::RunDevice(argv[2], argv[3], events);
  walbus::jetstream::InboundOptions inbound = walbus::bridge_node::ReceiverInboundOptions(argv[3]);
  if (mode == "receiver") return walbus::bridge_node::RunReceiver(argv[2], events, inbound, false);
  if (mode == "stalled-receiver") {
    inbound.ack_wait = std::chrono::seconds(30);  // as a release before 0.1.0 made the consumer
    return walbus::bridge_node::RunReceiver(argv[2], events, inbound, true);
  }
  if (mode == "default-receiver") {
    inbound.ack_wait = walbus::jetstream::InboundOptions{}.ack_wait;
    return walbus::bridge_node::RunReceiver(argv[2], events, inbound, false);
  }
  std::fprintf(stderr, "bridge_node: unknown mode %s\n", argv[1]);
  return 64;
}
