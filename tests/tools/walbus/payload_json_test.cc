// tools/walbus/payload_json.cc: payloads of types with a schema shown as
// JSON, by the reader and by every command that shows an event's data.
#include "tools/walbus/payload_json.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/payload_json.h"
#include "tests/test_util.h"
#include "tests/tools/walbus/cli_runner.h"
#include "tools/walbus/schema_source.h"
#include "walbus/bus.h"

namespace walbus::internal {
namespace {

using namespace std::chrono_literals;
using walbus::testing::RunCliOutput;
using walbus::testing::TempDir;

constexpr const char* kType = "orders.order-approved.v1";
constexpr const char* kSource =
    "namespace orders; table OrderApproved { order_id: string (required); priority: int; } "
    "root_type OrderApproved; file_identifier \"ORDA\";";
constexpr const char* kJson = R"({"order_id":"o-1","priority":2})";
// As FlatBuffers' text generator writes it: one line, a space after colons.
constexpr const char* kShown = R"({"order_id": "o-1","priority": 2})";

std::string Payload(const std::string& json) {
  std::string error;
  std::string payload = testing::PayloadFromJson(kSource, json, &error);
  EXPECT_FALSE(payload.empty()) << error;
  return payload;
}

BinarySchema Schema() {
  auto schema = ParseSchemaSource(kSource, {}, "orders.fbs");
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return std::move(*schema);
}

TEST(PayloadJsonTest, ShowsWhatPassesItsSchemaAndNothingElse) {
  PayloadReader reader;
  auto contract = PayloadContract::Make(kType, 3, Schema());
  ASSERT_TRUE(contract.ok());
  ASSERT_TRUE(reader.Add(std::move(*contract)).ok());
  const PayloadReading reading = reader.Read(kType, Payload(kJson));
  EXPECT_EQ(reading.json, kShown);
  EXPECT_EQ(reading.version, 3u);
  EXPECT_EQ(reading.dataschema, "walbus:schema:orders.order-approved.v1:v3:" + SchemaHashText(Schema().Hash()));
  EXPECT_TRUE(reader.Read(kType, "not a payload").json.empty()) << "what fails its schema is never rendered";
  EXPECT_TRUE(reader.Read("orders.order-shipped.v1", Payload(kJson)).json.empty()) << "no schema: no reading";
}

TEST(PayloadJsonTest, NamesTheVersionAnEventRecorded) {
  PayloadReader reader;
  auto contract = PayloadContract::Make(kType, 3, Schema());
  ASSERT_TRUE(contract.ok());
  ASSERT_TRUE(reader.Add(std::move(*contract), {0x11, 0x22, Schema().Hash()}).ok());
  const PayloadReading v1 = reader.Read(kType, Payload(kJson), 1);
  EXPECT_EQ(v1.json, kShown) << "read by the latest, which reads what v1 wrote";
  EXPECT_EQ(v1.version, 1u);
  EXPECT_EQ(v1.dataschema, "walbus:schema:orders.order-approved.v1:v1:" + SchemaHashText(0x11));
  EXPECT_EQ(reader.Read(kType, Payload(kJson), 0).version, 3u) << "not recorded: the latest";
  EXPECT_EQ(reader.Read(kType, Payload(kJson), 9).version, 3u) << "unknown here: the latest";
}

// Bit flags, nested FlatBuffers and FlexBuffers as flatc shows them: the
// binary schema keeps the attributes that say what they are.
TEST(PayloadJsonTest, ShowsFlagsNestedBuffersAndFlexBuffersAsFlatcDoes) {
  const std::string source =
      "namespace valves; enum Alarm : ubyte (bit_flags) { Leak, Pressure, Heat }\n"
      "table Reading { bar: int; }\n"
      "table Valve { alarms: Alarm; last: [ubyte] (nested_flatbuffer: \"Reading\"); extra: [ubyte] (flexbuffer); }\n"
      "root_type Valve; file_identifier \"VALV\";";
  auto schema = ParseSchemaSource(source, {}, "valves.fbs");
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  auto contract = PayloadContract::Make("valves.valve.v1", 1, std::move(*schema));
  ASSERT_TRUE(contract.ok()) << contract.status().ToString();
  PayloadReader reader;
  ASSERT_TRUE(reader.Add(std::move(*contract)).ok());
  std::string error;
  const std::string payload = testing::PayloadFromJson(
      source, R"({"alarms": "Leak Heat", "last": {"bar": 7}, "extra": {"site": "north", "ids": [1, 2]}})", &error);
  ASSERT_FALSE(payload.empty()) << error;
  const std::string json = reader.Read("valves.valve.v1", payload).json;
  EXPECT_NE(json.find(R"("alarms": "Leak Heat")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("last": {"bar": 7})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("site": "north")"), std::string::npos) << json;
}

// Numbers as JSON: the shortest text that reads back to the same value,
// and NaN and the infinities as strings (JSON has no number for them), so
// that every view is JSON and export --data-json changes no data.
TEST(PayloadJsonTest, NumbersAreExactAndAlwaysJson) {
  const std::string source =
      "namespace probes; table Sample { f: float; d: double; tiny: double; nan: double; up: float; down: double; "
      "big: ulong; } root_type Sample; file_identifier \"SMPL\";";
  auto schema = ParseSchemaSource(source, {}, "probes.fbs");
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  PayloadReader reader;
  ASSERT_TRUE(reader.Add(*PayloadContract::Make("probes.sample.v1", 1, *schema)).ok());
  const std::string json =
      R"({"f": 1.2345676, "d": 0.12345678901234568, "tiny": 1e-310, "nan": "NaN", "up": "Infinity", )"
      R"("down": "-Infinity", "big": 18446744073709551615})";
  std::string error;
  const std::string payload = testing::PayloadFromJson(source, json, &error);
  ASSERT_FALSE(payload.empty()) << error;
  const std::string shown = reader.Read("probes.sample.v1", payload).json;
  EXPECT_EQ(shown, R"({"f": 1.2345676,"d": 0.12345678901234568,"tiny": 1e-310,"nan": "NaN","up": "Infinity",)"
                   R"("down": "-Infinity","big": 18446744073709551615})");
  // What is shown reads back to the same payload.
  EXPECT_EQ(testing::PayloadFromJson(source, shown, &error), payload) << error;

  TempDir dir;
  {
    auto bus = testing::OpenBus(testing::TestOptions(dir));
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Contracts().RegisterSchema("probes.sample.v1", schema->bytes()).ok());
    Transaction tx = bus->Begin();
    ASSERT_TRUE(tx.Publish(EventSpec{.type = "probes.sample.v1", .subject = "probe-1", .data = payload}).ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  std::string out;
  ASSERT_EQ(RunCliOutput("export " + dir.path() + " --format cloudevents-json --data-json", &out), 0);
  EXPECT_NE(out.find(R"("data":)" + shown), std::string::npos) << "shown as data, not as base64: " << out;
}

// Every command that shows an event's data shows it as JSON.
TEST(PayloadJsonTest, EveryCommandShowsThePayloadAsJson) {
  TempDir dir;
  std::string event_id;
  {
    Options options = testing::TestOptions(dir);
    options.quarantine_max_entries = 8;
    auto bus = testing::OpenBus(options);
    ASSERT_NE(bus, nullptr);
    ASSERT_TRUE(bus->Contracts().RegisterSchema(kType, Schema().bytes()).ok());
    SubscriberOptions s;
    s.name = "billing";
    s.handler = [](const Event&, HandlerContext&) { return Outcome::Reject("no account"); };
    ASSERT_TRUE(bus->Subscribe(std::move(s)).ok());
    // Keeps the event in the outbox.
    SubscriberOptions audit;
    audit.name = "audit";
    audit.handler = [](const Event&, HandlerContext&) { return Outcome::RetryAfter(1h); };
    ASSERT_TRUE(bus->Subscribe(std::move(audit)).ok());
    Transaction tx = bus->Begin();
    auto id = tx.Publish(EventSpec{.type = kType, .subject = "order-1", .data = Payload(kJson)});
    ASSERT_TRUE(id.ok());
    event_id = id->ToString();
    ASSERT_TRUE(tx.Commit().ok());
    ASSERT_TRUE(bus->Start().ok());
    ASSERT_TRUE(testing::Eventually([&] {
      std::string out;
      return RunCliOutput("dlq ls " + dir.path(), &out) == 0 && out.find("no account") != std::string::npos;
    }));
    // Refused for its source (no URI-reference), not for its payload: its
    // payload is shown as well.
    Event foreign;
    foreign.id = EventId::Generate();
    foreign.type = kType;
    foreign.source = "device 7";
    foreign.subject = "order-2";
    foreign.time = std::chrono::system_clock::now();
    foreign.data = Payload(kJson);
    ASSERT_TRUE(bus->IngestEvent(foreign, IngestOptions{"file:x", ""}).status().IsInvalidArgument());
  }
  const std::string d = " " + dir.path();
  const std::string text = "schema version 1: " + std::string(kShown);
  const std::string member = R"("payload_json":")" + std::string(R"({\"order_id\": \"o-1\",\"priority\": 2})") + "\"";
  struct Case {
    std::string args, expected;
  } cases[] = {
      {"outbox show" + d + " --seq 1", text},
      {"outbox show" + d + " --seq 1 --json", member},
      {"outbox ls" + d + " --json", R"("payload_schema_version":1)"},
      {"event" + d + " " + event_id, text},
      {"event" + d + " " + event_id + " --json", member},
      {"dlq show" + d + " --subscriber billing --seq 1", text},
      {"dlq show" + d + " --subscriber billing --seq 1 --json", member},
      {"dlq ls" + d + " --json", member},
      {"quarantine show" + d + " --arrival 1", text},
      {"quarantine ls" + d + " --json", member},
      {"export" + d + " --format cloudevents-json", R"("dataschema":"walbus:schema:orders.order-approved.v1:v1:)"},
      {"export" + d + " --format cloudevents-json --data-json",
       R"("datacontenttype":"application/json","dataschema":)"},
      {"export" + d + " --format cloudevents-json --data-json", R"("data":)" + std::string(kShown) + "}"},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(RunCliOutput(c.args, &out), 0) << c.args;
    EXPECT_NE(out.find(c.expected), std::string::npos) << c.args << "\n" << out;
  }
  std::string plain;
  ASSERT_EQ(RunCliOutput("export" + d + " --format cloudevents-json", &plain), 0);
  EXPECT_NE(plain.find("\"data_base64\":"), std::string::npos) << "without --data-json the bytes stay: " << plain;
}

}  // namespace
}  // namespace walbus::internal
