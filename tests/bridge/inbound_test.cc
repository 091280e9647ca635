// bridge/inbound.cc against a real nats-server: devices exchange events
// with exactly-once effects; redeliveries are duplicates; hostile messages
// are quarantined, terminated and counted.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "bridge/cloudevents.h"
#include "tests/bridge/bridge_node.h"
#include "tests/bridge/nats_client.h"
#include "tests/test_util.h"
#include "walbus/bus.h"
#include "walbus/jetstream.h"

namespace walbus::jetstream {
namespace {

using namespace std::chrono_literals;
using NatsServer = testing::LocalNatsServer;
using testing::TempDir;

constexpr char kStream[] = "FLEET";

// A device or service: its bus, and an effect counter per received id.
struct Node {
  explicit Node(const std::string& source) {
    Options o = testing::TestOptions(dir);
    o.source = source;
    o.column_families.push_back("jetstream");
    bus = testing::OpenBus(o);
    SubscriberOptions s;
    s.name = "effects";
    s.handler = [this, source](const Event& e, HandlerContext& ctx) {
      if (e.source == source) return Outcome::Done();  // its own events
      auto cur = ctx.Get("effects", e.id.ToString());
      if (!cur.ok()) return Outcome::RetryAfter(1ms);
      const int n = cur->has_value() ? std::stoi(**cur) : 0;
      if (!ctx.Put("effects", e.id.ToString(), std::to_string(n + 1)).ok()) return Outcome::RetryAfter(1ms);
      std::lock_guard<std::mutex> lock(mu);
      ++handled;
      handled_data.push_back(e.data);
      return Outcome::Done();
    };
    EXPECT_TRUE(bus->Subscribe(std::move(s)).ok());
  }
  int Effects(const EventId& id) {
    Transaction tx = bus->Begin();
    auto v = tx.Get("effects", id.ToString());
    return v.ok() && v->has_value() ? std::stoi(**v) : 0;
  }
  int handled_count() {
    std::lock_guard<std::mutex> lock(mu);
    return handled;
  }
  std::vector<std::string> handled_in_order() {
    std::lock_guard<std::mutex> lock(mu);
    return handled_data;
  }
  TempDir dir;
  std::unique_ptr<Bus> bus;
  std::mutex mu;
  int handled = 0;
  std::vector<std::string> handled_data;  // in the order handled
};

InboundOptions MakeInboundOptions(const NatsServer& server, const std::string& durable, const std::string& filter) {
  InboundOptions o;
  o.connection.url = server.url();
  o.connection.reconnect_wait = 100ms;
  o.stream = kStream;
  o.durable = durable;
  o.filter_subject = filter;
  o.fetch_wait = 200ms;
  o.ack_wait = 1s;
  o.nak_delay = 100ms;
  return o;
}

Event MakeEvent(const std::string& source, const std::string& type, std::string data) {
  Event e;
  e.id = EventId::Generate();
  e.type = type;
  e.source = source;
  e.subject = "order-1";
  e.time = std::chrono::system_clock::now();
  e.data = std::move(data);
  return e;
}

bool PublishEvent(const NatsServer& server, const Event& e, bridge::Headers extra = {}) {
  bridge::Headers h = bridge::ToHeaders(e);
  h.erase(std::string(bridge::kMsgIdHeader));  // let the stream take repeats
  for (auto& [k, v] : extra) h[k] = v;
  return testing::PublishRaw(server.url(), "walbus." + e.source + "." + e.type, h, e.data);
}

TEST(InboundTest, TwoDevicesExchangeEventsWithExactlyOnceEffects) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  Node a("device-a"), b("device-b");
  std::unique_ptr<Relay> relay_a, relay_b;
  std::unique_ptr<Inbound> in_a, in_b;
  for (auto [node, relay, name] : {std::tuple{&a, &relay_a, "device-a"}, std::tuple{&b, &relay_b, "device-b"}}) {
    RelayOptions r;
    r.connection.url = server.url();
    r.stream.name = kStream;
    r.stream.subjects = {"walbus.>"};
    r.only_source = name;
    ASSERT_TRUE(Relay::Attach(node->bus.get(), r, relay).ok());
    ASSERT_TRUE(node->bus->Start().ok());
  }
  ASSERT_TRUE(Inbound::Start(a.bus.get(), MakeInboundOptions(server, "device-a-in", "walbus.device-b.>"), &in_a).ok());
  ASSERT_TRUE(Inbound::Start(b.bus.get(), MakeInboundOptions(server, "device-b-in", "walbus.device-a.>"), &in_b).ok());
  std::vector<EventId> from_a, from_b;
  for (int i = 0; i < 200; ++i) {
    for (auto [node, ids] : {std::pair{&a, &from_a}, std::pair{&b, &from_b}}) {
      Transaction tx = node->bus->Begin();
      EventSpec e;
      e.type = "orders.order-placed.v1";
      e.subject = "order-" + std::to_string(i % 13);
      e.data = std::to_string(i);
      auto id = tx.Publish(e);
      ASSERT_TRUE(id.ok());
      ASSERT_TRUE(tx.Commit().ok());
      ids->push_back(*id);
    }
  }
  ASSERT_TRUE(testing::Eventually([&] { return a.handled_count() >= 200 && b.handled_count() >= 200; }, 60s))
      << a.handled_count() << " / " << b.handled_count();
  ASSERT_TRUE(a.bus->WaitIdle(30s).ok());
  ASSERT_TRUE(b.bus->WaitIdle(30s).ok());
  for (const EventId& id : from_b) EXPECT_EQ(a.Effects(id), 1) << id.ToString();
  for (const EventId& id : from_a) EXPECT_EQ(b.Effects(id), 1) << id.ToString();
  // The bridge counts after the bus took (or the server acknowledged) an
  // event, and the far side's handler may run before that: wait for the
  // counts themselves.
  EXPECT_TRUE(testing::Eventually([&] { return in_a->Stats().ingested == 200; }, 30s)) << in_a->Stats().ingested;
  EXPECT_TRUE(testing::Eventually([&] { return in_b->Stats().ingested == 200; }, 30s)) << in_b->Stats().ingested;
  // The received events are not relayed back: only_source.
  EXPECT_TRUE(testing::Eventually([&] { return relay_a->Stats().published == 200; }, 30s))
      << relay_a->Stats().published;
  EXPECT_TRUE(testing::Eventually([&] { return relay_a->Stats().skipped == 200; }, 30s)) << relay_a->Stats().skipped;
}

TEST(InboundTest, RedeliveredEventHasOneEffect) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::CreateStream(server.url(), kStream, {"walbus.>"}));
  Node cloud("cloud");
  ASSERT_TRUE(cloud.bus->Start().ok());
  const Event e = MakeEvent("device-a", "orders.order-placed.v1", "{}");
  // The same event twice in the stream (no Nats-Msg-Id: as if the sender's
  // duplicate window had passed), and then once more after a restart of
  // the consumer.
  ASSERT_TRUE(PublishEvent(server, e));
  ASSERT_TRUE(PublishEvent(server, e));
  {
    std::unique_ptr<Inbound> in;
    ASSERT_TRUE(Inbound::Start(cloud.bus.get(), MakeInboundOptions(server, "cloud-in", "walbus.>"), &in).ok());
    ASSERT_TRUE(testing::Eventually([&] { return in->Stats().received >= 2; }, 30s));
    in->Stop();
    EXPECT_EQ(in->Stats().ingested, 1u);
    EXPECT_EQ(in->Stats().duplicates, 1u);
  }
  ASSERT_TRUE(PublishEvent(server, e));
  std::unique_ptr<Inbound> in;
  ASSERT_TRUE(Inbound::Start(cloud.bus.get(), MakeInboundOptions(server, "cloud-in", "walbus.>"), &in).ok());
  ASSERT_TRUE(testing::Eventually([&] { return in->Stats().received >= 1; }, 30s));
  ASSERT_TRUE(testing::Eventually([&] { return in->Stats().duplicates == 1; }, 10s))
      << "the durable consumer resumed after the first two and saw the third as a duplicate";
  EXPECT_EQ(in->Stats().received, 1u) << "acknowledged messages are not delivered again";
  ASSERT_TRUE(cloud.bus->WaitIdle(30s).ok());
  EXPECT_EQ(cloud.Effects(e.id), 1);
}

