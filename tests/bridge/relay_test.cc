// bridge/relay.cc against a real nats-server: every event once in the
// stream, per-subject order, a server killed mid-stream, a long offline
// period, a device killed between PubAck and checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "bridge/nats_link.h"
#include "tests/bridge/bridge_node.h"
#include "tests/bridge/nats_client.h"
#include "tests/payload_json.h"
#include "tests/test_util.h"
#include "walbus/bus.h"
#include "walbus/jetstream.h"

namespace walbus::jetstream {
namespace {

using namespace std::chrono_literals;
using NatsServer = testing::LocalNatsServer;
using testing::TempDir;

constexpr char kStream[] = "ORDERS";
constexpr const char* kType = bridge_node::kEventType;

RelayOptions MakeRelayOptions(const NatsServer& server) {
  RelayOptions o;
  o.connection.url = server.url();
  o.connection.request_timeout = 1000ms;
  o.connection.reconnect_wait = 100ms;
  o.stream.name = kStream;
  o.stream.subjects = {"walbus.>"};
  o.retry.cap = 500ms;
  return o;
}

// MakeRelayOptions under a bandwidth cap of `rate` bytes a second, with
// bursts of `burst` bytes.
RelayOptions CappedRelayOptions(const NatsServer& server, uint64_t rate, uint64_t burst) {
  RelayOptions o = MakeRelayOptions(server);
  o.max_bytes_per_second = rate;
  o.burst_bytes = burst;
  return o;
}

// Runs the shell command `command`; its exit status, and what it wrote
// (both streams) in *out.
int RunTool(const std::string& command, std::string* out) {
  out->clear();
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[512];
  while (fgets(buf, sizeof buf, p) != nullptr) *out += buf;
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string SubjectKey(int i, int subjects) { return "order-" + std::to_string(i % subjects); }

// Commits events [first, last) over `subjects` keys; data "i".
void PublishRange(Bus& bus, int first, int last, int subjects) {
  for (int i = first; i < last; ++i) {
    Transaction tx = bus.Begin();
    EventSpec e;
    e.type = kType;
    e.subject = SubjectKey(i, subjects);
    e.data = std::to_string(i);
    ASSERT_TRUE(tx.Publish(e).ok());
    auto r = tx.Commit();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
}

// The stream holds each of `expected` events exactly once, and each
// subject's events in publish (data) order.
void ExpectEachOnceInSubjectOrder(const NatsServer& server, int expected, const char* stream = kStream) {
  const auto messages = testing::ReadStream(server.url(), stream, "walbus.>");
  ASSERT_EQ(static_cast<int>(messages.size()), expected) << "messages in the stream";
  std::set<std::string> ids;
  std::map<std::string, int> last_by_subject;
  for (const auto& m : messages) {
    EXPECT_TRUE(ids.insert(m.headers.at("ce-id")).second) << "duplicate in the stream: " << m.headers.at("ce-id");
    const std::string& subject = m.headers.at("ce-subject");
    const int n = std::stoi(m.data);
    auto it = last_by_subject.find(subject);
    if (it != last_by_subject.end()) {
      EXPECT_LT(it->second, n) << "out of order on " << subject;
    }
    last_by_subject[subject] = n;
    EXPECT_EQ(m.headers.at("ce-type"), kType);
    EXPECT_EQ(m.headers.at("Nats-Msg-Id"), m.headers.at("ce-id"));
  }
}

// A bus with the relay's column family.
Options RelayBusOptions(const TempDir& dir) {
  Options o = testing::TestOptions(dir);
  o.column_families.push_back("jetstream");
  return o;
}

// A bus for a relay, logging into *logger (made here) from `level` up.
std::unique_ptr<Bus> OpenLoggedBus(const TempDir& dir, LogLevel level,
                                   std::shared_ptr<testing::CapturingLogger>* logger) {
  Options options = RelayBusOptions(dir);
  *logger = std::make_shared<testing::CapturingLogger>(level);
  options.logger = *logger;
  return testing::OpenBus(options);
}

// A bus with a relay to `server`, started.
struct RelayedBus {
  explicit RelayedBus(const NatsServer& server) {
    bus = testing::OpenBus(RelayBusOptions(dir));
    EXPECT_TRUE(Relay::Attach(bus.get(), MakeRelayOptions(server), &relay).ok());
    EXPECT_TRUE(bus->Start().ok());
  }
  TempDir dir;
  std::unique_ptr<Bus> bus;
  std::unique_ptr<Relay> relay;
};

// Events committed that the subscriber has not completed.
uint64_t LagOf(Bus& bus, const std::string& name) {
  const BusStats stats = bus.Stats();
  for (const auto& s : stats.subscribers)
    if (s.name == name) return stats.last_seq - s.checkpoint;
  return ~uint64_t{0};
}

TEST(RelayTest, PublishesEveryEventOnceInSubjectOrder) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  RelayedBus node(server);
  auto& bus = node.bus;
  auto& relay = node.relay;
  PublishRange(*bus, 0, 500, 7);
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  ExpectEachOnceInSubjectOrder(server, 500);
  // A republish of a relayed event (as after a crash before its checkpoint)
  // is flagged a duplicate and not stored again.
  const auto stored = testing::ReadStream(server.url(), kStream, "walbus.>");
  ASSERT_FALSE(stored.empty());
  bool duplicate = false;
  ASSERT_TRUE(testing::PublishRaw(server.url(), stored[7].subject, stored[7].headers, stored[7].data, &duplicate));
  EXPECT_TRUE(duplicate) << "the stream's duplicate window keys on Nats-Msg-Id = event id";
  EXPECT_EQ(testing::ReadStream(server.url(), kStream, "walbus.>").size(), 500u);
  const RelayStats stats = relay->Stats();
  EXPECT_TRUE(stats.connected);
  EXPECT_EQ(stats.published, 500u);
  EXPECT_EQ(stats.duplicates, 0u);
  const std::string metrics = relay->MetricsText();
  EXPECT_NE(metrics.find("walbus_relay_published_total{relay=\"jetstream-relay\"} 500"), std::string::npos) << metrics;
  // The bus's own metrics (its /metrics endpoint) carry the relay's too,
  // for as long as the relay lives.
  const std::string on_bus = bus->MetricsText();
  EXPECT_NE(on_bus.find("walbus_relay_published_total{relay=\"jetstream-relay\"} 500"), std::string::npos) << on_bus;
  EXPECT_NE(on_bus.find("walbus_subscriber_handled_total{subscriber=\"jetstream-relay\"} 500"), std::string::npos);
  relay.reset();
  EXPECT_EQ(bus->MetricsText().find("walbus_relay_"), std::string::npos) << "a destroyed relay is forgotten";
}

// The bytes of each stored message as the bandwidth cap counts them
// (subject, NATS headers, payload).
std::vector<uint64_t> WireSizes(const std::vector<testing::StoredMessage>& messages) {
  std::vector<uint64_t> sizes;
  for (const auto& m : messages) {
    uint64_t bytes = m.subject.size() + sizeof("NATS/1.0\r\n\r\n") - 1 + m.data.size();
    for (const auto& [name, value] : m.headers) bytes += name.size() + value.size() + sizeof(": \r\n") - 1;
    sizes.push_back(bytes);
  }
  return sizes;
}

// In every window between two stored messages, what the relay sent stays
// within burst + rate x window + one message (plus the server's delay in
// storing what it receives).
void ExpectWithinTheCap(const std::vector<testing::StoredMessage>& messages, uint64_t rate, uint64_t burst) {
  constexpr double kStoreDelaySeconds = 0.1;
  const std::vector<uint64_t> sizes = WireSizes(messages);
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  for (size_t i = 0; i < messages.size(); ++i) {
    uint64_t bytes = 0;
    for (size_t j = i; j < messages.size(); ++j) {
      bytes += sizes[j];
      const double window = static_cast<double>(messages[j].stored_ns - messages[i].stored_ns) / 1e9;
      ASSERT_LE(static_cast<double>(bytes), burst + rate * (window + kStoreDelaySeconds) + largest)
          << "messages " << i << ".." << j << " in " << window << " s";
    }
  }
}

// The bandwidth cap, measured where it matters, on the server: in every
// window what the relay sent stays within the cap (ExpectWithinTheCap),
// each subject stays in order, and the relay's count of what it sent is
// what the stream holds, byte for byte.
TEST(RelayTest, TheBandwidthCapHoldsInEveryWindowOnTheServer) {
  constexpr uint64_t kRate = 30000, kBurst = 3000;
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), CappedRelayOptions(server, kRate, kBurst), &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  constexpr int kEvents = 240;
  PublishRange(*bus, 0, kEvents, 6);
  ASSERT_TRUE(bus->WaitIdle(120s).ok());
  ExpectEachOnceInSubjectOrder(server, kEvents);

  const auto messages = testing::ReadStream(server.url(), kStream, "walbus.>");
  ASSERT_EQ(messages.size(), static_cast<size_t>(kEvents));
  ExpectWithinTheCap(messages, kRate, kBurst);
  const std::vector<uint64_t> sizes = WireSizes(messages);
  const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});
  const RelayStats stats = relay->Stats();
  EXPECT_EQ(stats.sent_bytes, total) << "the cap counts what the server holds";
  EXPECT_GT(stats.rate_waits, 0u);
  EXPECT_GT(total, 10 * kBurst) << "enough to be held back";
  // Held back, not stalled: the whole run took about what its bytes need.
  const double seconds = static_cast<double>(messages.back().stored_ns - messages.front().stored_ns) / 1e9;
  EXPECT_LT(seconds, 3.0 * static_cast<double>(total) / kRate + 3.0);
  const std::string metrics = relay->MetricsText();
  EXPECT_NE(metrics.find("walbus_relay_sent_bytes_total{relay=\"jetstream-relay\"} " + std::to_string(total)),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("walbus_relay_max_bytes_per_second{relay=\"jetstream-relay\"} 30000"), std::string::npos);
}

