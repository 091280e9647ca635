// fleet_demo: two devices and a cloud service exchange order events through
// NATS JetStream, one device offline for part of the run.
//
// Each node is a bus of its own. A device places orders (one transaction:
// the order row and "orders.order-placed.v1"); its relay publishes them
// under fleet.up.<device>.<type>. The cloud takes them in (an inbound
// consumer on fleet.up.>), and its "confirm" subscriber records the order
// and publishes "orders.order-confirmed.v1", which the cloud's relay sends
// down under fleet.down.cloud.<type>. Each device takes the confirmations
// in (fleet.down.>) and marks its own orders confirmed.
//
// device-2 starts offline: its relay points at a port where no server
// listens, so its orders wait in its outbox. Halfway through it restarts
// online (same directory, same relay name, so the relay resumes from its
// checkpoint) and its backlog drains in order.
//
// Checks at the end, from each node's database: the cloud recorded every
// order exactly once, every device saw exactly one confirmation for each of
// its orders, and nothing else.
//
//   fleet_demo [--orders N]   (orders per device; default 500)
//
// Exit status: 0 when every check holds, 1 when one fails, 2 on bad usage.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fleet_demo_events.h"  // generated from the .fbs files
#include "tools/nats_server.h"
#include "walbus/adapters/flatbuffers.h"
#include "walbus/bus.h"
#include "walbus/jetstream.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using walbus::Status;

constexpr char kStream[] = "FLEET";

// Orders are subjects "<device>/order-<n>", so a confirmation names its device.
std::string OrderId(const std::string& device, int n) { return device + "/order-" + std::to_string(n); }

// Adds one to the decimal counter at `cf`/`key` inside a handler.
Status Increment(walbus::HandlerContext& ctx, const std::string& cf, const std::string& key) {
  auto current = ctx.Get(cf, key);
  if (!current.ok()) return current.status();
  const int n = current->has_value() ? std::atoi((*current)->c_str()) : 0;
  return ctx.Put(cf, key, std::to_string(n + 1));
}

// One node of the fleet: its bus, relay and inbound consumer.
struct Node {
  std::string name;
  std::string dir;
  std::unique_ptr<walbus::Bus> bus;
  std::unique_ptr<walbus::jetstream::Relay> relay;
  std::unique_ptr<walbus::jetstream::Inbound> inbound;

  void Close() {
    if (inbound) inbound->Stop();
    inbound.reset();
    if (bus) bus->Close().IgnoreError();
    bus.reset();
    relay.reset();
  }
};

// The cloud confirms each order it receives.
walbus::Outcome Confirm(const walbus::Event& e, const fleet::OrderPlaced& order, walbus::HandlerContext& ctx) {
  if (Status s = Increment(ctx, "effects", "received/" + e.subject); !s.ok()) return walbus::Outcome::RetryAfter(10ms);
  flatbuffers::FlatBufferBuilder fbb;
  auto confirmed = fleet::CreateOrderConfirmedDirect(fbb, order.order_id()->c_str(), order.amount());
  if (!ctx.Publish(walbus::TypedEvent(e.subject, fbb, confirmed)).ok()) return walbus::Outcome::RetryAfter(10ms);
  return walbus::Outcome::Done();
}