TEST(InboundTest, HostileMessagesAreQuarantinedTerminatedAndCounted) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::CreateStream(server.url(), kStream, {"walbus.>"}));
  Node cloud("cloud");
  ASSERT_TRUE(cloud.bus->Start().ok());
  InboundOptions o = MakeInboundOptions(server, "cloud-in", "walbus.>");
  o.require_signature = true;
  o.keys = {{"k-a", "secret-a"}, {"k-b", "secret-b"}};
  o.key_id_by_source = {{"device-a", "k-a"}, {"device-b", "k-b"}};
  o.allowed_types_by_source = {{"device-a", {"orders.*"}}, {"device-b", {"orders.*"}}};
  o.max_message_bytes = 4096;
  auto signed_by = [](const Event& e, const std::string& key_id, const std::string& secret) {
    return bridge::Headers{{std::string(bridge::kKeyIdHeader), key_id},
                           {std::string(bridge::kSignatureHeader), bridge::Sign(e, secret)}};
  };
  const Event good = MakeEvent("device-a", "orders.order-placed.v1", "{}");
  ASSERT_TRUE(PublishEvent(server, good, signed_by(good, "k-a", "secret-a")));
  const Event forged = MakeEvent("device-a", "orders.order-placed.v1", "{}");
  ASSERT_TRUE(PublishEvent(server, forged, signed_by(forged, "k-a", "not-the-secret")));
  const Event other_key = MakeEvent("device-a", "orders.order-placed.v1", "{}");
  ASSERT_TRUE(PublishEvent(server, other_key, signed_by(other_key, "k-b", "secret-b")));
  const Event wrong_type = MakeEvent("device-a", "payments.refund-issued.v1", "{}");
  ASSERT_TRUE(PublishEvent(server, wrong_type, signed_by(wrong_type, "k-a", "secret-a")));
  const Event unsigned_event = MakeEvent("device-a", "orders.order-placed.v1", "{}");
  ASSERT_TRUE(PublishEvent(server, unsigned_event));
  const Event oversized = MakeEvent("device-a", "orders.order-placed.v1", std::string(8192, 'x'));
  ASSERT_TRUE(PublishEvent(server, oversized, signed_by(oversized, "k-a", "secret-a")));
  ASSERT_TRUE(testing::PublishRaw(server.url(), "walbus.junk", {{"hello", "world"}}, "not an event"));
  std::unique_ptr<Inbound> in;
  ASSERT_TRUE(Inbound::Start(cloud.bus.get(), o, &in).ok());
  ASSERT_TRUE(testing::Eventually([&] { return in->Stats().received >= 7; }, 30s));
  // Terminated, not redelivered: after more than ack_wait nothing came back.
  std::this_thread::sleep_for(2500ms);
  const InboundStats stats = in->Stats();
  EXPECT_EQ(stats.received, 7u);
  EXPECT_EQ(stats.ingested, 1u);
  EXPECT_EQ(stats.quarantined, 6u);
  EXPECT_EQ(stats.naks, 0u);
  EXPECT_EQ(cloud.bus->Stats().quarantined, 6u);
  ASSERT_TRUE(cloud.bus->WaitIdle(30s).ok());
  EXPECT_EQ(cloud.Effects(good.id), 1);
  for (const Event* e : {&forged, &other_key, &wrong_type, &unsigned_event, &oversized}) {
    EXPECT_EQ(cloud.Effects(e->id), 0) << e->id.ToString();
  }
  const std::string metrics = in->MetricsText();
  EXPECT_NE(metrics.find("walbus_inbound_quarantined_total{consumer=\"cloud-in\"} 6"), std::string::npos) << metrics;
  const std::string on_bus = cloud.bus->MetricsText();
  EXPECT_NE(on_bus.find("walbus_inbound_quarantined_total{consumer=\"cloud-in\"} 6"), std::string::npos) << on_bus;
  EXPECT_NE(on_bus.find("walbus_quarantined_total 6"), std::string::npos) << on_bus;
}