// The log says when the connection is lost and when it is back, with the
// server and how long it was down: offline is visible, not only in stats,
// and said when it happens, not with the next event.
TEST(RelayTest, TheLogSaysWhenTheConnectionIsLostAndBack) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  std::shared_ptr<testing::CapturingLogger> logger;
  auto bus = OpenLoggedBus(dir, LogLevel::kInfo, &logger);
  ASSERT_NE(bus, nullptr);
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), MakeRelayOptions(server), &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  const auto logged = [&](const std::string& text) { return logger->text().find(text) != std::string::npos; };
  ASSERT_TRUE(testing::Eventually([&] { return logged("walbus relay jetstream-relay: connected to nats://"); }, 10s))
      << logger->text();
  server.Kill();
  // Said when it happens, by an idle relay too: no event is waiting yet.
  ASSERT_TRUE(testing::Eventually([&] { return logged(" lost; reconnecting"); }, 10s)) << logger->text();
  EXPECT_TRUE(logged("jetstream-relay: connection to nats://")) << logger->text();
  PublishRange(*bus, 0, 5, 5);         // offline with events waiting
  std::this_thread::sleep_for(500ms);  // offline for a while
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  EXPECT_TRUE(logged(" again, after ")) << logger->text();
  EXPECT_TRUE(logged(" s offline")) << logger->text();
  // Offline, the relay waited: not the events' failures, no warning each.
  EXPECT_FALSE(logged("outcome=retry subscriber=jetstream-relay")) << logger->text();
  const BusStats stats = bus->Stats();
  const auto relay_stats = std::find_if(stats.subscribers.begin(), stats.subscribers.end(),
                                        [](const SubscriberStats& s) { return s.name == "jetstream-relay"; });
  ASSERT_NE(relay_stats, stats.subscribers.end());
  EXPECT_GT(relay_stats->waits, 0u);
  EXPECT_EQ(relay_stats->retries, 0u);
}