// Opens `node` with its subscriber and a relay to `relay_url`; the inbound
// consumer (which takes messages as they come) only when `online`. Every
// node has both event schemas, so what arrives from the others is checked
// against them before it is taken in (and quarantined when it fails).
Status OpenNode(Node* node, const std::string& url, const std::string& relay_url, bool online) {
  walbus::Options options;
  options.dir = node->dir;
  options.source = node->name;
  options.durability = walbus::Durability::kBuffered;
  options.column_families = {"orders", "effects", "jetstream"};
  options.require_schemas = true;
  if (Status s = walbus::Bus::Open(options, &node->bus); !s.ok()) return s;
  if (Status s = fleet::RegisterEventSchemas(*node->bus); !s.ok()) return s;
  const bool cloud = node->name == "cloud";
  const std::string self = node->name;
  auto confirmation = [self](const walbus::Event& e, const fleet::OrderConfirmed&, walbus::HandlerContext& ctx) {
    if (!e.subject.starts_with(self + "/")) return walbus::Outcome::Done();  // another device's order
    if (!Increment(ctx, "effects", "confirmed/" + e.subject).ok()) return walbus::Outcome::RetryAfter(10ms);
    return walbus::Outcome::Done();
  };
  if (Status s =
          cloud ? node->bus->Subscribe(walbus::TypedSubscriber<fleet::OrderPlaced>("confirm", Confirm))
                : node->bus->Subscribe(walbus::TypedSubscriber<fleet::OrderConfirmed>("confirmations", confirmation));
      !s.ok()) {
    return s;
  }

  walbus::jetstream::RelayOptions relay;
  relay.connection.url = relay_url;
  relay.connection.reconnect_wait = 100ms;
  relay.stream.name = kStream;
  relay.stream.subjects = {"fleet.>"};
  relay.subject_prefix = cloud ? "fleet.down" : "fleet.up";
  relay.only_source = node->name;  // what it received is not sent back
  relay.retry.cap = 500ms;
  if (Status s = walbus::jetstream::Relay::Attach(node->bus.get(), relay, &node->relay); !s.ok()) return s;
  if (Status s = node->bus->Start(); !s.ok()) return s;
  if (!online) return Status::OK();
  walbus::jetstream::InboundOptions inbound;
  inbound.connection.url = url;
  inbound.stream = kStream;
  inbound.durable = node->name + "-in";
  inbound.filter_subject = cloud ? "fleet.up.>" : "fleet.down.>";
  inbound.skip_source = node->name;
  inbound.fetch_wait = 200ms;
  return walbus::jetstream::Inbound::Start(node->bus.get(), inbound, &node->inbound);
}

Status PlaceOrders(Node& node, int first, int last) {
  for (int n = first; n < last; ++n) {
    walbus::Transaction tx = node.bus->Begin();
    const std::string id = OrderId(node.name, n);
    if (Status s = tx.Put("orders", id, "placed"); !s.ok()) return s;
    flatbuffers::FlatBufferBuilder fbb;
    auto placed = fleet::CreateOrderPlacedDirect(fbb, id.c_str(), static_cast<uint32_t>(10 + n % 90));
    if (auto r = tx.Publish(walbus::TypedEvent(id, fbb, placed)); !r.ok()) return r.status();
    if (auto r = tx.Commit(); !r.ok()) return r.status();
  }
  return Status::OK();
}

// The counter at effects/`key`: 0 when missing, -1 when it cannot be read.
int Count(walbus::Bus& bus, const std::string& key) {
  walbus::Transaction tx = bus.Begin();
  auto v = tx.Get("effects", key);
  if (!v.ok()) return -1;
  return v->has_value() ? std::atoi((*v)->c_str()) : 0;
}

// Events the named subscriber of `bus` has handled.
uint64_t Handled(walbus::Bus& bus, const std::string& subscriber) {
  for (const auto& s : bus.Stats().subscribers)
    if (s.name == subscriber) return s.handled;
  return 0;
}