// A receiving process killed (SIGKILL) again and again while it takes
// messages in: those committed but not yet acknowledged come back after
// AckWait, and the dedup record makes each a duplicate. One event per id in
// the receiving bus, one effect each.
TEST(InboundTest, ReceiverKilledBeforeItsAcksHasOneEffectPerEvent) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  constexpr int kEvents = 4000;
  TempDir device_dir, dir;
  ASSERT_EQ(bridge_node::WaitNode(bridge_node::StartNode("device", device_dir.path(), server.url(), kEvents)), 0)
      << "the device did not relay its events";
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 6; ++round) {
    const pid_t pid = bridge_node::StartNode("receiver", dir.path(), server.url(), kEvents);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + rng() % 150));
    ::kill(pid, SIGKILL);
    bridge_node::WaitNode(pid);
  }
  ASSERT_EQ(bridge_node::WaitNode(bridge_node::StartNode("receiver", dir.path(), server.url(), kEvents)), 0)
      << "the final receiver run failed";
  if (FILE* f = std::fopen((dir.root() + "/duplicates").c_str(), "r")) {
    unsigned long long duplicates = 0;
    if (std::fscanf(f, "%llu", &duplicates) == 1) {
      ::testing::Test::RecordProperty("redeliveries_recognised", std::to_string(duplicates));
    }
    std::fclose(f);
  }
  Options options = testing::TestOptions(dir);
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  EXPECT_EQ(bus->Stats().last_seq, static_cast<uint64_t>(kEvents)) << "each event taken in once";
  Transaction tx = bus->Begin();
  uint64_t effects = 0;
  auto stored = testing::ReadStream(server.url(), bridge_node::kStream, "walbus.>");
  ASSERT_EQ(static_cast<int>(stored.size()), kEvents);
  for (const auto& m : stored) {
    auto v = tx.Get("effects", m.headers.at("ce-id"));
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->value_or("0"), "1") << m.headers.at("ce-id");
    effects += v->has_value() ? 1 : 0;
  }
  EXPECT_EQ(effects, static_cast<uint64_t>(kEvents));
}