// A stream whose subjects do not take the relay's: every publish would
// fail, which no retry mends. Said once, naming the option, and shown by
// `walbus bridge` (a later connection that finds it covered clears it).
TEST(RelayTest, AStreamThatDoesNotTakeTheSubjectPrefixIsNamed) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  std::shared_ptr<testing::CapturingLogger> logger;
  auto bus = OpenLoggedBus(dir, LogLevel::kWarning, &logger);
  ASSERT_NE(bus, nullptr);
  RelayOptions relay_options = MakeRelayOptions(server);
  relay_options.stream.subjects = {"fleet.>"};  // made with these; the prefix stays "walbus"
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), relay_options, &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  PublishRange(*bus, 0, 3, 3);
  const std::string said = "walbus relay jetstream-relay: stream " + std::string(kStream) +
                           " takes subjects [fleet.>], which do not cover RelayOptions::subject_prefix \"walbus\"";
  ASSERT_TRUE(testing::Eventually([&] { return logger->text().find(said) != std::string::npos; }, 20s))
      << logger->text();
  std::this_thread::sleep_for(1s);  // retries meanwhile
  const std::string log = logger->text();
  EXPECT_EQ(log.find(said), log.rfind(said)) << "said once: " << log;
  const std::string tool = std::string(WALBUS_CLI) + " bridge " + dir.path();
  std::string out;
  ASSERT_EQ(RunTool(tool, &out), 0) << out;
  EXPECT_NE(out.find("SUBJECTS      stream " + std::string(kStream) + " takes subjects [fleet.>]"), std::string::npos)
      << out;
  relay.reset();
  ASSERT_TRUE(bus->Close().ok());
}

TEST(RelayTest, ServerKilledAndRestartedMidStreamLosesAndDuplicatesNothing) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  RelayedBus node(server);
  auto& bus = node.bus;
  auto& relay = node.relay;
  std::thread producer([&] { PublishRange(*bus, 0, 3000, 20); });
  ASSERT_TRUE(testing::Eventually([&] { return relay->Stats().published >= 300; }, 60s));
  server.Kill();  // SIGKILL: no flush, like a crash of the server
  ASSERT_TRUE(testing::Eventually([&] { return !relay->Stats().connected; }, 10s));
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(server.Start());
  producer.join();
  ASSERT_TRUE(bus->WaitIdle(120s).ok());
  ExpectEachOnceInSubjectOrder(server, 3000);
  EXPECT_GE(relay->Stats().disconnects, 1u);
  EXPECT_GT(relay->Stats().offline_seconds, 0.5);
}

TEST(RelayTest, AcknowledgedMessagesTheServerLostAreRepublishedInOrderFromTheJournal) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  RelayedBus node(server);
  auto& bus = node.bus;
  auto& relay = node.relay;
  PublishRange(*bus, 0, 400, 20);
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  ASSERT_EQ(relay->Stats().published, 400u);
  // A crash before the server wrote out what it acknowledged: its newest
  // messages are gone when it comes back.
  server.Kill();
  ASSERT_GT(server.DropStreamTail(kStream, 16 << 10), 0u);
  ASSERT_TRUE(server.Start());
  // The relay checks its journal once reconnected (too soon to count the
  // loss from here) and republishes what the stream lacks.
  ASSERT_TRUE(
      testing::Eventually([&] { return testing::ReadStream(server.url(), kStream, "walbus.>").size() == 400; }, 30s));
  const RelayStats stats = relay->Stats();
  EXPECT_GT(stats.server_loss_detected, 0u);
  EXPECT_EQ(stats.repaired, stats.server_loss_detected);
  EXPECT_EQ(stats.unrepairable_losses, 0u);
  const uint64_t lost = stats.server_loss_detected;
  ExpectEachOnceInSubjectOrder(server, 400);
  // Each subject's positions are 1, 2, 3, ... in stream order, republished
  // ones included.
  std::map<std::string, uint64_t> position;
  for (const auto& m : testing::ReadStream(server.url(), kStream, "walbus.>")) {
    EXPECT_EQ(std::stoull(m.headers.at("ce-subjectseq")), ++position[m.headers.at("ce-subject")]);
    EXPECT_FALSE(m.headers.at("ce-seqorigin").empty());
  }
  const std::string metrics = relay->MetricsText();
  EXPECT_NE(metrics.find("walbus_relay_server_loss_repaired_total{relay=\"jetstream-relay\"} " + std::to_string(lost)),
            std::string::npos)
      << metrics;
  // Events after the repair go on in order behind it.
  PublishRange(*bus, 400, 450, 20);
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  ExpectEachOnceInSubjectOrder(server, 450);
}

