// The CloudEvents NATS binding (bridge/cloudevents.cc) as clients nobody
// here wrote see it: the official NATS JavaScript client and CloudEvents
// JavaScript SDK (installed by the CloudEventsSdk fixture) read what a
// relay published, and write what an inbound consumer takes in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bridge/relay_journal.h"
#include "bus/util/rfc3339.h"
#include "tests/bridge/bridge_node.h"
#include "tests/bridge/nats_client.h"
#include "tests/test_util.h"
#include "tools/walbus/inspect_util.h"
#include "walbus/bus.h"
#include "walbus/jetstream.h"

namespace walbus::jetstream {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

// Runs a script of tests/bridge/cloudevents_sdk with node; its exit status, and
// its output in *output.
int RunScript(const std::string& script, const std::string& args, std::string* output) {
  const std::string command =
      "NODE_PATH=" WALBUS_CE_NODE_PATH " node " WALBUS_CE_SCRIPTS "/" + script + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output->append(buf, n);
  return ::pclose(pipe);
}

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k) chunk = (chunk << 8) | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out.push_back(k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 0x3F] : '=');
  }
  return out;
}

// Every event a bus commits, by id (a subscriber of all types).
struct Recorder {
  explicit Recorder(Bus& bus) {
    SubscriberOptions s;
    s.name = "recorder";
    s.handler = [this](const Event& e, HandlerContext&) {
      std::lock_guard<std::mutex> lock(mu);
      events[e.id.ToString()] = e;
      return Outcome::Done();
    };
    EXPECT_TRUE(bus.Subscribe(std::move(s)).ok());
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return events.size();
  }
  std::mutex mu;
  std::map<std::string, Event> events;
};