// A receiver killed with a batch fetched and not acknowledged: the next
// start takes that batch in once ack_wait has passed. The consumer was
// made with 30 s (the earlier default); the restart sets it to today's
// default, and its marks of slow batches keep that safe. Before, the
// restart waited the whole 30 s.
TEST(InboundTest, ARestartTakesWhatAKilledReceiverHadFetchedWithinTheDefaultAckWait) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  constexpr int kEvents = 68;
  TempDir device_dir, dir;
  ASSERT_EQ(bridge_node::WaitNode(bridge_node::StartNode("device", device_dir.path(), server.url(), kEvents)), 0)
      << "the device did not relay its events";
  const pid_t stalled = bridge_node::StartNode("stalled-receiver", dir.path(), server.url(), kEvents);
  ASSERT_GT(stalled, 0);
  const std::string fetched = dir.root() + "/fetched";
  const bool stalled_mid_batch = testing::Eventually([&] { return std::filesystem::exists(fetched); }, 60s);
  ::kill(stalled, SIGKILL);
  bridge_node::WaitNode(stalled);
  ASSERT_TRUE(stalled_mid_batch) << "the stalled receiver never took a message";
  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_EQ(bridge_node::WaitNode(bridge_node::StartNode("default-receiver", dir.path(), server.url(), kEvents)), 0);
  const auto took = std::chrono::steady_clock::now() - restarted;
  ::testing::Test::RecordProperty("restart_to_all_taken_ms",
                                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  const auto ack_wait = InboundOptions{}.ack_wait;
  EXPECT_LT(took, ack_wait + 10s) << "the killed receiver's batch waited the consumer's old ack_wait";
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  EXPECT_EQ(bus->Stats().last_seq, static_cast<uint64_t>(kEvents)) << "each event taken in once";
}