TEST(RelayTest, EventsOfATypeWithASchemaCarryTheDataSchemaTheyWerePublishedUnder) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  constexpr const char* kV1 =
      "namespace orders; table Placed { order_id: string (required); }\nroot_type Placed;\n"
      "file_identifier \"ORPL\";";
  constexpr const char* kV2 =
      "namespace orders; table Placed { order_id: string (required); channel: string; }\nroot_type Placed;\n"
      "file_identifier \"ORPL\";";
  constexpr char kTyped[] = "orders.placed.v1";
  // One event under each version, both waiting when the relay starts.
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), MakeRelayOptions(server), &relay).ok());
  auto PublishTyped = [&](const char* schema, const std::string& subject) {
    Transaction tx = bus->Begin();
    EventSpec typed;
    typed.type = kTyped;
    typed.subject = subject;
    typed.data = testing::PayloadFromJson(schema, R"({"order_id": "o"})");
    ASSERT_TRUE(tx.Publish(typed).ok());
    ASSERT_TRUE(tx.Commit().ok());
  };
  auto v1 = bus->Contracts().RegisterSchema(kTyped, testing::BinarySchemaFromSource(kV1));
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  PublishTyped(kV1, "typed-1");
  auto v2 = bus->Contracts().RegisterSchema(kTyped, testing::BinarySchemaFromSource(kV2));
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  ASSERT_EQ(v2->version, 2u);
  PublishTyped(kV2, "typed-2");
  PublishRange(*bus, 0, 1, 1);  // a type without a schema
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  std::map<std::string, std::string> dataschema;  // subject -> header ("" for none)
  for (auto& m : testing::ReadStream(server.url(), kStream, "walbus.>")) {
    dataschema[m.headers.at("ce-subject")] = m.headers.count("ce-dataschema") ? m.headers["ce-dataschema"] : "";
  }
  ASSERT_EQ(dataschema.size(), 3u);
  EXPECT_EQ(dataschema["typed-1"], DataSchemaUri(kTyped, *v1)) << "the version it was published under";
  EXPECT_EQ(dataschema["typed-1"], "walbus:schema:orders.placed.v1:v1:" + v1->hash);
  EXPECT_EQ(dataschema["typed-2"], DataSchemaUri(kTyped, *v2));
  EXPECT_EQ(dataschema["order-0"], "") << "a type without a schema has none";
}

// The relay reads the outbox alone: a scheduled event reaches the stream
// once it fired, after the subject's events that entered the outbox
// before it; one cancelled before its time never does.
TEST(RelayTest, AScheduledEventIsRelayedOnlyOnceItFires) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  auto clock = std::make_shared<testing::ManualClock>();
  Options options = RelayBusOptions(dir);
  options.clock = clock;
  auto bus = testing::OpenBus(options);
  ASSERT_NE(bus, nullptr);
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), MakeRelayOptions(server), &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  EventId cancelled;
  {
    Transaction tx = bus->Begin();
    for (int i : {3, 4, 5}) {
      EventSpec later{.type = kType, .subject = SubjectKey(0, 1), .data = std::to_string(i)};
      later.deliver_after = std::chrono::minutes(i);
      auto id = tx.Publish(later);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      if (i == 5) cancelled = *id;
    }
    ASSERT_TRUE(tx.Commit().ok());
  }
  PublishRange(*bus, 0, 3, 1);
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  ExpectEachOnceInSubjectOrder(server, 3);
  {
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.CancelScheduled(cancelled).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  clock->Advance(std::chrono::minutes(10));
  ASSERT_TRUE(testing::Eventually([&] { return relay->Stats().published == 5; }));
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  ExpectEachOnceInSubjectOrder(server, 5);
}

TEST(RelayTest, PositionsAndJournalSurviveARestartOfTheDevice) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  std::string origin;
  for (int run = 0; run < 2; ++run) {
    auto bus = testing::OpenBus(RelayBusOptions(dir));
    std::unique_ptr<Relay> relay;
    ASSERT_TRUE(Relay::Attach(bus.get(), MakeRelayOptions(server), &relay).ok());
    ASSERT_TRUE(bus->Start().ok());
    PublishRange(*bus, run * 100, run * 100 + 100, 5);
    ASSERT_TRUE(bus->WaitIdle(60s).ok());
    if (run == 0) {
      // Lost while the device is down: the next process's check repairs it.
      relay.reset();
      ASSERT_TRUE(bus->Close().ok());
      server.Kill();
      ASSERT_GT(server.DropStreamTail(kStream, 4 << 10), 0u);
      ASSERT_TRUE(server.Start());
    }
  }
  const auto messages = testing::ReadStream(server.url(), kStream, "walbus.>");
  ASSERT_EQ(messages.size(), 200u);
  std::map<std::string, uint64_t> highest;
  std::set<std::string> origins;
  for (const auto& m : messages) {
    uint64_t& h = highest[m.headers.at("ce-subject")];
    h = std::max<uint64_t>(h, std::stoull(m.headers.at("ce-subjectseq")));
    origins.insert(m.headers.at("ce-seqorigin"));
  }
  EXPECT_EQ(origins.size(), 1u) << "one relay, one origin across restarts";
  for (const auto& [subject, h] : highest) EXPECT_EQ(h, 40u) << subject << ": positions go on after a restart";
}