// The string value of "name" in one line of flat JSON as the scripts write
// it (no escapes but \" and \\); nullopt for null or a missing field.
std::optional<std::string> JsonText(const std::string& line, const std::string& name) {
  const size_t key = line.find("\"" + name + "\":");
  if (key == std::string::npos) return std::nullopt;
  size_t i = key + name.size() + 3;
  if (line.compare(i, 4, "null") == 0 || line[i] != '"') return std::nullopt;
  std::string value;
  for (++i; i < line.size() && line[i] != '"'; ++i) value.push_back(line[i] == '\\' ? line[++i] : line[i]);
  return value;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

Options BridgedBusOptions(const TempDir& dir) {
  Options o = testing::TestOptions(dir);
  o.column_families.push_back("jetstream");
  return o;
}

struct Awkward {
  std::string source;
  std::string subject;
  std::string content_type;
  std::string data;
  uint64_t subject_version = 0;
};

// Subjects and sources that need the binding's percent-encoding (and the
// subject token rule), each published twice so that positions count.
std::vector<Awkward> AwkwardEvents() {
  std::string binary;
  for (int b = 0; b < 256; ++b) binary.push_back(static_cast<char>(b));
  return {
      {"urn:dev:7", "pct%41x", "text/plain; charset=utf-8", "caf\xc3\xa9 \xe2\x82\xac", 3},
      {"https://fleet.example/dev/7?x=1#f", "caf\xc3\xa9-\xe2\x82\xac", "application/json", "{\"a\": 1}", 0},
      {"/fleet/dev%207", "with space", "", binary, 0},
      {"dev-7", "quo\"te 'and' back\\slash", "application/octet-stream", "", 7},
      {"urn:dev:7", "emoji \xf0\x9f\x98\x80 and %", "text/plain", "x", 0},
  };
}

TEST(CloudEventsSdkTest, RelayedEventsDecodeByteForByte) {
  testing::LocalNatsServer server;
  ASSERT_TRUE(server.Start());
  TempDir dir;
  auto bus = testing::OpenBus(BridgedBusOptions(dir));
  RelayOptions options = bridge_node::DeviceRelayOptions(server.url());
  options.only_source.clear();
  std::unique_ptr<Relay> relay;
  ASSERT_TRUE(Relay::Attach(bus.get(), options, &relay).ok());
  Recorder recorder(*bus);
  ASSERT_TRUE(bus->Start().ok());
  std::vector<EventSpec> published;
  std::vector<std::string> ids;
  for (int round = 0; round < 2; ++round) {
    for (const Awkward& a : AwkwardEvents()) {
      EventSpec e;
      e.type = "fleet.reading-taken.v1";
      e.source = a.source;
      e.subject = a.subject;
      e.content_type = a.content_type;
      e.data = a.data;
      e.subject_version = a.subject_version == 0 ? 0 : a.subject_version + round;
      if (round == 1) e.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
      Transaction tx = bus->Begin();
      ASSERT_TRUE(tx.Publish(e).ok());
      Result<Receipt> receipt = tx.Commit();
      ASSERT_TRUE(receipt.ok()) << receipt.status().ToString();
      ids.push_back(receipt->event_ids[0].ToString());
      published.push_back(e);
    }
  }
  ASSERT_TRUE(testing::Eventually([&] { return relay->Stats().published == published.size(); }, 30s));
  ASSERT_TRUE(bus->WaitIdle(30s).ok());
  ASSERT_EQ(recorder.size(), published.size());

  // What the SDK must read: every attribute as published.
  Transaction tx = bus->Begin();
  Result<std::optional<std::string>> origin = tx.Get("jetstream", bridge::RelayKeys(options.subscriber_name).Origin());
  ASSERT_TRUE(origin.ok() && origin->has_value());
  const std::string expected_path = dir.root() + "/expected.jsonl";
  std::ofstream expected(expected_path);
  std::map<std::pair<std::string, std::string>, uint64_t> positions;
  for (size_t i = 0; i < published.size(); ++i) {
    const EventSpec& e = published[i];
    const Event& stored = recorder.events[ids[i]];
    expected << "{\"id\":" << internal::inspect_util::JsonString(ids[i])
             << ",\"source\":" << internal::inspect_util::JsonString(e.source)
             << ",\"type\":" << internal::inspect_util::JsonString(e.type)
             << ",\"subject\":" << internal::inspect_util::JsonString(e.subject)
             << ",\"time\":" << internal::inspect_util::JsonString(internal::FormatRfc3339(stored.time))
             << ",\"subjectseq\":\"" << ++positions[{e.source, e.subject}] << "\""
             << ",\"seqorigin\":" << internal::inspect_util::JsonString(**origin);
    if (!e.content_type.empty())
      expected << ",\"datacontenttype\":" << internal::inspect_util::JsonString(e.content_type);
    if (e.subject_version != 0) expected << ",\"subjectversion\":\"" << e.subject_version << "\"";
    if (!e.traceparent.empty()) expected << ",\"traceparent\":" << internal::inspect_util::JsonString(e.traceparent);
    expected << ",\"data_base64\":\"" << Base64(e.data) << "\"}\n";
  }
  expected.close();
  std::string output;
  const int rc = RunScript("read_relayed.js", server.url() + " " + options.stream.name + " " + expected_path, &output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_NE(output.find(std::to_string(published.size()) + " relayed events decoded"), std::string::npos) << output;
}

TEST(CloudEventsSdkTest, InboundTakesWhatTheSdkEncodes) {
  testing::LocalNatsServer server;
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(testing::CreateStream(server.url(), "CLOUD", {"cloud.>"}));
  TempDir dir;
  const std::string sent_path = dir.root() + "/sent.jsonl";
  std::string output;
  ASSERT_EQ(RunScript("send_binary.js", server.url() + " cloud.fleet " + sent_path, &output), 0) << output;
  const std::vector<std::string> sent = Lines(sent_path);
  ASSERT_EQ(sent.size(), 5u) << output;

  auto bus = testing::OpenBus(BridgedBusOptions(dir));
  Recorder recorder(*bus);
  InboundOptions in_options = bridge_node::ReceiverInboundOptions(server.url());
  in_options.stream = "CLOUD";
  in_options.filter_subject = "cloud.>";
  std::unique_ptr<Inbound> in;
  ASSERT_TRUE(Inbound::Start(bus.get(), in_options, &in).ok());
  ASSERT_TRUE(bus->Start().ok());
  ASSERT_TRUE(testing::Eventually([&] { return recorder.size() == sent.size(); }, 30s))
      << "quarantined " << in->Stats().quarantined;
  EXPECT_EQ(in->Stats().quarantined, 0u);
  std::lock_guard<std::mutex> lock(recorder.mu);
  auto& taken = recorder.events;
  for (const std::string& line : sent) {
    const std::string id = JsonText(line, "id").value_or("");
    ASSERT_EQ(taken.count(id), 1u) << line;
    const Event& e = taken[id];
    EXPECT_EQ(e.source, JsonText(line, "source")) << line;
    EXPECT_EQ(e.type, JsonText(line, "type")) << line;
    // A CloudEvent without a subject is ordered by its source.
    EXPECT_EQ(e.subject, JsonText(line, "subject").value_or(e.source)) << line;
    EXPECT_EQ(e.content_type, JsonText(line, "datacontenttype").value_or("")) << line;
    EXPECT_EQ(Base64(e.data), JsonText(line, "data_base64")) << line;
    EXPECT_EQ(internal::FormatRfc3339(e.time).substr(0, 19), JsonText(line, "time").value_or("").substr(0, 19));
  }
}

}  // namespace
}  // namespace walbus::jetstream