// A batch that takes longer than ack_wait is not delivered twice: its
// waiting messages are marked in progress.
TEST(InboundTest, ASlowBatchKeepsItsMessagesInProgress) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::CreateStream(server.url(), kStream, {"walbus.>"}));
  constexpr int kMessages = 8;
  constexpr char kSlowType[] = "orders.order-placed.v1";
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(PublishEvent(server, MakeEvent("device-a", kSlowType, std::to_string(i))));
  }
  TempDir dir;
  Options bus_options = testing::TestOptions(dir);
  bus_options.column_families.push_back("jetstream");
  auto bus = testing::OpenBus(bus_options);
  // Each ingest takes a quarter of ack_wait: the batch of 8 takes two.
  ASSERT_TRUE(bus->Contracts()
                  .RegisterVerifier(kSlowType,
                                    [](std::string_view) {
                                      std::this_thread::sleep_for(250ms);
                                      return Status::OK();
                                    })
                  .ok());
  InboundOptions o = MakeInboundOptions(server, "slow", "walbus.>");
  o.ack_wait = 1s;
  o.fetch_batch = kMessages;
  std::unique_ptr<Inbound> in;
  ASSERT_TRUE(Inbound::Start(bus.get(), o, &in).ok());
  ASSERT_TRUE(testing::Eventually([&] { return in->Stats().ingested == kMessages; }, 30s));
  std::this_thread::sleep_for(o.ack_wait * 2);  // what was delivered twice would come back by now
  const InboundStats stats = in->Stats();
  EXPECT_EQ(stats.received, static_cast<uint64_t>(kMessages)) << "a message came twice";
  EXPECT_EQ(stats.duplicates, 0u);
  EXPECT_GE(stats.in_progress_marks, 1u);
}

// A message of sender origin "relay-1" at `position` of its subject.
bool PublishAt(const NatsServer& server, const Event& e, uint64_t position) {
  bridge::Headers position_headers;
  bridge::SetPosition(bridge::SenderPosition{"relay-1", position}, &position_headers);
  return PublishEvent(server, e, position_headers);
}

TEST(InboundTest, MessagesEarlyInTheirSendersOrderAreHeldUntilTheGapFills) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::CreateStream(server.url(), kStream, {"walbus.>"}));
  Node cloud("cloud");
  ASSERT_TRUE(cloud.bus->Start().ok());
  InboundOptions o = MakeInboundOptions(server, "cloud-in", "walbus.>");
  o.hold_delay = 50ms;
  o.gap_timeout = 1s;
  std::unique_ptr<Inbound> in;
  ASSERT_TRUE(Inbound::Start(cloud.bus.get(), o, &in).ok());
  std::vector<Event> events;
  for (int i = 1; i <= 7; ++i) events.push_back(MakeEvent("device-7", "orders.order-placed.v1", std::to_string(i)));
  // The stream holds 1, 3, 4, 2: 3 and 4 wait for 2.
  for (uint64_t p : {1, 3, 4, 2}) ASSERT_TRUE(PublishAt(server, events[p - 1], p));
  ASSERT_TRUE(testing::Eventually([&] { return cloud.handled_count() == 4; }, 30s)) << cloud.handled_count();
  EXPECT_EQ(cloud.handled_in_order(), (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_GT(in->Stats().held, 0u);
  // 2 again (another message, the same event): a duplicate, no effect.
  ASSERT_TRUE(PublishAt(server, events[1], 2));
  ASSERT_TRUE(testing::Eventually([&] { return in->Stats().duplicates == 1; }, 30s));

  // 6 while 5 never comes: held for gap_timeout, then taken, 5 skipped.
  const auto before = std::chrono::steady_clock::now();
  ASSERT_TRUE(PublishAt(server, events[5], 6));
  ASSERT_TRUE(testing::Eventually([&] { return cloud.handled_count() == 5; }, 30s));
  EXPECT_GE(std::chrono::steady_clock::now() - before, 1s) << "held for the gap timeout first";
  // The inbound counts a gap once the bus took the event, and the handler
  // may run before that: wait for the count, not just the handler.
  ASSERT_TRUE(testing::Eventually([&] { return in->Stats().gaps == 1; }, 30s)) << in->Stats().gaps;
  EXPECT_EQ(in->Stats().skipped_positions, 1u);
  // 5 arriving after all is taken once, late; 7 follows 6 at once.
  ASSERT_TRUE(PublishAt(server, events[4], 5));
  ASSERT_TRUE(PublishAt(server, events[6], 7));
  ASSERT_TRUE(testing::Eventually([&] { return cloud.handled_count() == 7; }, 30s));
  EXPECT_EQ(cloud.handled_in_order(), (std::vector<std::string>{"1", "2", "3", "4", "6", "5", "7"}));
  ASSERT_TRUE(testing::Eventually([&] { return in->Stats().late == 1; }, 30s)) << in->Stats().late;
  ASSERT_TRUE(cloud.bus->WaitIdle(30s).ok());  // the last handler's effects are committed
  for (const Event& e : events) EXPECT_EQ(cloud.Effects(e.id), 1) << e.data;
  const std::string metrics = in->MetricsText();
  EXPECT_NE(metrics.find("walbus_inbound_gaps_total{consumer=\"cloud-in\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("walbus_inbound_late_total{consumer=\"cloud-in\"} 1"), std::string::npos) << metrics;
}

TEST(InboundTest, MalformedPositionIsQuarantined) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::CreateStream(server.url(), kStream, {"walbus.>"}));
  Node cloud("cloud");
  ASSERT_TRUE(cloud.bus->Start().ok());
  std::unique_ptr<Inbound> in;
  ASSERT_TRUE(Inbound::Start(cloud.bus.get(), MakeInboundOptions(server, "cloud-in", "walbus.>"), &in).ok());
  const Event e = MakeEvent("device-7", "orders.order-placed.v1", "x");
  ASSERT_TRUE(PublishEvent(server, e, {{"ce-subjectseq", "0"}, {"ce-seqorigin", "relay-1"}}));
  ASSERT_TRUE(PublishEvent(server, e, {{"ce-subjectseq", "3"}}));
  ASSERT_TRUE(testing::Eventually([&] { return in->Stats().quarantined == 2; }, 30s));
  EXPECT_EQ(cloud.Effects(e.id), 0);
}