// The server forgets the stream while the device is off: the relay that
// starts next finds it gone and reports the loss, though this process
// never published to it.
TEST(RelayTest, AStreamForgottenWhileTheRelayWasDownIsReportedAtTheNextStart) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  RelayOptions o = MakeRelayOptions(server);
  o.confirm_after = 0ms;
  {
    auto bus = testing::OpenBus(RelayBusOptions(dir));
    std::unique_ptr<Relay> relay;
    ASSERT_TRUE(Relay::Attach(bus.get(), o, &relay).ok());
    ASSERT_TRUE(bus->Start().ok());
    PublishRange(*bus, 0, 20, 4);
    ASSERT_TRUE(bus->WaitIdle(60s).ok());
    ASSERT_TRUE(testing::Eventually([&] { return relay->Stats().journal_checks >= 2; }, 10s));
    EXPECT_EQ(relay->Stats().unrepairable_losses, 0u);
    ASSERT_TRUE(bus->Close().ok());
  }
  server.Kill();
  server.ForgetStream(kStream);
  ASSERT_TRUE(server.Start());
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), o, &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  PublishRange(*bus, 20, 25, 4);
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  EXPECT_EQ(relay->Stats().unrepairable_losses, 1u) << "this process never published to the old stream";
}

TEST(RelayTest, AStreamTheServerForgotIsReportedLoudlyAndKeptByTheTool) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  RelayOptions o = MakeRelayOptions(server);
  o.confirm_after = 0ms;  // trust the server at once: nothing left to republish
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), o, &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  PublishRange(*bus, 0, 50, 5);
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  ASSERT_TRUE(testing::Eventually([&] { return relay->Stats().journal_checks >= 2; }, 10s));
  server.Kill();
  server.ForgetStream(kStream);
  ASSERT_TRUE(server.Start());
  PublishRange(*bus, 50, 60, 5);
  ASSERT_TRUE(bus->WaitIdle(60s).ok());
  EXPECT_EQ(relay->Stats().unrepairable_losses, 1u);
  EXPECT_EQ(testing::ReadStream(server.url(), kStream, "walbus.>").size(), 10u + relay->Stats().repaired)
      << "the stream made anew holds what came after, and what the journal still held";
  EXPECT_LT(relay->Stats().repaired, 50u) << "confirmed messages were no longer in the journal";
  // The tool shows it, from the running bus's database.
  const std::string tool = std::string(WALBUS_CLI) + " bridge " + dir.path();
  std::string out;
  EXPECT_EQ(RunTool(tool, &out), 0) << out;
  EXPECT_NE(out.find("relay jetstream-relay"), std::string::npos) << out;
  EXPECT_NE(out.find("LOST          1 time(s) the stream was gone"), std::string::npos) << out;
  EXPECT_NE(out.find("subjects      5 with a position"), std::string::npos) << out;
  EXPECT_EQ(RunTool(tool + " --json", &out), 0) << out;
  EXPECT_NE(out.find("\"unrepairable_losses\":1"), std::string::npos) << out;
  EXPECT_EQ(std::system((tool + " --column-family nope >/dev/null 2>&1").c_str()) >> 8, 1);
}

TEST(RelayTest, OfflineBacklogDrainsInSubjectOrderOnReconnect) {
  NatsServer server;        // not started yet: the device is offline
  RelayedBus node(server);  // an unreachable server is not an error: the outbox waits
  ASSERT_NE(node.relay, nullptr);
  auto& bus = node.bus;
  auto& relay = node.relay;
  PublishRange(*bus, 0, 5000, 50);
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(relay->Stats().connected);
  EXPECT_EQ(LagOf(*bus, "jetstream-relay"), 5000u) << "nothing completes while offline";
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(bus->WaitIdle(180s).ok());
  ExpectEachOnceInSubjectOrder(server, 5000);
  EXPECT_EQ(LagOf(*bus, "jetstream-relay"), 0u);
  EXPECT_GT(relay->Stats().offline_seconds, 0.4);
}

// A bound on the journal paces the drain after an offline spell: the relay
// sends no more than the bound holds until entries leave it after
// confirm_after. Events that wait for room hold the relay's checkpoint
// below the entries sent after them, and those must still leave, or the
// drain would stop for good. Every event reaches the stream once.
TEST(RelayTest, AJournalBoundPacesTheDrainAndHolds) {
  NatsServer server;  // not started yet: the device is offline
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  RelayOptions o = MakeRelayOptions(server);
  constexpr uint64_t kBound = 64 << 10;
  o.max_journal_bytes = kBound;
  o.confirm_after = 300ms;
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), o, &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  constexpr int kBacklog = 3000;
  PublishRange(*bus, 0, kBacklog, 50);
  ASSERT_TRUE(server.Start());
  std::atomic<bool> idle{false};
  std::atomic<uint64_t> most{0};
  std::thread sampler([&] {
    while (!idle.load()) {
      most = std::max(most.load(), relay->Stats().journal_bytes);
      std::this_thread::sleep_for(2ms);
    }
  });
  const Status drained = bus->WaitIdle(120s);
  idle = true;
  sampler.join();
  ASSERT_TRUE(drained.ok()) << drained.ToString();
  ExpectEachOnceInSubjectOrder(server, kBacklog);
  const RelayStats stats = relay->Stats();
  EXPECT_GT(stats.journal_waits, 0u);
  EXPECT_GT(most.load(), kBound / 2) << "the journal filled";
  // Workers that found room at once each add a message past it.
  EXPECT_LE(most.load(), kBound + (16 << 10)) << "past the bound by more than a message per worker";
  EXPECT_TRUE(testing::Eventually([&] { return relay->Stats().journal_bytes == 0; }, 10s))
      << "left in the journal: " << relay->Stats().journal_bytes;
  EXPECT_NE(relay->MetricsText().find("walbus_relay_journal_waits_total{relay=\"jetstream-relay\"} " +
                                      std::to_string(relay->Stats().journal_waits)),
            std::string::npos);
}