// Waits until `done` or the deadline; false on timeout.
template <typename Done>
bool WaitFor(Done done, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

int Run(int orders, const std::string& root) {
  walbus::tools::NatsServer server(root + "/nats");
  if (!server.Start()) {
    std::fprintf(stderr, "fleet_demo: could not start nats-server (see %s/nats)\n", root.c_str());
    return 1;
  }
  const std::string url = server.url();
  std::printf("fleet demo: nats-server at %s, %d orders per device\n", url.c_str(), orders);
  Node cloud{"cloud", root + "/cloud"}, d1{"device-1", root + "/device-1"}, d2{"device-2", root + "/device-2"};
  // device-2's relay goes to a port where nothing listens: offline.
  const std::string nowhere = "nats://127.0.0.1:1";
  for (auto [node, relay_url, online] :
       {std::tuple{&cloud, url, true}, std::tuple{&d1, url, true}, std::tuple{&d2, nowhere, false}}) {
    if (Status s = OpenNode(node, url, relay_url, online); !s.ok()) {
      std::fprintf(stderr, "fleet_demo: open %s: %s\n", node->name.c_str(), s.ToString().c_str());
      return 1;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  for (Node* d : {&d1, &d2}) {
    if (Status s = PlaceOrders(*d, 0, orders / 2); !s.ok()) {
      std::fprintf(stderr, "fleet_demo: %s: %s\n", d->name.c_str(), s.ToString().c_str());
      return 1;
    }
  }
  std::this_thread::sleep_for(1s);
  std::printf("offline:  device-2 placed %d orders; relay connected: %s, outbox waiting\n", orders / 2,
              d2.relay->Stats().connected ? "yes" : "no");
  // device-2 comes online: it restarts with the real server.
  d2.Close();
  if (Status s = OpenNode(&d2, url, url, true); !s.ok()) {
    std::fprintf(stderr, "fleet_demo: reopen device-2: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("online:   device-2 restarted connected; its backlog drains\n");
  for (Node* d : {&d1, &d2}) {
    if (Status s = PlaceOrders(*d, orders / 2, orders); !s.ok()) {
      std::fprintf(stderr, "fleet_demo: %s: %s\n", d->name.c_str(), s.ToString().c_str());
      return 1;
    }
  }
  // Every order reached the cloud, and every confirmation both devices
  // (each sees the other's too, and passes them by).
  const uint64_t all = 2 * static_cast<uint64_t>(orders);
  const bool settled = WaitFor(
      [&] {
        return Handled(*cloud.bus, "confirm") >= all && Handled(*d1.bus, "confirmations") >= all &&
               Handled(*d2.bus, "confirmations") >= all;
      },
      120s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int failures = settled ? 0 : 1;
  if (!settled) std::printf("FAILED: the fleet did not settle within 120 s\n");
  for (Node* d : {&d1, &d2}) {
    int received = 0, confirmed = 0;
    for (int n = 0; n < orders; ++n) {
      const std::string id = OrderId(d->name, n);
      const int at_cloud = Count(*cloud.bus, "received/" + id);
      const int back = Count(*d->bus, "confirmed/" + id);
      received += at_cloud == 1;
      confirmed += back == 1;
      if (at_cloud != 1 || back != 1) {
        if (++failures <= 5)
          std::printf("FAILED: %s: cloud recorded it %d times, confirmed %d times\n", id.c_str(), at_cloud, back);
      }
    }
    std::printf("%s: cloud recorded %d/%d orders once; %d/%d confirmations came back once\n", d->name.c_str(), received,
                orders, confirmed, orders);
  }
  const auto in = cloud.inbound->Stats();
  std::printf("cloud inbound: %llu taken in, %llu duplicates dropped, %llu quarantined\n",
              static_cast<unsigned long long>(in.ingested), static_cast<unsigned long long>(in.duplicates),
              static_cast<unsigned long long>(in.quarantined));
  std::printf("%s in %.1f s\n", failures == 0 ? "PASSED: every order exactly once, both ways" : "FAILED", seconds);
  for (Node* n : {&d1, &d2, &cloud}) n->Close();
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int orders = 500;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--orders" && i + 1 < argc) {
      const std::string_view value = argv[++i];
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), orders);
      if (ec != std::errc() || end != value.data() + value.size() || orders < 2 || orders > 1000000) {
        std::fprintf(stderr, "fleet_demo: --orders takes a number from 2 to 1000000\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: fleet_demo [--orders N]\n");
      return 2;
    }
  }
  std::string root = (fs::temp_directory_path() / "walbus-fleet-XXXXXX").string();
  if (::mkdtemp(root.data()) == nullptr) {
    std::perror("fleet_demo: mkdtemp");
    return 2;
  }
  const int rc = Run(orders, root);
  std::error_code ec;
  if (rc == 0)
    fs::remove_all(root, ec);
  else
    std::printf("directories kept in %s\n", root.c_str());
  return rc;
}