// Once the server's store holds every acknowledgement, the consumer and
// the server stopped, the consumer's state kept (a crash keeps it) and the
// stream's tail lost as a crash loses it (so the consumer is ahead of it);
// then the server started again and given `count` new events, and the
// consumer started again: every new event must be taken once.
void LoseTailThenTakeNewEvents(NatsServer& server, Node& node, const InboundOptions& o, std::unique_ptr<Inbound>* in,
                               int count) {
  const int before = node.handled_count();
  ASSERT_TRUE(node.bus->WaitIdle(30s).ok());
  ASSERT_TRUE(testing::Eventually([&] { return testing::ConsumerSavedAll(server, kStream, o.durable); }, 30s));
  (*in)->Stop();
  ASSERT_TRUE(server.StopKeepingConsumerState(kStream, o.durable));
  ASSERT_GT(server.DropStreamTail(kStream, 8 << 10), 0u);
  ASSERT_TRUE(server.Start());
  std::vector<Event> events;
  for (int i = 0; i < count; ++i) {
    events.push_back(MakeEvent("device-7", "orders.order-placed.v1", "b"));
    ASSERT_TRUE(PublishEvent(server, events.back()));
  }
  ASSERT_TRUE(Inbound::Start(node.bus.get(), o, in).ok());
  ASSERT_TRUE(testing::Eventually([&] { return node.handled_count() == before + count; }, 30s))
      << node.handled_count() - before << " of " << count << " new events taken";
  ASSERT_TRUE(node.bus->WaitIdle(30s).ok());  // the last handler's effects are committed
  for (const Event& e : events) EXPECT_EQ(node.Effects(e.id), 1);
  EXPECT_EQ((*in)->Stats().consumer_resets, 1u);
}

TEST(InboundTest, ConsumerAheadOfItsStreamAfterAServerCrashIsMadeAgain) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::CreateStream(server.url(), kStream, {"walbus.>"}));
  Node cloud("cloud");
  ASSERT_TRUE(cloud.bus->Start().ok());
  const InboundOptions o = MakeInboundOptions(server, "cloud-in", "walbus.>");
  std::unique_ptr<Inbound> in;
  ASSERT_TRUE(Inbound::Start(cloud.bus.get(), o, &in).ok());
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(PublishEvent(server, MakeEvent("device-7", "orders.order-placed.v1", "a")));
  ASSERT_TRUE(testing::Eventually([&] { return cloud.handled_count() == 200; }, 30s));
  LoseTailThenTakeNewEvents(server, cloud, o, &in, 50);
  // Again, with the consumer now made from a start sequence: it is made
  // again from where the new messages begin, not from the stream's start.
  LoseTailThenTakeNewEvents(server, cloud, o, &in, 20);
  EXPECT_LT(in->Stats().received, 100u) << "read again from near the new messages, not from the stream's start";
}