constexpr char kAckType[] = "orders.command-acknowledged.v1";

// Commits `count` events of the priority type, on subjects cmd-0, cmd-1...
void PublishAcks(Bus& bus, int count) {
  for (int i = 0; i < count; ++i) {
    Transaction tx = bus.Begin();
    EventSpec e;
    e.type = kAckType;
    e.subject = "cmd-" + std::to_string(i);
    e.data = std::to_string(i);
    ASSERT_TRUE(tx.Publish(e).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
}

// Where in the stream (0-based) each message of `type` is.
std::vector<size_t> PlacesOf(const std::vector<testing::StoredMessage>& messages, const std::string& type) {
  std::vector<size_t> places;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].headers.at("ce-type") == type) places.push_back(i);
  }
  return places;
}

// After a long offline spell, an acknowledgement published behind a
// backlog of readings reaches the stream while the backlog still drains:
// its level's subscriber read past the backlog. Each level keeps its own
// per-subject order and is a sender of its own across the bridge.
TEST(RelayTest, AHigherPriorityOvertakesTheOfflineBacklog) {
  NatsServer server;  // not started yet: the device is offline
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  RelayOptions o = MakeRelayOptions(server);
  o.priorities = {{kAckType, 2}};
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), o, &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  constexpr int kBacklog = 20000;
  PublishRange(*bus, 0, kBacklog, 50);
  PublishAcks(*bus, 3);
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(bus->WaitIdle(300s).ok());

  const auto messages = testing::ReadStream(server.url(), kStream, "walbus.>");
  ASSERT_EQ(messages.size(), static_cast<size_t>(kBacklog + 3));
  const std::vector<size_t> acks = PlacesOf(messages, kAckType);
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_LT(acks.back(), static_cast<size_t>(kBacklog / 10)) << "the acknowledgements waited behind the backlog";
  std::map<std::string, std::string> origin_by_type;
  std::set<std::string> ids;
  std::map<std::string, int> last_by_subject;
  for (const auto& m : messages) {
    EXPECT_TRUE(ids.insert(m.headers.at("ce-id")).second) << "duplicate: " << m.headers.at("ce-id");
    const auto it = origin_by_type.emplace(m.headers.at("ce-type"), m.headers.at("ce-seqorigin"));
    EXPECT_EQ(it.first->second, m.headers.at("ce-seqorigin")) << "one sender per level";
    const int n = std::stoi(m.data);
    const std::string key = m.headers.at("ce-type") + "/" + m.headers.at("ce-subject");
    if (last_by_subject.contains(key)) {
      EXPECT_LT(last_by_subject[key], n) << "out of order on " << key;
    }
    last_by_subject[key] = n;
  }
  EXPECT_NE(origin_by_type.at(kAckType), origin_by_type.at(kType));

  const std::vector<RelayLevelStats> levels = relay->Levels();
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_EQ(levels[0].priority, 0u);
  EXPECT_EQ(levels[0].subscriber_name, "jetstream-relay");
  EXPECT_EQ(levels[0].stats.published, static_cast<uint64_t>(kBacklog));
  EXPECT_EQ(levels[1].priority, 2u);
  EXPECT_EQ(levels[1].subscriber_name, "jetstream-relay.p2");
  EXPECT_EQ(levels[1].stats.published, 3u);
  EXPECT_EQ(relay->Stats().published, static_cast<uint64_t>(kBacklog + 3));
  EXPECT_EQ(LagOf(*bus, "jetstream-relay.p2"), 0u);
  const std::string metrics = relay->MetricsText();
  EXPECT_NE(metrics.find("walbus_relay_priority{relay=\"jetstream-relay.p2\"} 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("walbus_relay_published_total{relay=\"jetstream-relay\"} 20000"), std::string::npos);
}

// Priorities set on a device whose relay had none, with a backlog
// waiting: the lowest level completes the acknowledgements without a
// publish from now on, so the new level must take those already waiting.
// Every event reaches the stream once.
TEST(RelayTest, ALevelAddedLaterTakesTheWaitingEventsOfItsTypes) {
  NatsServer server;  // down while both runs commit
  TempDir dir;
  {
    auto bus = testing::OpenBus(RelayBusOptions(dir));
    std::unique_ptr<Relay> relay;
    ASSERT_TRUE(Relay::Attach(bus.get(), MakeRelayOptions(server), &relay).ok());
    ASSERT_TRUE(bus->Start().ok());
    PublishRange(*bus, 0, 200, 4);
    PublishAcks(*bus, 3);
    std::this_thread::sleep_for(200ms);
    relay.reset();
    ASSERT_TRUE(bus->Close().ok());
  }
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  RelayOptions o = MakeRelayOptions(server);
  o.priorities = {{kAckType, 2}};
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), o, &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(bus->WaitIdle(120s).ok());
  const auto messages = testing::ReadStream(server.url(), kStream, "walbus.>");
  EXPECT_EQ(messages.size(), 203u);
  EXPECT_EQ(PlacesOf(messages, kAckType).size(), 3u) << "the acknowledgements waiting before the level existed";
  EXPECT_EQ(relay->Levels().at(1).stats.published, 3u);
}