TEST(InboundTest, BadOptionsAreRefused) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  std::unique_ptr<Inbound> in;
  InboundOptions o;
  EXPECT_EQ(Inbound::Start(bus.get(), o, &in).code(), Status::Code::kInvalidArgument);
  o.stream = kStream;
  o.durable = "d";
  EXPECT_EQ(Inbound::Start(bus.get(), o, &in).code(), Status::Code::kInvalidArgument) << "no filter subject";
  EXPECT_EQ(in, nullptr);
  o.filter_subject = "walbus.>";
  o.column_family.clear();
  o.connection.url = "not a url";
  Status bad = Inbound::Start(bus.get(), o, &in);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument) << bad.ToString();
  EXPECT_NE(bad.message().find("ConnectionOptions::url"), std::string::npos) << bad.ToString();
  EXPECT_EQ(in, nullptr);
}

// Every count and duration of InboundOptions out of range, refused the
// same way: the option, its value, its range.
TEST(InboundTest, EveryBoundOfTheOptionsIsChecked) {
  TempDir dir;
  auto bus = testing::OpenBus(testing::TestOptions(dir));
  ASSERT_NE(bus, nullptr);
  struct Case {
    std::function<void(InboundOptions*)> set;
    const char* expected;
  };
  const Case cases[] = {
      {[](InboundOptions* o) { o->fetch_batch = 0; }, "InboundOptions::fetch_batch is 0; it must be 1..65536"},
      {[](InboundOptions* o) { o->fetch_batch = -3; }, "InboundOptions::fetch_batch is -3"},
      {[](InboundOptions* o) { o->max_ack_pending = 10; }, "InboundOptions::max_ack_pending is 10; it must be >= 64"},
      {[](InboundOptions* o) { o->max_message_bytes = 0; }, "InboundOptions::max_message_bytes is 0"},
      {[](InboundOptions* o) { o->ack_wait = -1s; }, "InboundOptions::ack_wait is -1000 ms; it must be 1 ms.."},
      {[](InboundOptions* o) { o->fetch_wait = 0ms; }, "InboundOptions::fetch_wait is 0 ms"},
      {[](InboundOptions* o) { o->nak_delay = -1ms; }, "InboundOptions::nak_delay is -1 ms"},
      {[](InboundOptions* o) { o->hold_delay = 0ms; }, "InboundOptions::hold_delay is 0 ms"},
      {[](InboundOptions* o) { o->gap_timeout = -1ms; }, "InboundOptions::gap_timeout is -1 ms; it must be >= 0 ms"},
      {[](InboundOptions* o) { o->connection.request_timeout = -2ms; }, "ConnectionOptions::request_timeout is -2 ms"},
  };
  for (const Case& c : cases) {
    InboundOptions o;
    o.stream = kStream;
    o.durable = "d";
    o.filter_subject = "walbus.>";
    o.column_family.clear();
    o.connection.url = "nats://127.0.0.1:1";
    c.set(&o);
    std::unique_ptr<Inbound> in;
    const Status s = Inbound::Start(bus.get(), o, &in);
    EXPECT_TRUE(s.IsInvalidArgument()) << c.expected << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.ToString();
    EXPECT_EQ(in, nullptr);
  }
}

TEST(InboundTest, StartOnAClosedBusSaysClosed) {
  TempDir dir;
  Options options = testing::TestOptions(dir);
  options.column_families.push_back("jetstream");
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  ASSERT_TRUE(bus->Close().ok());
  InboundOptions o;
  o.stream = kStream;
  o.durable = "d";
  o.filter_subject = "walbus.>";
  o.connection.url = "nats://127.0.0.1:1";
  for (const std::string cf : {"jetstream", ""}) {  // with its records, and without
    o.column_family = cf;
    std::unique_ptr<Inbound> in;
    Status s = Inbound::Start(bus.get(), o, &in);
    EXPECT_TRUE(s.IsClosed()) << "column family '" << cf << "': " << s.ToString();
    EXPECT_EQ(in, nullptr);
  }
}

}  // namespace
}  // namespace walbus::jetstream