// Under the bandwidth cap the levels share it, and a higher level that
// waits takes the next bytes: acknowledgements published while a backlog
// is held back by the cap go out within a few messages, and together the
// levels stay within the cap in every window.
TEST(RelayTest, UnderTheCapAHigherPriorityTakesTheNextBytes) {
  constexpr uint64_t kRate = 40000, kBurst = 4000;
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  RelayOptions o = CappedRelayOptions(server, kRate, kBurst);
  o.priorities = {{kAckType, 1}};
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), o, &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  constexpr int kBacklog = 300;
  PublishRange(*bus, 0, kBacklog, 6);
  ASSERT_TRUE(testing::Eventually([&] { return relay->Stats().rate_waits > 0; }, 10s));
  const uint64_t sent_before = relay->Stats().published;
  PublishAcks(*bus, 5);
  ASSERT_TRUE(bus->WaitIdle(120s).ok());

  const auto messages = testing::ReadStream(server.url(), kStream, "walbus.>");
  ASSERT_EQ(messages.size(), static_cast<size_t>(kBacklog + 5));
  ExpectWithinTheCap(messages, kRate, kBurst);
  const std::vector<size_t> acks = PlacesOf(messages, kAckType);
  ASSERT_EQ(acks.size(), 5u);
  // What was sent before they came, plus what the lower level had taken
  // from the bucket when the first claim stood, at most a message per
  // subject of it.
  EXPECT_LT(acks.back(), sent_before + 5 + 6 + 5) << "the acknowledgements waited behind the capped backlog";
  EXPECT_LT(acks.back() + 100, messages.size()) << "the backlog was still draining";
}

// `walbus bridge` shows each level: its priority, its types, its backlog
// of events not yet relayed, and the cap the levels share.
TEST(RelayTest, TheToolShowsTheBacklogByPriority) {
  NatsServer server;  // never started: everything waits
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  RelayOptions o = MakeRelayOptions(server);
  o.priorities = {{kAckType, 3}};
  o.max_bytes_per_second = 2000;
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), o, &relay).ok());
  ASSERT_TRUE(bus->Start().ok());
  PublishRange(*bus, 0, 40, 4);
  PublishAcks(*bus, 2);
  std::this_thread::sleep_for(200ms);
  const std::string tool = std::string(WALBUS_CLI) + " bridge " + dir.path();
  std::string out;
  ASSERT_EQ(RunTool(tool, &out), 0) << out;
  EXPECT_NE(out.find("relay jetstream-relay\n"), std::string::npos) << out;
  EXPECT_NE(out.find("priority      0 (every type but orders.command-acknowledged.v1)"), std::string::npos) << out;
  EXPECT_NE(out.find("backlog       40 events"), std::string::npos) << out;
  EXPECT_NE(out.find("relay jetstream-relay.p3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("priority      3 (orders.command-acknowledged.v1)"), std::string::npos) << out;
  EXPECT_NE(out.find("backlog       2 events"), std::string::npos) << out;
  EXPECT_NE(out.find("rate          at most 2000 bytes/s, bursts of 2000"), std::string::npos) << out;
  ASSERT_EQ(RunTool(tool + " --json", &out), 0) << out;
  EXPECT_NE(out.find("\"priority\":3,\"types_all_but\":false,\"types\":[\"orders.command-acknowledged.v1\"],"
                     "\"max_bytes_per_second\":2000,\"burst_bytes\":0,\"backlog_events\":2,"),
            std::string::npos)
      << out;
}

// A device process relays while it is killed (SIGKILL) again and again;
// publishes whose PubAck came but whose checkpoint did not are made again
// on restart, and the stream's duplicate window drops them.
TEST(RelayTest, DeviceKilledBetweenPubAckAndCheckpointIsDeduplicated) {
  NatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  constexpr int kEvents = 1500;
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 6; ++round) {
    const pid_t pid = bridge_node::StartNode("device", dir.path(), server.url(), kEvents);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
    ::kill(pid, SIGKILL);
    bridge_node::WaitNode(pid);
  }
  const pid_t last = bridge_node::StartNode("device", dir.path(), server.url(), kEvents);
  ASSERT_EQ(bridge_node::WaitNode(last), 0) << "the final device run failed";
  ExpectEachOnceInSubjectOrder(server, kEvents, bridge_node::kStream);
}

TEST(RelayTest, BadOptionsAreRefused) {
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  std::unique_ptr<Relay> relay;
  RelayOptions o;
  EXPECT_EQ(Relay::Attach(bus.get(), o, &relay).code(), Status::Code::kInvalidArgument) << "no stream";
  o.stream.name = kStream;
  o.connection.url = "";
  EXPECT_EQ(Relay::Attach(bus.get(), o, &relay).code(), Status::Code::kInvalidArgument) << "no url";
  EXPECT_EQ(Relay::Attach(nullptr, o, &relay).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(relay, nullptr);
  // An address the client would try forever is refused at once, naming
  // the option, before anything is written.
  for (const char* url : {"not a url", "nats://", "nats://host:0", "nats://host:99999", "nats://host:port",
                          "nats://a:4222,", "nats://[::1", "http//x"}) {
    o.connection.url = url;
    Status bad = Relay::Attach(bus.get(), o, &relay);
    EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument) << url << ": " << bad.ToString();
    EXPECT_NE(bad.message().find("ConnectionOptions::url"), std::string::npos) << bad.ToString();
  }
  auto written = bus->Read().Scan("jetstream", ScanOptions{});
  ASSERT_TRUE(written.ok());
  EXPECT_TRUE(written->rows.empty()) << "a refused Attach writes nothing";
  for (const char* url : {"nats://127.0.0.1:1", "127.0.0.1:1", "tls://user:pw@host.example:4443", "nats://[::1]:4222",
                          "nats://a:1, nats://b:2", "nats://nats_1"}) {
    EXPECT_TRUE(bridge::CheckNatsUrls(url).ok()) << url << ": " << bridge::CheckNatsUrls(url).ToString();
  }

  // A burst without a rate is a mistake, named.
  o.connection.url = "nats://127.0.0.1:1";
  o.burst_bytes = 4096;
  Status burst = Relay::Attach(bus.get(), o, &relay);
  EXPECT_TRUE(burst.IsInvalidArgument()) << burst.ToString();
  EXPECT_NE(burst.message().find("RelayOptions::burst_bytes"), std::string::npos) << burst.ToString();
  o.burst_bytes = 0;

  // Priorities out of range, or of a type the relay does not relay.
  for (uint32_t level : {0u, kMaxRelayPriority + 1}) {
    o.priorities = {{kType, level}};
    Status bad = Relay::Attach(bus.get(), o, &relay);
    EXPECT_TRUE(bad.IsInvalidArgument()) << bad.ToString();
    EXPECT_NE(bad.message().find("levels are 1 to 3"), std::string::npos) << bad.ToString();
  }
  o.priorities = {{kType, 1}};
  o.types = {"orders.other.v1"};
  Status unrelayed = Relay::Attach(bus.get(), o, &relay);
  EXPECT_TRUE(unrelayed.IsInvalidArgument()) << unrelayed.ToString();
  EXPECT_NE(unrelayed.message().find("RelayOptions::types does not relay it"), std::string::npos);
  o.priorities.clear();
  o.types.clear();
  written = bus->Read().Scan("jetstream", ScanOptions{});
  ASSERT_TRUE(written.ok());
  EXPECT_TRUE(written->rows.empty()) << "a refused Attach writes nothing";

  // The relay's records need their column family.
  TempDir other;
  auto plain = testing::OpenBus(testing::TestOptions(other));
  o.connection.url = "nats://127.0.0.1:1";
  Status missing = Relay::Attach(plain.get(), o, &relay);
  EXPECT_EQ(missing.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(missing.message().find("jetstream"), std::string::npos) << missing.ToString();
}

// Every duration of RelayOptions and its ConnectionOptions out of range,
// refused the same way: the option, its value, its range.
TEST(RelayTest, EveryBoundOfTheOptionsIsChecked) {
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  ASSERT_NE(bus, nullptr);
  struct Case {
    std::function<void(RelayOptions*)> set;
    const char* expected;
  };
  const Case cases[] = {
      {[](RelayOptions* o) { o->confirm_after = -1ms; }, "RelayOptions::confirm_after is -1 ms; it must be 0 ms.."},
      {[](RelayOptions* o) { o->confirm_after = 25h; }, "RelayOptions::confirm_after is 90000000 ms"},
      {[](RelayOptions* o) { o->stream.duplicate_window = -5ms; },
       "RelayOptions::stream.duplicate_window is -5 ms; it must be >= 0 ms"},
      {[](RelayOptions* o) { o->connection.request_timeout = 0ms; },
       "ConnectionOptions::request_timeout is 0 ms; it must be 1 ms..3600000 ms"},
      {[](RelayOptions* o) { o->connection.reconnect_wait = -1ms; }, "ConnectionOptions::reconnect_wait is -1 ms"},
      {[](RelayOptions* o) { o->connection.reconnect_wait = 2h; }, "ConnectionOptions::reconnect_wait is 7200000 ms"},
  };
  for (const Case& c : cases) {
    RelayOptions o;
    o.stream.name = kStream;
    o.connection.url = "nats://127.0.0.1:1";
    c.set(&o);
    std::unique_ptr<Relay> relay;
    const Status s = Relay::Attach(bus.get(), o, &relay);
    EXPECT_TRUE(s.IsInvalidArgument()) << c.expected << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.ToString();
    EXPECT_EQ(relay, nullptr);
  }
}

TEST(RelayTest, AttachOnAClosedBusSaysClosed) {
  TempDir dir;
  auto bus = testing::OpenBus(RelayBusOptions(dir));
  ASSERT_NE(bus, nullptr);
  ASSERT_TRUE(bus->Close().ok());
  RelayOptions o;
  o.stream.name = kStream;
  o.connection.url = "nats://127.0.0.1:1";
  std::unique_ptr<Relay> relay;
  Status s = Relay::Attach(bus.get(), o, &relay);
  EXPECT_TRUE(s.IsClosed()) << s.ToString();
  EXPECT_EQ(relay, nullptr);
}

}  // namespace
}  // namespace walbus::jetstream
